import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { signRequest } from '../../shared/index.js';
import {
  type createTenant,
  expectError,
  type RegisteredDevice,
  type TestPlatform,
} from '../helpers/platform.js';
import { type SignedCall, signedCalls, startSigningPlatform, stopPath } from '../helpers/signed-calls.js';

/**
 * Optional HMAC request signing (spec "Optional request signing", DESIGN.md §8): `X-Signature` = lowercase hex
 * HMAC-SHA256 over METHOD + path-with-query + X-Timestamp + raw body, X-Timestamp in Unix seconds within
 * ±300 s, each signature accepted once. Requiring signatures (through the admin CLI) is tested in
 * signing-required.test.ts.
 */

let tp: TestPlatform;
let tenant: Awaited<ReturnType<typeof createTenant>>;
let other: Awaited<ReturnType<typeof createTenant>>;
let dev: RegisteredDevice;

beforeAll(async () => {
  ({ tp, tenant, other, dev } = await startSigningPlatform());
});
afterAll(async () => {
  await tp.stop();
});
// Every test starts with fresh rate-limit windows (the fake clock also moves the signature window along).
beforeEach(() => {
  tp.advance(60_000);
});

const { nowSeconds, signedHeaders, send, telemetryBody, opStop, devTelemetry } = signedCalls(() => ({
  tp,
  tenant,
  dev,
}));

describe('signed requests', () => {
  it('accepts a signed operator write and a signed charger write', async () => {
    const stop = await send(opStop());
    expect(stop.status).toBe(200);
    expect(stop.body.data.status).toBe('queued');

    const tel = await send(devTelemetry());
    expect(tel.status).toBe(200);
    expect(tel.body.data).toEqual({ accepted: 1 });

    // The query string is part of the signed path (a signed read); a body-less DELETE signs the empty body.
    const withQuery = await send({
      method: 'GET',
      path: `/v1/operator/devices?site_id=${tenant.siteId}&size=5`,
      token: tenant.token,
      secret: tenant.clientSecret,
    });
    expect(withQuery.status, withQuery.text).toBe(200);
    expect(withQuery.body.data.items.map((d: { device_id: string }) => d.device_id)).toContain(dev.deviceId);
    const cancel = await send({
      method: 'DELETE',
      path: `/v1/operator/commands/${stop.body.data.command_id}`,
      token: tenant.token,
      secret: tenant.clientSecret,
    });
    expect(cancel.status).toBe(200);
    expect(cancel.body.data.status).toBe('cancelled');
  });

  it('refuses tampered requests, wrong secrets and malformed signatures with 401/2001', async () => {
    const cases: Array<[string, SignedCall]> = [
      ['tampered body', opStop({ signBody: JSON.stringify({ reason: 'fault' }) })],
      ['body re-serialised', opStop({ signBody: '{ "reason": "user_request" }' })],
      ['tampered path', opStop({ signPath: stopPath(dev.deviceId, 2) })],
      [
        'tampered query',
        opStop({ path: `${stopPath(dev.deviceId)}?a=2`, signPath: `${stopPath(dev.deviceId)}?a=1` }),
      ],
      [
        'query dropped from the signature',
        opStop({ path: `${stopPath(dev.deviceId)}?a=1`, signPath: stopPath(dev.deviceId) }),
      ],
      ['tampered method', opStop({ signMethod: 'PUT' })],
      ['tampered timestamp', opStop({ stamp: nowSeconds(), sendStamp: String(nowSeconds() - 1) })],
      ['another client’s secret', opStop({ secret: other.clientSecret })],
      ['the device secret for an operator request', opStop({ secret: dev.secret })],
      ['the client secret for a charger request', devTelemetry({ secret: tenant.clientSecret })],
      ['tampered charger body', devTelemetry({ signBody: telemetryBody() })],
      ['non-hex signature', opStop({ signature: 'z'.repeat(64) })],
      [
        'short signature',
        opStop({
          signature: signRequest(
            tenant.clientSecret,
            'POST',
            stopPath(dev.deviceId),
            nowSeconds(),
            JSON.stringify({ reason: 'user_request' }),
          ).slice(0, 32),
        }),
      ],
      ['empty signature', opStop({ signature: '' })],
      ['non-numeric timestamp', opStop({ stamp: 'yesterday' })],
      ['milliseconds instead of seconds', opStop({ stamp: tp.platform.context.now() })],
    ];
    const pending = async () =>
      (await tp.http.get('/v1/device/commands?wait=0', { token: dev.token })).body.data.commands
        .length as number;
    const pendingBefore = await pending();
    for (const [what, call] of cases) {
      const res = await send(call);
      expect({ what, status: res.status, code: res.body?.code }).toEqual({ what, status: 401, code: 2001 });
      expect(typeof res.body.message).toBe('string');
    }
    const noStamp = await send(opStop(), { 'x-signature': signedHeaders(opStop())['x-signature']! });
    expectError(noStamp, 401, 2001);

    // None of the refused stops was queued.
    expect(await pending()).toBe(pendingBefore);
  });

  it('refuses a timestamp more than 300 s away, either way', async () => {
    // 10 s of margin either side of the 300-s window: the stamp is taken before the request is sent, and a
    // loaded machine may take a second or more to answer (this failed once with 301 s: the answer came late).
    const now = nowSeconds();
    for (const stamp of [now - 310, now + 310, now - 3600]) {
      expectError(await send(opStop({ stamp })), 401, 2001);
      expectError(await send(devTelemetry({ stamp })), 401, 2001);
    }
    for (const stamp of [now - 290, now + 290]) {
      expect((await send(opStop({ stamp }))).status).toBe(200);
      expect((await send(devTelemetry({ stamp }))).status).toBe(200);
    }
    // Signed now, arriving 301 s later by the platform's clock.
    const call = opStop();
    const headers = signedHeaders(call);
    const devCall = devTelemetry();
    const devHeaders = signedHeaders(devCall);
    tp.advance(301_000);
    expectError(await send(call, headers), 401, 2001);
    expectError(await send(devCall, devHeaders), 401, 2001);
  });

  it('refuses any X-Timestamp but ten digits without a leading zero, so no digit moves between query and stamp', async () => {
    // The signed text is METHOD + path-with-query + stamp + body with no separator: `?size=10` at T and
    // `?size=1` at `0T` sign the same text. Only the exact spelling of T may be sent.
    const t = nowSeconds();
    const moved = (path: string, token: string, secret: string) => ({
      method: 'GET' as const,
      path: path.slice(0, -1),
      token,
      secret,
      signPath: path,
      stamp: t,
      sendStamp: `0${t}`,
    });
    const opRead = moved('/v1/operator/devices?size=10', tenant.token, tenant.clientSecret);
    const opMoved = expectError(await send(opRead), 401, 2001);
    expect(opMoved.message).toMatch(/X-Timestamp/);
    const devPoll = moved('/v1/device/commands?wait=10', dev.token, dev.secret);
    expectError(await send(devPoll), 401, 2001);
    // The requests as signed pass: what was refused is the stamp's spelling alone.
    const asSigned = { method: 'GET' as const, stamp: t, token: tenant.token, secret: tenant.clientSecret };
    expect((await send({ ...asSigned, path: '/v1/operator/devices?size=10' })).status).toBe(200);
    const devAsSigned = { method: 'GET' as const, stamp: t, token: dev.token, secret: dev.secret };
    expect((await send({ ...devAsSigned, path: '/v1/device/commands?wait=0' })).status).toBe(200);

    // Other spellings of the same second, signed as sent, on writes of either side.
    for (const stamp of [`+${t}`, `${t}.0`, `0${t}`, `00${t}`, `${t}0`.slice(0, 9)]) {
      expectError(await send(opStop({ stamp })), 401, 2001);
      expectError(await send(devTelemetry({ stamp })), 401, 2001);
    }
  });

  it('accepts each signature once: a replay is refused with 401/2001', async () => {
    const call = opStop();
    const headers = signedHeaders(call);
    expect((await send(call, headers)).status).toBe(200);
    expectError(await send(call, headers), 401, 2001);
    // Changing the case of the hex does not make it a new signature.
    const upper = { ...headers, 'x-signature': headers['x-signature']!.toUpperCase() };
    expectError(await send(call, upper), 401, 2001);
    // Still refused a few minutes later, while the timestamp is inside the window.
    tp.advance(290_000);
    expectError(await send(call, headers), 401, 2001);

    const devCall = devTelemetry();
    const devHeaders = signedHeaders(devCall);
    expect((await send(devCall, devHeaders)).status).toBe(200);
    expectError(await send(devCall, devHeaders), 401, 2001);

    // The same request signed again with a later timestamp is a new signature.
    tp.advance(1_000);
    expect((await send(call)).status).toBe(200);
  });

  it('verifies a signature present on a read as well', async () => {
    const path = `/v1/operator/devices/${dev.deviceId}`;
    const read = { method: 'GET' as const, path, token: tenant.token, secret: tenant.clientSecret };
    const headers = signedHeaders(read);
    expect((await send(read, headers)).status).toBe(200);
    expectError(await send(read, headers), 401, 2001); // replayed
    expectError(await send({ ...read, secret: other.clientSecret }), 401, 2001);
    expectError(await send({ ...read, stamp: nowSeconds() - 301 }), 401, 2001);
    const poll = {
      method: 'GET' as const,
      path: '/v1/device/commands?wait=0',
      token: dev.token,
      secret: dev.secret,
    };
    expect((await send(poll)).status).toBe(200);
    expectError(await send({ ...poll, signPath: '/v1/device/commands?wait=5' }), 401, 2001);
  });
});
