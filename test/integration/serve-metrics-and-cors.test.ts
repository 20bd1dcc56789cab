import { existsSync } from 'node:fs';
import { readdir, readFile, readlink } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { freePort } from '../helpers/redis.js';
import { servedPlatforms } from '../helpers/served-platforms.js';

/** `charger-platform serve` (DESIGN.md §15) as the built program: its metrics listener and its CORS origins. */

const { dirs, serve, connect, stopAll } = servedPlatforms('cp-serve-');

afterAll(async () => {
  await stopAll();
});

/** The TCP ports a process listens on (Linux: its socket inodes in /proc/PID/fd, found LISTENing in net/tcp*). */
async function listeningPorts(pid: number): Promise<number[]> {
  const inodes = new Set<string>();
  for (const fd of await readdir(`/proc/${pid}/fd`)) {
    const socket = /^socket:\[(\d+)\]$/.exec(await readlink(`/proc/${pid}/fd/${fd}`).catch(() => ''));
    if (socket) inodes.add(socket[1]!);
  }
  const ports = new Set<number>();
  for (const table of ['tcp', 'tcp6']) {
    const rows = (await readFile(`/proc/${pid}/net/${table}`, 'utf8')).split('\n').slice(1);
    for (const row of rows) {
      const cols = row.trim().split(/\s+/);
      // local_address is HEXIP:HEXPORT; state 0A is LISTEN; column 9 is the inode.
      if (cols[3] === '0A' && inodes.has(cols[9]!)) ports.add(Number.parseInt(cols[1]!.split(':')[1]!, 16));
    }
  }
  return [...ports].sort((a, b) => a - b);
}

describe('serve --metrics-host, --metrics-port (DESIGN.md §15)', () => {
  it('serves Prometheus metrics on a plain-HTTP listener of their own, closed with the rest', async () => {
    const metricsPort = await freePort();
    const s = await serve([
      '--data-dir',
      await dirs.make(),
      '--self-signed',
      '--metrics-host',
      '127.0.0.1',
      '--metrics-port',
      String(metricsPort),
    ]);
    expect(s.metricsUrl).toBe(`http://127.0.0.1:${metricsPort}/metrics`);
    const http = await connect(s);
    expect((await http.get('/healthz')).status).toBe(200);

    const metrics = await request(s.metricsUrl!);
    expect(metrics.statusCode).toBe(200);
    expect(metrics.headers['content-type']).toBe('text/plain; version=0.0.4; charset=utf-8');
    const text = await metrics.body.text();
    expect(text).toMatch(
      /charger_platform_http_requests_total\{route="\/healthz",method="GET",status="200",instance="[^"]+"\} 1\b/,
    );
    expect(text).toContain('# TYPE charger_platform_chargers_online gauge');
    const other = await request(`http://127.0.0.1:${metricsPort}/v1/openapi.json`);
    expect(other.statusCode).toBe(404);
    await other.body.dump();
    const post = await request(s.metricsUrl!, { method: 'POST' });
    expect(post.statusCode).toBe(405);
    expect(post.headers.allow).toBe('GET, HEAD');
    await post.body.dump();

    // Not on the API port: there it is a route that does not exist.
    const api = await http.get('/metrics');
    expect(api.status).toBe(404);
    expect(api.body.code).toBe(3001);
    expect(await listeningPorts(s.child.pid!)).toEqual([s.port, metricsPort].sort((a, b) => a - b));

    expect(await s.stop()).toEqual({ code: 0, signal: null });
    await expect(request(s.metricsUrl!)).rejects.toThrow(/ECONNREFUSED|other side closed|socket/i);
  });

  it('--metrics-port 0: no metrics listener', async () => {
    const s = await serve(['--data-dir', await dirs.make(), '--self-signed', '--metrics-port', '0']);
    expect(s.metricsUrl).toBeUndefined();
    expect(s.stderr()).not.toContain('metrics');
    expect(await listeningPorts(s.child.pid!)).toEqual([s.port]);
    expect(await s.stop()).toEqual({ code: 0, signal: null });
  });

  it('a metrics port in use: exit 1, naming the options', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = (taken.address() as { port: number }).port;
    try {
      const res = await runCli([
        'serve',
        '--data-dir',
        await dirs.make(),
        '--self-signed',
        '--port',
        '0',
        '--metrics-port',
        String(port),
      ]);
      expect(res.code).toBe(1);
      expect(res.stderr).toBe(
        `charger-platform: cannot serve metrics on 127.0.0.1:${port} (--metrics-host, --metrics-port; 0 turns ` +
          'them off): the port is in use (another instance on this machine needs a --metrics-port of its own)\n',
      );
    } finally {
      await new Promise((resolve) => taken.close(resolve));
    }
  });
});

describe('serve --cors-origin (DESIGN.md §15)', () => {
  it('allows each origin given, repeated or comma-separated, and no other', async () => {
    const s = await serve([
      '--data-dir',
      await dirs.make(),
      '--self-signed',
      '--cors-origin',
      'https://app.example.com,https://ops.example.com:8443',
      '--cors-origin',
      'http://localhost:5173',
    ]);
    const http = await connect(s);
    const preflight = (origin: string) =>
      http.call('OPTIONS', '/v1/operator/devices/dev_x', {
        headers: { origin, 'access-control-request-method': 'GET' },
      });
    for (const origin of [
      'https://app.example.com',
      'https://ops.example.com:8443',
      'http://localhost:5173',
    ]) {
      const res = await preflight(origin);
      expect(res.status, origin).toBe(204);
      expect(res.headers['access-control-allow-origin']).toBe(origin);
    }
    const refused = await preflight('https://other.example.com');
    expect(refused.status).toBe(403);
    expect(refused.headers['access-control-allow-origin']).toBeUndefined();
    expect(await s.stop()).toEqual({ code: 0, signal: null });
  });

  it.each([
    ['a path', 'https://app.example.com/', 'is not an origin'],
    ['a wildcard', '*', 'name each origin exactly'],
    ['no scheme', 'app.example.com', 'is not an origin'],
  ])('refuses %s before anything is written', async (_case, origin, message) => {
    const dir = join(await dirs.make(), 'never-created');
    const res = await runCli(['serve', '--data-dir', dir, '--self-signed', '--cors-origin', origin]);
    expect(res.code).toBe(1);
    expect(res.stderr).toContain("option '--cors-origin <origins>' argument");
    expect(res.stderr).toContain(message);
    expect(existsSync(dir)).toBe(false);
  });
});
