import { describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import {
  type ConnectionLimits,
  DEFAULT_CONNECTION_LIMITS,
  STRICT_TRANSPORT_SECURITY,
} from '../../platform/http/connection-limits.js';
import { createTenant, registerDevice, startTestPlatform } from '../helpers/platform.js';
import { platformPerFile } from '../helpers/platform-per-file.js';
import { exchange, sleep, tcpConnect, tlsConnect, watch } from '../helpers/raw-connections.js';

/**
 * DESIGN.md §18 "Connections are bounded", over real TLS on loopback. The limits are shortened (the production
 * ones are 30 s, 10 s and 75 s: the first test checks them) so that each cut happens within seconds; Node's own
 * timers do the cutting, so the clock here is the real one. The connection cap, HSTS and the CLI's options are
 * in connection-options.test.ts.
 */
const LIMITS: Partial<ConnectionLimits> = {
  requestMs: 2_000,
  uploadMs: 6_000,
  firstRequestMs: 1_000,
  keepAliveMs: 1_500,
};
/** Slack for the check interval (a tenth of the limit) and a loaded machine. */
const SLACK_MS = 2_500;

const tp = platformPerFile({ connections: LIMITS });

const isoNow = () => new Date().toISOString();

describe('the production limits', () => {
  it('are 30 s for a request, an hour for an artifact upload, 10 s to the first request, 75 s of keep-alive and 20,000 connections', async () => {
    expect(DEFAULT_CONNECTION_LIMITS).toEqual({
      requestMs: 30_000,
      uploadMs: 3_600_000,
      firstRequestMs: 10_000,
      keepAliveMs: 75_000,
      maxConnections: 20_000,
    });
    const prod = await startTestPlatform();
    try {
      const server = prod.platform.app.server as import('node:https').Server;
      // Bodies are timed by the platform itself (request-times.ts: an artifact upload may take longer); headers
      // by Node.
      expect(server.requestTimeout).toBe(0);
      expect(server.headersTimeout).toBe(30_000);
      expect(server.keepAliveTimeout).toBe(75_000);
      expect(server.maxConnections).toBe(20_000);
      // Node's check for overdue requests runs every second (its default, 30 s, would allow a minute).
      expect((server as unknown as { connectionsCheckingInterval: number }).connectionsCheckingInterval).toBe(
        1_000,
      );
      // What clients are told: the agent (60 s) and browsers close before the platform does.
      const res = await prod.http.get('/healthz');
      expect(res.headers['keep-alive']).toBe('timeout=75');
    } finally {
      await prod.stop();
    }
  });
});

describe('a request must arrive whole in time', () => {
  it('a body trickled one byte at a time is cut at the limit with a 408, and the connection closed', async () => {
    const socket = await tlsConnect(tp.port, tp.ca);
    const watched = watch(socket);
    socket.write(
      'POST /v1/device/register HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n' +
        'Content-Length: 200\r\n\r\n{',
    );
    let sent = 1;
    const trickle = setInterval(() => {
      if (!socket.destroyed) {
        socket.write(' ');
        sent++;
      }
    }, 250);
    try {
      const { afterMs, received } = await watched.closed;
      // Past the first-request limit (1 s): the cut is the request limit's. (The server's clock for it may start a
      // little before the client saw its handshake done.)
      expect(afterMs).toBeGreaterThanOrEqual(LIMITS.requestMs! * 0.75);
      expect(afterMs).toBeLessThan(LIMITS.requestMs! + SLACK_MS);
      // It kept sending until the end: the cut is the time limit, not an idle timeout.
      expect(sent).toBeGreaterThanOrEqual(6);
      expect(received).toMatch(/^HTTP\/1\.1 408 /);
      expect(received).toMatch(/\r\nConnection: close\r\n/i);
      expect(received).toContain(`Strict-Transport-Security: ${STRICT_TRANSPORT_SECURITY}`);
      expect(received).toContain('"code":1002');
    } finally {
      clearInterval(trickle);
    }
  });

  it('a long poll waits past the request limit and answers 200', async () => {
    const t = await createTenant(tp, 'long-poll');
    const d = await registerDevice(tp, `SN-LP-${Date.now()}`, t.siteId);
    const started = performance.now();
    const res = await tp.http.get('/v1/device/commands?wait=3', { token: d.token });
    expect(res.status).toBe(200);
    // It waited its 3 s, beyond the 2-s request limit, and was not cut.
    expect(performance.now() - started).toBeGreaterThanOrEqual(2_900);
    expect(res.headers['strict-transport-security']).toBe(STRICT_TRANSPORT_SECURITY);
  });

  it('the stream stays open past every limit and still answers', async () => {
    const t = await createTenant(tp, 'stream');
    const ws = new WebSocket(`wss://127.0.0.1:${tp.port}/v1/operator/stream`, {
      ca: tp.ca,
      headers: { authorization: `Bearer ${t.token}` },
    });
    ws.on('error', () => undefined);
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    try {
      await sleep(LIMITS.requestMs! + LIMITS.keepAliveMs! + 500);
      expect(ws.readyState).toBe(WebSocket.OPEN);
      const pong = new Promise<unknown>((resolve) =>
        ws.on('message', (raw) => {
          const m = JSON.parse(raw.toString()) as { type: string };
          if (m.type === 'pong') resolve(m);
        }),
      );
      ws.send(JSON.stringify({ type: 'ping' }));
      await expect(pong).resolves.toMatchObject({ type: 'pong' });
    } finally {
      ws.close();
    }
  });
});

describe('an artifact upload may take longer, while its bytes keep coming (DESIGN.md §19)', () => {
  /** An upload's request head, by hand, so that its body can be trickled; the signature is only checked for form. */
  async function startUpload(version: string, length: number) {
    const t = await createTenant(tp, `upload-${version}`);
    const socket = await tlsConnect(tp.port, tp.ca);
    const watched = watch(socket);
    socket.write(
      `POST /v1/operator/artifacts?kind=agent&version=${version} HTTP/1.1\r\nHost: localhost\r\n` +
        `Authorization: Bearer ${t.token}\r\nContent-Type: application/octet-stream\r\n` +
        `X-Artifact-Signature: ${'A'.repeat(86)}==\r\nContent-Length: ${length}\r\n\r\n`,
    );
    return { socket, watched };
  }
  const trickle = (socket: import('node:net').Socket, bytes: number) => {
    let sent = 0;
    const timer = setInterval(() => {
      if (socket.destroyed || sent >= bytes) return clearInterval(timer);
      socket.write('x');
      sent++;
    }, 250);
    return { stop: () => clearInterval(timer), sent: () => sent };
  };

  it('a body trickled past the request limit is taken whole', async () => {
    const { socket, watched } = await startUpload('1.0.0-slow', 14);
    const body = trickle(socket, 14);
    try {
      // 14 bytes at 4 a second: about 3.5 s, past the 2-s request limit and within the 6-s upload limit.
      while (body.sent() < 14 && !watched.isClosed()) await sleep(100);
      expect(watched.isClosed()).toBe(false);
      await sleep(500);
      socket.end();
      const { received } = await watched.closed;
      expect(received).toMatch(/^HTTP\/1\.1 200 /);
      expect(received).toContain('"version":"1.0.0-slow"');
      expect(received).toContain('"size":14');
    } finally {
      body.stop();
    }
  });

  it('an upload with no byte for the request limit is cut with a 408', async () => {
    const { socket, watched } = await startUpload('1.0.0-stalled', 100);
    socket.write('xx');
    const { afterMs, received } = await watched.closed;
    expect(afterMs).toBeGreaterThanOrEqual(LIMITS.requestMs! * 0.75);
    expect(afterMs).toBeLessThan(LIMITS.requestMs! + SLACK_MS);
    expect(received).toMatch(/^HTTP\/1\.1 408 /);
    expect(received).toContain('"code":1002');
  });

  it('an upload that keeps trickling is cut at the upload limit with a 408', async () => {
    const { socket, watched } = await startUpload('1.0.0-endless', 1_000);
    const body = trickle(socket, 1_000);
    try {
      const { afterMs, received } = await watched.closed;
      // Bytes kept coming (no pause of 2 s): the cut is the upload limit's, 6 s.
      expect(afterMs).toBeGreaterThanOrEqual(LIMITS.uploadMs! * 0.9);
      expect(afterMs).toBeLessThan(LIMITS.uploadMs! + SLACK_MS);
      expect(body.sent()).toBeGreaterThanOrEqual(20);
      expect(received).toMatch(/^HTTP\/1\.1 408 /);
    } finally {
      body.stop();
    }
  });
});

describe('a connection must send its first request in time', () => {
  it('a TLS connection that sends nothing is closed at the limit', async () => {
    // Timed from before the TCP connect: the limit runs from the accept, the handshake included.
    const started = performance.now();
    const socket = await tlsConnect(tp.port, tp.ca);
    const { received } = await watch(socket).closed;
    const afterMs = performance.now() - started;
    expect(afterMs).toBeGreaterThanOrEqual(LIMITS.firstRequestMs! - 50);
    expect(afterMs).toBeLessThan(LIMITS.firstRequestMs! + SLACK_MS);
    expect(received).toBe('');
  });

  it('a TCP connection that never starts the TLS handshake is closed at the limit', async () => {
    const socket = await tcpConnect(tp.port);
    const { afterMs, received } = await watch(socket).closed;
    expect(afterMs).toBeGreaterThanOrEqual(LIMITS.firstRequestMs! - 100);
    expect(afterMs).toBeLessThan(LIMITS.firstRequestMs! + SLACK_MS);
    expect(received).toBe('');
  });

  it('a TCP connection that stops half-way through its ClientHello is closed at the limit', async () => {
    const socket = await tcpConnect(tp.port);
    const watched = watch(socket);
    socket.write(Buffer.from('16030100c8010000c40303', 'hex'));
    const { afterMs } = await watched.closed;
    expect(afterMs).toBeGreaterThanOrEqual(LIMITS.firstRequestMs! - 100);
    expect(afterMs).toBeLessThan(LIMITS.firstRequestMs! + SLACK_MS);
  });

  it('a connection that sent its first request in time is not cut by that limit', async () => {
    const socket = await tlsConnect(tp.port, tp.ca);
    const watched = watch(socket);
    const res = await exchange(socket, 'GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n');
    expect(res.status).toBe(200);
    // Past the first-request limit, within keep-alive: still open, and a second request is answered.
    await sleep(LIMITS.firstRequestMs! + 200);
    expect(watched.isClosed()).toBe(false);
    const again = await exchange(socket, 'GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n');
    expect(again.status).toBe(200);
    socket.destroy();
  });
});

describe('keep-alive', () => {
  it('an idle keep-alive connection is closed after the keep-alive limit, not before', async () => {
    const socket = await tlsConnect(tp.port, tp.ca);
    const res = await exchange(socket, 'GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n');
    expect(res.status).toBe(200);
    expect(res.headers['keep-alive']).toBe('timeout=1');
    const watched = watch(socket);
    await sleep(LIMITS.keepAliveMs! / 2);
    expect(watched.isClosed()).toBe(false);
    const { afterMs } = await watched.closed;
    // The server's idle clock starts once it has written the answer, a little before the client has read it.
    expect(afterMs).toBeGreaterThanOrEqual(LIMITS.keepAliveMs! - 300);
    expect(afterMs).toBeLessThan(LIMITS.keepAliveMs! + SLACK_MS);
  });
});

describe('slow connections do not hold up the others', () => {
  it('while slow ones are held open, a charger heartbeats and posts telemetry', async () => {
    const t = await createTenant(tp, 'busy');
    const d = await registerDevice(tp, `SN-BUSY-${Date.now()}`, t.siteId);
    // Slow ones of every kind: a trickled body, a silent TLS connection, a silent TCP connection.
    const slowBody = await tlsConnect(tp.port, tp.ca);
    slowBody.write(
      'POST /v1/device/heartbeat HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n' +
        'Content-Length: 100\r\n\r\n{',
    );
    const slow = [watch(slowBody), watch(await tlsConnect(tp.port, tp.ca)), watch(await tcpConnect(tp.port))];
    const trickle = setInterval(() => slowBody.writable && slowBody.write(' '), 200);
    try {
      for (let i = 0; i < 3; i++) {
        const hb = await tp.http.post('/v1/device/heartbeat', {
          token: d.token,
          json: { timestamp: isoNow(), status: 'online', fault_code: 0 },
        });
        expect(hb.status).toBe(200);
        const tel = await tp.http.post('/v1/device/telemetry', {
          token: d.token,
          json: { timestamp: isoNow(), connector_id: 1, state: 'charging', power: 7 },
        });
        expect(tel.status).toBe(200);
      }
      // Those answers came while every slow connection was still open.
      expect(slow.map((s) => s.isClosed())).toEqual([false, false, false]);
      await Promise.all(slow.map((s) => s.closed));
    } finally {
      clearInterval(trickle);
    }
  });
});
