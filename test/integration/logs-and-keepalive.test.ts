import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { signRequest } from '../../shared/index.js';
import { createTenant, registerDevice, startTestPlatform, type TestPlatform } from '../helpers/platform.js';

describe('request logs', () => {
  let tp: TestPlatform;
  beforeAll(async () => {
    tp = await startTestPlatform({ logLevel: 'info' });
  });
  afterAll(async () => {
    await tp.stop();
  });

  it('carry a request id and never a token, secret or signature', async () => {
    const tenant = await createTenant(tp, 'Log Co');
    const dev = await registerDevice(tp, 'LOG-SN-1', tenant.siteId);
    const body = JSON.stringify({ timestamp: new Date().toISOString(), connector_id: 1, state: 'idle' });
    const stamp = Math.floor(Date.now() / 1000);
    const signature = signRequest(dev.secret, 'POST', '/v1/device/telemetry', stamp, body);
    const signed = await tp.http.post('/v1/device/telemetry', {
      token: dev.token,
      raw: body,
      contentType: 'application/json',
      headers: { 'x-signature': signature, 'x-timestamp': String(stamp), 'x-request-id': 'trace-me-42' },
    });
    expect(signed.status).toBe(200);
    expect(signed.headers['x-request-id']).toBe('trace-me-42');
    // Secrets in a query string and in a failing body.
    await tp.http.get(`/v1/operator/stream?access_token=${tenant.token}`);
    await tp.http.post('/v1/operator/oauth/token', {
      json: {
        client_id: tenant.clientId,
        client_secret: tenant.clientSecret,
        grant_type: 'client_credentials',
      },
    });
    await tp.http.post('/v1/operator/oauth/token', {
      json: {
        client_id: tenant.clientId,
        client_secret: 'wrong-secret-value',
        grant_type: 'client_credentials',
      },
    });
    await tp.http.post('/v1/device/token', {
      json: { device_id: dev.deviceId, device_secret: dev.secret, grant_type: 'client_credentials' },
    });

    const text = tp.logs.join('');
    expect(tp.logs.length).toBeGreaterThan(8);
    const lines = tp.logs.map(
      (l) => JSON.parse(l) as { reqId?: string; req?: { url: string }; res?: unknown },
    );
    expect(lines.some((l) => l.reqId === 'trace-me-42')).toBe(true);
    const requestLines = lines.filter((l) => 'req' in l || 'res' in l);
    expect(requestLines.length).toBeGreaterThan(8);
    expect(requestLines.every((l) => typeof l.reqId === 'string')).toBe(true);
    expect(lines.some((l) => l.req?.url === '/v1/operator/stream?access_token=[redacted]')).toBe(true);
    for (const secret of [
      tenant.token,
      tenant.clientSecret,
      dev.token,
      dev.secret,
      signature,
      'wrong-secret-value',
    ]) {
      expect(text).not.toContain(secret);
    }
    expect(text.toLowerCase()).not.toContain('authorization');
  });
});

describe('stream keep-alive', () => {
  let tp: TestPlatform;
  beforeAll(async () => {
    tp = await startTestPlatform({ streamPingMs: 100, tokenTtlSeconds: 3600 });
  });
  afterAll(async () => {
    await tp.stop();
  });
  const open = (token: string, autoPong: boolean) =>
    new Promise<WebSocket>((resolve, reject) => {
      const ws = new WebSocket(`${tp.url.replace('https', 'wss')}/v1/operator/stream`, {
        ca: tp.ca,
        headers: { authorization: `Bearer ${token}` },
        autoPong,
      });
      ws.once('open', () => resolve(ws));
      ws.once('error', reject);
    });
  const closed = (ws: WebSocket) =>
    new Promise<{ code: number; ms: number }>((resolve) => {
      const t0 = Date.now();
      ws.once('close', (code) => resolve({ code, ms: Date.now() - t0 }));
    });

  it('pings, keeps a client that answers and drops one that does not', async () => {
    const tenant = await createTenant(tp, 'Ping Co');
    const healthy = await open(tenant.token, true);
    let pings = 0;
    healthy.on('ping', () => pings++);
    const silent = await open(tenant.token, false);
    const dropped = await closed(silent);
    // Terminated after one unanswered ping period: code 1006 (no close frame).
    expect(dropped.code).toBe(1006);
    expect(dropped.ms).toBeLessThan(2000);
    expect(pings).toBeGreaterThanOrEqual(2);
    expect(healthy.readyState).toBe(WebSocket.OPEN);
    healthy.close();
  });

  it('closes a connection whose access token expired with 4401', async () => {
    const tenant = await createTenant(tp, 'Expiry Co');
    const ws = await open(tenant.token, true);
    const done = closed(ws);
    tp.advance(3601_000);
    expect((await done).code).toBe(4401);
  });
});
