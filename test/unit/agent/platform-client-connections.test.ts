import { createServer as createHttpsServer } from 'node:https';
import type { Socket } from 'node:net';
import { describe, expect, it, vi } from 'vitest';
import {
  ANSWER_MAX_BYTES,
  createPlatformClient,
  KEEP_ALIVE_MS,
} from '../../../agent/link/platform-client.js';
import { DEFAULT_CONNECTION_LIMITS } from '../../../platform/http/connection-limits.js';
import { ensureSelfSignedCertificate } from '../../../platform/http/tls.js';
import { tempDir } from '../../helpers/agent.js';
import { caught, ok } from '../../helpers/mocked-platform.js';

/**
 * The agent's platform client (agent/link/platform-client.ts) over real undici and real TLS on loopback: answers
 * capped at 1 MiB, and idle connections closed by the agent before the platform would.
 */

describe('answers are capped at 1 MiB (real undici, real TLS on loopback)', () => {
  const MIB = 1024 * 1024;
  /** A token answer padded with spaces to exactly `size` bytes: valid JSON, whatever its size. */
  const tokenAnswer = (size: number) => {
    const body = JSON.stringify(ok({ access_token: 'tok', token_type: 'Bearer', expires_in: 3600 }));
    return body + ' '.repeat(size - Buffer.byteLength(body));
  };

  async function httpsPlatform(handler: (path: string, res: import('node:http').ServerResponse) => void) {
    const tmp = tempDir('answer-cap-');
    const tls = await ensureSelfSignedCertificate(tmp.dir);
    const sockets = new Set<Socket>();
    const closedEarly: boolean[] = [];
    const server = createHttpsServer({ cert: tls.cert, key: tls.key }, (req, res) => {
      handler(req.url ?? '', res);
      res.on('close', () => closedEarly.push(!res.writableFinished));
    });
    server.on('secureConnection', (socket: Socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    const client = createPlatformClient({ baseUrl: `https://127.0.0.1:${port}`, ca: tls.cert });
    return {
      client,
      closedEarly,
      sockets,
      async close() {
        await client.close();
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
        tmp.remove();
      },
    };
  }

  it('is 1 MiB', () => {
    expect(ANSWER_MAX_BYTES).toBe(MIB);
  });

  it('fails a 2 MiB answer streamed without a length, drops the connection, and the next request works', async () => {
    let big = true;
    const p = await httpsPlatform((_path, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      if (!big) return res.end(tokenAnswer(200));
      // 2 MiB in 64 KiB chunks, as a stream (chunked: no content-length to refuse up front).
      const chunk = ' '.repeat(64 * 1024);
      res.write('{"code":0,"message":"success","data":{"access_token":"');
      let sent = 0;
      const more = () => {
        while (sent < 32) {
          sent++;
          if (!res.write(chunk)) return res.once('drain', more);
        }
        res.end('"}}');
      };
      more();
    });
    try {
      const error = await caught(p.client.exchangeToken('dev_1', 's'));
      expect(error).toMatchObject({ kind: 'malformed', retryable: true, status: 200 });
      expect(error.message).toBe(
        `POST /v1/device/token: answer above the ${MIB}-byte limit; connection dropped`,
      );
      // The server saw its answer cut off: the agent closed the connection rather than read on.
      await vi.waitFor(() => expect(p.closedEarly).toEqual([true]));
      big = false;
      await expect(p.client.exchangeToken('dev_1', 's')).resolves.toMatchObject({ access_token: 'tok' });
    } finally {
      await p.close();
    }
  });

  it('fails a 2 MiB answer that declares its length before reading its body', async () => {
    const p = await httpsPlatform((_path, res) => {
      const body = tokenAnswer(2 * MIB);
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    });
    try {
      const error = await caught(p.client.exchangeToken('dev_1', 's'));
      expect(error).toMatchObject({ kind: 'malformed', retryable: true });
      expect(error.message).toBe(
        `POST /v1/device/token: answer of ${2 * MIB} bytes declared, above the ${MIB}-byte limit; connection dropped`,
      );
    } finally {
      await p.close();
    }
  });

  it('reads an answer of exactly 1 MiB', async () => {
    const p = await httpsPlatform((_path, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(tokenAnswer(MIB));
    });
    try {
      await expect(p.client.exchangeToken('dev_1', 's')).resolves.toMatchObject({ access_token: 'tok' });
    } finally {
      await p.close();
    }
  });
});

describe('idle connections (real undici, real TLS on loopback)', () => {
  it('the agent keeps an idle connection 60 s, below the platform’s 75 s, so the agent closes first', () => {
    expect(KEEP_ALIVE_MS).toBe(60_000);
    expect(KEEP_ALIVE_MS).toBeLessThan(DEFAULT_CONNECTION_LIMITS.keepAliveMs);
  });

  it('closes an idle connection at its own limit although the platform offers a longer Keep-Alive', async () => {
    const tmp = tempDir('keep-alive-');
    const tls = await ensureSelfSignedCertificate(tmp.dir);
    const server = createHttpsServer({ cert: tls.cert, key: tls.key }, (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(ok({ access_token: 'tok', token_type: 'Bearer', expires_in: 3600 })));
    });
    server.keepAliveTimeout = 75_000;
    let closedAfterMs: number | undefined;
    server.on('secureConnection', (socket: Socket) => {
      const opened = Date.now();
      socket.on('close', () => {
        closedAfterMs = Date.now() - opened;
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    const client = createPlatformClient({
      baseUrl: `https://127.0.0.1:${port}`,
      ca: tls.cert,
      keepAliveMs: 800,
    });
    try {
      await client.exchangeToken('dev_1', 's');
      // The server announced `Keep-Alive: timeout=75` and would hold the connection 75 s.
      await vi.waitFor(() => expect(closedAfterMs).toBeDefined(), { timeout: 10_000, interval: 50 });
      expect(closedAfterMs).toBeLessThan(5_000);
    } finally {
      await client.close();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      tmp.remove();
    }
  });
});
