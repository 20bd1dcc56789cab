import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from './redis.js';

/**
 * HAProxy (Debian's `haproxy`) in TCP mode in front of platform instances, as docs/deployment.md runs it: TLS
 * ends at the instances, `/readyz` is the health check (over TLS), a connection refused by a dead instance is
 * retried on another (`option redispatch`).
 */
export interface TestBalancer {
  url: string;
  port: number;
  stop(): Promise<void>;
}

/**
 * The configuration docs/deployment.md shows, for these backend ports; `sendProxyV2` adds `send-proxy-v2` (the
 * instances then run with `--proxy-protocol`).
 */
export function haproxyConfig(
  port: number,
  backends: readonly number[],
  opts: { sendProxyV2?: boolean } = {},
): string {
  return [
    'global',
    '  maxconn 4000',
    'defaults',
    '  mode tcp',
    '  timeout connect 2s',
    '  timeout client 120s',
    '  timeout server 120s',
    '  retries 3',
    '  option redispatch',
    'frontend api',
    `  bind 127.0.0.1:${port}`,
    '  default_backend platform',
    'backend platform',
    '  balance roundrobin',
    '  option httpchk GET /readyz',
    '  http-check expect status 200',
    `  default-server inter 500ms fall 2 rise 2 check check-ssl verify none${opts.sendProxyV2 ? ' send-proxy-v2' : ''}`,
    ...backends.map((p, i) => `  server instance${i + 1} 127.0.0.1:${p}`),
    '',
  ].join('\n');
}

export async function startHaproxy(
  backends: readonly number[],
  opts: { sendProxyV2?: boolean } = {},
): Promise<TestBalancer> {
  const port = await freePort();
  const dir = await mkdtemp(join(tmpdir(), 'cp-haproxy-'));
  const config = join(dir, 'haproxy.cfg');
  await writeFile(config, haproxyConfig(port, backends, opts));
  const child: ChildProcess = spawn('haproxy', ['-f', config, '-db'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-4_000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exited = once(child, 'exit');
  const deadline = Date.now() + 10_000;
  while (!(await accepts(port))) {
    if (child.exitCode !== null || Date.now() > deadline)
      throw new Error(`haproxy did not start on ${port}: ${output}`);
    await sleep(50);
  }
  return {
    url: `https://127.0.0.1:${port}`,
    port,
    async stop() {
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        await exited;
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}
