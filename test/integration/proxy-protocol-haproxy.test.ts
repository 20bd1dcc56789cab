import type { IncomingMessage } from 'node:http';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHaproxy, type TestBalancer } from '../helpers/haproxy.js';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { sleep } from '../helpers/raw-connections.js';

/**
 * `serve --proxy-protocol` behind the real HAProxy (Debian's `haproxy`, TCP mode, `send-proxy-v2`, health checks
 * over TLS as docs/deployment.md configures them): the platform sees each client's own address, not HAProxy's.
 * Clients connect from 127.0.0.2 and 127.0.0.3 (loopback addresses of their own) to HAProxy on 127.0.0.1.
 */
let tp: TestPlatform;
let balancer: TestBalancer;
const seen: Array<{ ip: string | undefined; url: string | undefined }> = [];

beforeAll(async () => {
  tp = await startTestPlatform({ proxyProtocol: true, logLevel: 'debug' });
  tp.platform.app.server.on('request', (req: IncomingMessage) =>
    seen.push({ ip: req.socket.remoteAddress, url: req.url }),
  );
  balancer = await startHaproxy([tp.port], { sendProxyV2: true });
});
afterAll(async () => {
  await balancer?.stop();
  await tp?.stop();
});

/** GET through HAProxy from `localAddress`; retried while HAProxy has not yet seen the instance healthy. */
async function getFrom(localAddress: string, path: string): Promise<number> {
  const dispatcher = new Agent({ localAddress, connect: { ca: tp.ca, servername: 'localhost' } });
  try {
    const deadline = Date.now() + 10_000;
    for (;;) {
      try {
        const res = await request(`${balancer.url}${path}`, { dispatcher });
        await res.body.text();
        if (res.statusCode === 200 || Date.now() > deadline) return res.statusCode;
      } catch (err) {
        if (Date.now() > deadline) throw err;
      }
      await sleep(200);
    }
  } finally {
    await dispatcher.close();
  }
}

/** The client of each connection that came with a PROXY (not LOCAL) header, from the platform's debug log. */
function proxiedClients(): Array<string | undefined> {
  return tp.logs
    .map((l) => JSON.parse(l) as { msg?: string; client?: string })
    .filter((l) => l.msg === 'PROXY protocol: connection from client')
    .map((l) => l.client);
}

describe('behind HAProxy with send-proxy-v2', () => {
  it("HAProxy's health checks (PROXY LOCAL, then TLS) reach /readyz and keep the balancer's own address", async () => {
    const deadline = Date.now() + 10_000;
    while (!seen.some((s) => s.url === '/readyz') && Date.now() < deadline) await sleep(100);
    const checks = seen.filter((s) => s.url === '/readyz');
    expect(checks.length).toBeGreaterThan(0);
    expect(new Set(checks.map((c) => c.ip))).toEqual(new Set(['127.0.0.1']));
    // They came as LOCAL: no connection so far named a client.
    expect(proxiedClients()).toEqual([]);
  });

  it("each request carries its client's address: 127.0.0.2 and 127.0.0.3, not HAProxy's", async () => {
    expect(await getFrom('127.0.0.2', '/healthz?from=2')).toBe(200);
    expect(await getFrom('127.0.0.3', '/healthz?from=3')).toBe(200);
    expect(seen.filter((s) => s.url === '/healthz?from=2').map((s) => s.ip)).toEqual(['127.0.0.2']);
    expect(seen.filter((s) => s.url === '/healthz?from=3').map((s) => s.ip)).toEqual(['127.0.0.3']);
    // And the debug log names the client of each connection.
    expect(proxiedClients()).toEqual(expect.arrayContaining(['127.0.0.2', '127.0.0.3']));
  });
});
