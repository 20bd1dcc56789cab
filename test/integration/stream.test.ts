import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import {
  createTenant,
  operatorToken,
  type RegisteredDevice,
  registerDevice,
  startTestPlatform,
  type TestPlatform,
} from '../helpers/platform.js';
import { createClientOf } from '../helpers/sealed-writes.js';
import { STREAM, streamCalls } from '../helpers/stream-client.js';

/**
 * The live telemetry stream `/v1/operator/stream` (DESIGN.md §8) over real WSS: the handshake and its refusals,
 * the per-subscription-set connection limit, malformed input and an expired token. What is streamed is in
 * stream-messages.test.ts, tenancy in stream-tenancy.test.ts.
 */

let tp: TestPlatform;
let tenant: Awaited<ReturnType<typeof createTenant>>;
let dev: RegisteredDevice;
let dev2: RegisteredDevice;

const { connect, refused, subscribe, postTelemetry, waitForSite, closeAll } = streamCalls(() => tp);

beforeAll(async () => {
  tp = await startTestPlatform();
  tenant = await createTenant(tp, 'Stream Alpha');
  dev = await registerDevice(tp, 'ST-SN-1', tenant.siteId);
  dev2 = await registerDevice(tp, 'ST-SN-2', tenant.siteId);
  for (const d of [dev, dev2]) await waitForSite(d.deviceId, tenant.siteId);
});
afterAll(async () => {
  closeAll();
  await tp.stop();
});

describe('handshake', () => {
  it('accepts the bearer token in the Authorization header and as ?access_token=', async () => {
    const viaHeader = await connect({ token: tenant.token });
    expect(await subscribe(viaHeader, { device_ids: [dev.deviceId] })).toEqual({
      type: 'subscribed',
      device_ids: [dev.deviceId],
    });
    const viaQuery = await connect({ queryToken: tenant.token });
    expect(await subscribe(viaQuery, { site_ids: [tenant.siteId] })).toEqual({
      type: 'subscribed',
      site_ids: [tenant.siteId],
    });
    await viaHeader.close();
    await viaQuery.close();
  });

  it('refuses the upgrade itself with an HTTP ErrorResponse', async () => {
    const cases: Array<[Parameters<typeof refused>[0], number, number]> = [
      [{}, 401, 2001],
      [{ token: 'not-a-token' }, 401, 2001],
      [{ queryToken: 'not-a-token' }, 401, 2001],
      [{ authorization: `Basic ${Buffer.from('a:b').toString('base64')}` }, 401, 2001],
      [{ token: `${tenant.token.slice(0, -4)}AAAA` }, 401, 2001],
    ];
    for (const [opts, status, code] of cases) {
      const res = await refused(opts);
      expect({ opts, status: res.status, code: res.body.code }).toEqual({ opts, status, code });
      expect(typeof res.body.message).toBe('string');
      expect(res.headers['x-api-version']).toBe('1.3.0');
    }
    // A plain GET without the Upgrade is answered with an ErrorResponse too.
    const plain = await tp.http.get(STREAM, { token: tenant.token });
    expect(plain.status).toBe(426);
    expect(plain.body).toMatchObject({ code: 1001, message: expect.any(String) });
    expect(plain.headers.upgrade).toBe('websocket');
    expect((await tp.http.get(STREAM)).body).toMatchObject({ code: 2001 });

    const writeOnly = await createTenant(tp, 'Stream Write Only', ['write']);
    const forbidden = await refused({ token: writeOnly.token });
    expect(forbidden.status).toBe(403);
    expect(forbidden.body.code).toBe(2003);
  });
});

describe('connection limit: one per client per subscription set', () => {
  it('closes a second connection with the same set with 4429 and lets a different set through', async () => {
    const first = await connect({ token: tenant.token });
    expect(await subscribe(first, { device_ids: [dev.deviceId, dev2.deviceId] })).toEqual({
      type: 'subscribed',
      device_ids: [dev.deviceId, dev2.deviceId].sort(),
    });

    // Same set, other order and a repeat: still the same set, and a second token of the same client.
    const secondToken = await operatorToken(tp.http, tenant.clientId, tenant.clientSecret);
    const dup = await connect({ token: secondToken });
    dup.send({ type: 'subscribe', device_ids: [dev2.deviceId, dev.deviceId, dev2.deviceId] });
    expect((await dup.closed).code).toBe(4429);

    const narrower = await connect({ token: tenant.token });
    expect((await subscribe(narrower, { device_ids: [dev.deviceId] })).type).toBe('subscribed');
    const sameIdsBySite = await connect({ token: tenant.token });
    expect((await subscribe(sameIdsBySite, { site_ids: [tenant.siteId] })).type).toBe('subscribed');

    // Another client of the same operator has its own budget.
    const { client, secret } = await createClientOf(tp, {
      operator_ids: [tenant.operatorId],
      scopes: ['read'],
    });
    const otherClient = await connect({ token: await operatorToken(tp.http, client.client_id, secret) });
    expect((await subscribe(otherClient, { device_ids: [dev.deviceId, dev2.deviceId] })).type).toBe(
      'subscribed',
    );

    // The first connection was not disturbed.
    const posted = await postTelemetry(dev2);
    expect(await first.take((m) => m.type === 'telemetry')).toMatchObject({ timestamp: posted.timestamp });

    // Once the holder is gone, the set may be opened again.
    await first.close();
    const again = await connect({ token: tenant.token });
    expect((await subscribe(again, { device_ids: [dev.deviceId, dev2.deviceId] })).type).toBe('subscribed');
    for (const c of [narrower, sameIdsBySite, otherClient, again]) await c.close();
  });
});

describe('malformed messages', () => {
  it('answers error messages and keeps the connection open', async () => {
    const conn = await connect({ token: tenant.token });
    const nextError = () => conn.take((m) => m.type === 'error');

    conn.send('this is not json');
    expect(await nextError()).toMatchObject({ code: 1002 });
    conn.send({ type: 'unsubscribe-everything' });
    expect(await nextError()).toMatchObject({ code: 1001 });
    conn.send({ type: 'subscribe', device_ids: [] });
    expect(await nextError()).toMatchObject({ code: 1001, details: { field: 'device_ids' } });
    conn.send({ type: 'subscribe' });
    expect(await nextError()).toMatchObject({ code: 1001 });
    conn.send({ type: 'subscribe', device_ids: [dev.deviceId], site_ids: [tenant.siteId] });
    expect(await nextError()).toMatchObject({ code: 1001 });
    conn.send({ type: 'subscribe', device_ids: ['../etc/passwd'] });
    expect(await nextError()).toMatchObject({ code: 1001 });
    conn.send('[1,2,3]');
    expect(await nextError()).toMatchObject({ code: 1001 });
    conn.ws.send(Buffer.from([1, 2, 3, 4]), { binary: true });
    expect(await nextError()).toMatchObject({ code: 1002 });
    for (const r of conn.received) expect(typeof r.data.message).toBe('string');

    expect(conn.ws.readyState).toBe(WebSocket.OPEN);
    await conn.fence();
    expect((await subscribe(conn, { device_ids: [dev.deviceId] })).type).toBe('subscribed');
    const posted = await postTelemetry(dev);
    expect(await conn.take((m) => m.type === 'telemetry')).toMatchObject({ timestamp: posted.timestamp });
    await conn.close();
  });
});

describe('expired token', () => {
  it('refuses the upgrade with 401/2002 once the access token has expired', async () => {
    const token = await operatorToken(tp.http, tenant.clientId, tenant.clientSecret);
    tp.advance(86_400_000 + 1_000);
    const res = await refused({ token });
    expect(res.status).toBe(401);
    expect(res.body.code).toBe(2002);
    const viaQuery = await refused({ queryToken: token });
    expect(viaQuery.status).toBe(401);
    expect(viaQuery.body.code).toBe(2002);
    // A fresh token works again.
    const fresh = await connect({
      token: await operatorToken(tp.http, tenant.clientId, tenant.clientSecret),
    });
    expect((await subscribe(fresh, { device_ids: [dev.deviceId] })).type).toBe('subscribed');
    await fresh.close();
  });
});
