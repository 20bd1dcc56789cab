import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { pollUntil, runCli, runCliJson } from '../helpers/cli.js';
import {
  type createTenant,
  expectError,
  operatorToken,
  type RegisteredDevice,
  registerDevice,
  type TestPlatform,
} from '../helpers/platform.js';
import { signedCalls, startSigningPlatform, stopPath } from '../helpers/signed-calls.js';

/**
 * Requiring request signatures (spec "Optional request signing", DESIGN.md §8), switched per client and per
 * charger through the REAL admin CLI against the running platform's data directory (another process), which the
 * platform picks up on its own. The signatures themselves are tested in signing.test.ts.
 * Run `npm run build` first: the CLI is executed from dist/.
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

const { send, telemetryBody, opStop, devTelemetry } = signedCalls(() => ({
  tp,
  tenant,
  dev,
}));

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
