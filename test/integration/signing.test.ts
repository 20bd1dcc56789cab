import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { signRequest } from '../../shared/index.js';
import { pollUntil, runCli, runCliJson } from '../helpers/cli.js';
import {
  createTenant,
  expectError,
  type HttpResult,
  operatorToken,
  type RegisteredDevice,
  registerDevice,
  startTestPlatform,
  type TestPlatform,
} from '../helpers/platform.js';

/**
 * Optional HMAC request signing (spec "Optional request signing", DESIGN.md §8): `X-Signature` = lowercase hex
 * HMAC-SHA256 over METHOD + path-with-query + X-Timestamp + raw body, X-Timestamp in Unix seconds within
 * ±300 s, each signature accepted once. Requiring signatures is switched through the REAL admin CLI against the
 * running platform's data directory (another process), which the platform picks up on its own.
 * Run `npm run build` first: the CLI is executed from dist/.
 */

let tp: TestPlatform;
let tenant: Awaited<ReturnType<typeof createTenant>>;
let other: Awaited<ReturnType<typeof createTenant>>;
let dev: RegisteredDevice;

beforeAll(async () => {
  tp = await startTestPlatform();
  tenant = await createTenant(tp, 'Signing Alpha');
  other = await createTenant(tp, 'Signing Beta');
  dev = await registerDevice(tp, 'SG-SN-1', tenant.siteId);
});
afterAll(async () => {
  await tp.stop();
});
// Every test starts with fresh rate-limit windows (the fake clock also moves the signature window along).
beforeEach(() => {
  tp.advance(60_000);
});

const nowSeconds = () => Math.floor(tp.platform.context.now() / 1000);

interface SignedCall {
  method?: 'POST' | 'DELETE' | 'GET';
  path: string;
  body?: string;
  token: string;
  secret: string;
  /** Sign these instead of what is sent. */
  signPath?: string;
  signBody?: string;
  signMethod?: string;
  stamp?: number | string;
  /** Send this stamp instead of the signed one. */
  sendStamp?: string;
  signature?: string;
}

function signedHeaders(c: SignedCall): Record<string, string> {
  const method = c.method ?? 'POST';
  const stamp = c.stamp ?? nowSeconds();
  const signature =
    c.signature ??
    signRequest(c.secret, c.signMethod ?? method, c.signPath ?? c.path, stamp, c.signBody ?? c.body ?? '');
  return { 'x-timestamp': c.sendStamp ?? String(stamp), 'x-signature': signature };
}

function send(c: SignedCall, headers: Record<string, string> = signedHeaders(c)): Promise<HttpResult> {
  return tp.http.call(c.method ?? 'POST', c.path, {
    token: c.token,
    headers,
    ...(c.body !== undefined ? { raw: c.body, contentType: 'application/json' } : {}),
  });
}

const stopPath = (deviceId: string, connector = 1) =>
  `/v1/operator/devices/${deviceId}/connectors/${connector}/stop`;
let ts = Date.UTC(2025, 2, 1);
const telemetryBody = () => {
  ts += 1_000;
  return JSON.stringify({
    timestamp: new Date(ts).toISOString(),
    connector_id: 1,
    state: 'charging',
    power: 7,
  });
};

/** An operator write signed by the tenant's client. */
const opStop = (extra: Partial<SignedCall> = {}): SignedCall => ({
  path: stopPath(dev.deviceId),
  body: JSON.stringify({ reason: 'user_request' }),
  token: tenant.token,
  secret: tenant.clientSecret,
  ...extra,
});
/** A charger write signed with its device secret. */
const devTelemetry = (extra: Partial<SignedCall> = {}): SignedCall => ({
  path: '/v1/device/telemetry',
  body: telemetryBody(),
  token: dev.token,
  secret: dev.secret,
  ...extra,
});

describe('signed requests', () => {
  it('accepts a signed operator write and a signed charger write', async () => {
    const stop = await send(opStop());
    expect(stop.status).toBe(200);
    expect(stop.body.data.status).toBe('queued');

    const tel = await send(devTelemetry());
    expect(tel.status).toBe(200);
    expect(tel.body.data).toEqual({ accepted: 1 });

    // The query string is part of the signed path; a body-less DELETE signs the empty body.
    const withQuery = await send(opStop({ path: `${stopPath(dev.deviceId, 2)}?trace=abc&x=1` }));
    expect(withQuery.status).toBe(200);
    const cancel = await send({
      method: 'DELETE',
      path: `/v1/operator/commands/${withQuery.body.data.command_id}`,
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

describe('requiring signatures (set through the admin CLI)', () => {
  /** Unsigned write with an invalid body: 400 while signing is optional, 401 once it is required. */
  const probeOperator = (token: string, deviceId: string) => () =>
    tp.http.post(stopPath(deviceId), { token, json: { reason: 42 } }).then((r) => r.status);
  const probeDevice = (d: RegisteredDevice) => () => {
    tp.advance(1_000); // stay inside the charger's 10-per-second budget while polling
    return tp.http
      .post('/v1/device/telemetry', { token: d.token, json: { connector_id: 0 } })
      .then((r) => r.status);
  };

  it('clients require-signature: unsigned writes 401, unsigned reads and signed writes 200; --off restores', async () => {
    const on = await runCli([
      'clients',
      'require-signature',
      '--data-dir',
      tp.dataDir,
      '--client',
      tenant.clientId,
    ]);
    expect(on.code).toBe(0);
    expect(on.stdout).toContain('must sign');
    expect(await pollUntil(probeOperator(tenant.token, dev.deviceId), (s) => s === 401, 5_000)).toBe(401);

    const unsigned = await tp.http.post(stopPath(dev.deviceId), { token: tenant.token, json: {} });
    expectError(unsigned, 401, 2001);
    const unsignedCancel = await tp.http.delete('/v1/operator/commands/cmd_whatever', {
      token: tenant.token,
    });
    expectError(unsignedCancel, 401, 2001);
    const flex = await tp.http.post('/v1/operator/control/flexibility', {
      token: tenant.token,
      json: { target_type: 'all', command: 'pause_charging', params: { duration: 60 } },
    });
    expectError(flex, 401, 2001);
    expect((await tp.http.get(`/v1/operator/devices/${dev.deviceId}`, { token: tenant.token })).status).toBe(
      200,
    );
    expect((await tp.http.get('/v1/operator/charging-records', { token: tenant.token })).status).toBe(200);
    expect((await send(opStop())).status).toBe(200);
    // A bad signature is still refused, of course.
    expectError(await send(opStop({ secret: other.clientSecret })), 401, 2001);
    // Tokens are issued as before (the token endpoint has no principal to sign for).
    const fresh = await operatorToken(tp.http, tenant.clientId, tenant.clientSecret);
    expectError(await tp.http.post(stopPath(dev.deviceId), { token: fresh, json: {} }), 401, 2001);
    // Other clients are not affected.
    expect((await tp.http.post(stopPath(dev.deviceId), { token: other.token, json: {} })).status).toBe(404);

    const off = await runCli([
      'clients',
      'require-signature',
      '--data-dir',
      tp.dataDir,
      '--client',
      tenant.clientId,
      '--off',
    ]);
    expect(off.code).toBe(0);
    expect(await pollUntil(probeOperator(tenant.token, dev.deviceId), (s) => s === 400, 5_000)).toBe(400);
    expect((await tp.http.post(stopPath(dev.deviceId), { token: tenant.token, json: {} })).status).toBe(200);
  });

  it('devices require-signature: the charger must sign telemetry and heartbeats, not its reads; --off restores', async () => {
    const d = await registerDevice(tp, 'SG-SN-REQ', tenant.siteId);
    const on = await runCli([
      'devices',
      'require-signature',
      '--data-dir',
      tp.dataDir,
      '--device',
      d.deviceId,
    ]);
    expect(on.code).toBe(0);
    expect(await pollUntil(probeDevice(d), (s) => s === 401, 5_000)).toBe(401);

    tp.advance(1_000);
    expectError(
      await tp.http.post('/v1/device/telemetry', {
        token: d.token,
        raw: telemetryBody(),
        contentType: 'application/json',
      }),
      401,
      2001,
    );
    const hb = JSON.stringify({ timestamp: new Date().toISOString(), status: 'online', fault_code: 0 });
    expectError(
      await tp.http.post('/v1/device/heartbeat', {
        token: d.token,
        raw: hb,
        contentType: 'application/json',
      }),
      401,
      2001,
    );
    expect((await tp.http.get('/v1/device/commands?wait=0', { token: d.token })).status).toBe(200);
    expect((await send(devTelemetry({ token: d.token, secret: d.secret }))).status).toBe(200);
    expect(
      (await send({ path: '/v1/device/heartbeat', body: hb, token: d.token, secret: d.secret })).status,
    ).toBe(200);
    // Another charger is not affected.
    expect(
      (
        await tp.http.post('/v1/device/telemetry', {
          token: dev.token,
          raw: telemetryBody(),
          contentType: 'application/json',
        })
      ).status,
    ).toBe(200);

    const off = await runCli([
      'devices',
      'require-signature',
      '--data-dir',
      tp.dataDir,
      '--device',
      d.deviceId,
      '--off',
    ]);
    expect(off.code).toBe(0);
    expect(await pollUntil(probeDevice(d), (s) => s === 400, 5_000)).toBe(400);
    tp.advance(1_000);
    expect(
      (
        await tp.http.post('/v1/device/telemetry', {
          token: d.token,
          raw: telemetryBody(),
          contentType: 'application/json',
        })
      ).status,
    ).toBe(200);
  });

  it('clients create --require-signature: the new client must sign its writes from the start', async () => {
    const created = await runCliJson([
      'clients',
      'create',
      '--data-dir',
      tp.dataDir,
      '--operator',
      tenant.operatorId,
      '--scopes',
      'read,write',
      '--require-signature',
      '--json',
    ]);
    expect(created).toMatchObject({ client_id: expect.any(String), client_secret: expect.any(String) });
    const token = await operatorToken(tp.http, created.client_id, created.client_secret);
    expectError(await tp.http.post(stopPath(dev.deviceId), { token, json: {} }), 401, 2001);
    expect((await tp.http.get(`/v1/operator/devices/${dev.deviceId}`, { token })).status).toBe(200);
    const signed = await send(opStop({ token, secret: created.client_secret }));
    expect(signed.status).toBe(200);
    expect(signed.body.data.status).toBe('queued');
  });

  it('an unknown client or device is an error of the CLI, not a silent success', async () => {
    const [c, d] = await Promise.all([
      runCli(['clients', 'require-signature', '--data-dir', tp.dataDir, '--client', 'cli_nobody']),
      runCli(['devices', 'require-signature', '--data-dir', tp.dataDir, '--device', 'dev_nobody']),
    ]);
    expect(c.code).not.toBe(0);
    expect(c.stderr).toContain('cli_nobody');
    expect(d.code).not.toBe(0);
    expect(d.stderr).toContain('dev_nobody');
  });
});
