import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { STRICT_TRANSPORT_SECURITY } from '../../platform/http/connection-limits.js';
import { PROXY_V2_SIGNATURE } from '../../platform/http/proxy-protocol.js';
import { runCli, spawnServe, tempDirs } from '../helpers/cli.js';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { platformPerFile } from '../helpers/platform-per-file.js';
import { exchange, sleep, tcpConnect, tlsConnect, watch } from '../helpers/raw-connections.js';

/**
 * DESIGN.md §18 "Connections are bounded", over real TLS on loopback: the cap on connections
 * (`--max-connections`), Strict-Transport-Security on every answer, and the built CLI passing
 * `--max-connections` and `--proxy-protocol` to the server. The time limits are in connection-bounds.test.ts.
 */

const tp = platformPerFile();

describe('--max-connections', () => {
  it('with 5 held, a 6th connection is closed at once; when one goes, a new one is served', async () => {
    const capped = await startTestPlatform({ connections: { maxConnections: 5 }, logLevel: 'warn' });
    const held: import('node:tls').TLSSocket[] = [];
    try {
      for (let i = 0; i < 5; i++) held.push(await tlsConnect(capped.port, capped.ca));
      const sixth = await tcpConnect(capped.port);
      const { received } = await watch(sixth).closed;
      expect(received).toBe('');
      await expect(tlsConnect(capped.port, capped.ca)).rejects.toThrow();
      // One warning for both (at most one a minute), naming the option.
      const warnings = capped.logs.filter((l) => l.includes('--max-connections'));
      expect(warnings).toHaveLength(1);
      expect(JSON.parse(warnings[0]!)).toMatchObject({ level: 40, maxConnections: 5 });

      const leaving = held.pop()!;
      const left = watch(leaving).closed;
      leaving.destroy();
      await left;
      await untilConnections(capped, 4);
      const fresh = await tlsConnect(capped.port, capped.ca);
      held.push(fresh);
      const res = await exchange(fresh, 'GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n');
      expect(res.status).toBe(200);
      expect(held).toHaveLength(5);
    } finally {
      for (const s of held) s.destroy();
      await capped.stop();
    }
  });
});

describe('Strict-Transport-Security on every answer', () => {
  it.each([
    ['a 200', '/healthz', 200],
    ['a 401', '/v1/operator/devices', 401],
    ['a 404', '/no/such/path', 404],
    ['the OpenAPI document', '/v1/openapi.json', 200],
    ['the dashboard (its redirect)', '/dashboard/', 301],
    ['the API reference', '/docs', 200],
    ['a 400 for an undecodable path', '/v1/operator/devices/%E0%A4%A', 400],
  ])('%s', async (_name, path, status) => {
    const res = await tp.http.get(path);
    expect(res.status).toBe(status);
    expect(res.headers['strict-transport-security']).toBe(STRICT_TRANSPORT_SECURITY);
  });

  it('a 400 for a request HTTP cannot parse', async () => {
    const socket = await tlsConnect(tp.port, tp.ca);
    const res = await exchange(socket, 'NOT HTTP AT ALL\r\n\r\n');
    expect(res.status).toBe(400);
    expect(res.headers['strict-transport-security']).toBe(STRICT_TRANSPORT_SECURITY);
    socket.destroy();
  });
});

/** Waits (up to 5 s) until the server counts `n` connections. */
async function untilConnections(platform: TestPlatform, n: number): Promise<void> {
  const server = platform.platform.app.server;
  const deadline = Date.now() + 5_000;
  for (;;) {
    const count = await new Promise<number>((resolve, reject) =>
      server.getConnections((err, c) => (err ? reject(err) : resolve(c))),
    );
    if (count === n) return;
    if (Date.now() > deadline) throw new Error(`the server holds ${count} connections, not ${n}`);
    await sleep(20);
  }
}

describe('serve --max-connections and --proxy-protocol (the built CLI)', () => {
  const dirs = tempDirs('cp-conn-serve-');
  afterAll(() => dirs.removeAll());

  it.each([
    ['0', 'must be between 1 and 1000000'],
    ['-5', 'must be a whole number'],
    ['1.5', 'must be a whole number'],
    ['many', 'must be a whole number'],
  ])('--max-connections %s is refused with a sentence naming it', async (value, why) => {
    const dir = join(await dirs.make(), 'never-created');
    const res = await runCli(['serve', '--data-dir', dir, '--self-signed', '--max-connections', value]);
    expect(res.code).not.toBe(0);
    expect(res.stderr).toContain('--max-connections');
    expect(res.stderr).toContain(why);
    expect(existsSync(dir)).toBe(false);
  });

  it('passes both to the server: 2 connections held, a 3rd closed at once; PROXY v2 headers expected', async () => {
    const dir = await dirs.make();
    const s = await spawnServe([
      '--data-dir',
      dir,
      '--self-signed',
      '--max-connections',
      '2',
      '--proxy-protocol',
    ]);
    const ca = await readFile(s.certPath, 'utf8');
    try {
      const held = [await tcpConnect(s.port), await tcpConnect(s.port)];
      const third = watch(await tcpConnect(s.port));
      const { afterMs, received } = await third.closed;
      expect(received).toBe('');
      expect(afterMs).toBeLessThan(1_000);
      for (const h of held) h.destroy();
      // With a slot free again: TLS without a PROXY header is refused, with one it is served.
      await sleep(200);
      await expect(tlsConnect(s.port, ca)).rejects.toThrow();
      const raw = await tcpConnect(s.port);
      raw.write(
        Buffer.concat([
          PROXY_V2_SIGNATURE,
          Buffer.from([0x20, 0x00, 0x00, 0x00]), // LOCAL, no addresses
        ]),
      );
      const socket = await tlsConnect(s.port, ca, { socket: raw });
      const res = await exchange(socket, 'GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n');
      expect(res.status).toBe(200);
      expect(res.headers['strict-transport-security']).toBe(STRICT_TRANSPORT_SECURITY);
      socket.destroy();
    } finally {
      await s.stop();
    }
  });
});
