import { describe, expect, it } from 'vitest';
import { openStoreForDataDir } from '../helpers/backends.js';
import { deviceCalls, expectValidation } from '../helpers/device-calls.js';
import { expectError, type HttpResult, registerDevice } from '../helpers/platform.js';
import { platformPerFile } from '../helpers/platform-per-file.js';

/**
 * The charger-side surface (DESIGN.md §3, §4) over real HTTPS and SQLite: the device token endpoint, expired,
 * misplaced and forged tokens on device and operator endpoints, and a device reset made through another
 * connection. One platform for the file; every test uses its own tenant and serial numbers. The fake clock only
 * moves forward, so every test takes its tokens after any earlier test's `advance`.
 */

const tp = platformPerFile();

const {
  advance,
  isoNow,
  sn,
  tenant,
  registration,
  register,
  deviceToken,
  freshToken,
  heartbeat,
  telemetry,
  operatorDevice,
} = deviceCalls(() => tp);

describe('POST /v1/device/token', () => {
  it('exchanges device_id and device_secret for a bearer token in the envelope', async () => {
    const reg = await register(registration());
    const { device_id, device_secret } = reg.body.data;
    const res = await deviceToken({ device_id, device_secret, grant_type: 'client_credentials' });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      code: 0,
      message: 'success',
      data: { access_token: expect.any(String), token_type: 'Bearer', expires_in: 86_400 },
    });
    const hb = await heartbeat(res.body.data.access_token);
    expect(hb.status).toBe(200);
  });

  it('refuses a wrong secret: 401/2001', async () => {
    const reg = await register(registration());
    const { device_id, device_secret } = reg.body.data;
    const wrong = `${device_secret.slice(0, -1)}${device_secret.endsWith('A') ? 'B' : 'A'}`;
    const res = await deviceToken({ device_id, device_secret: wrong, grant_type: 'client_credentials' });
    const err = expectError(res, 401, 2001);
    expect(err.details).toBeUndefined();
  });

  it("refuses another device's secret: 401/2001", async () => {
    const a = await register(registration());
    const b = await register(registration());
    const res = await deviceToken({
      device_id: a.body.data.device_id,
      device_secret: b.body.data.device_secret,
      grant_type: 'client_credentials',
    });
    expectError(res, 401, 2001);
  });

  it('refuses an unknown device exactly like a wrong secret: 401/2001', async () => {
    const reg = await register(registration());
    const unknown = await deviceToken({
      device_id: 'dev_00000000000000000000',
      device_secret: reg.body.data.device_secret,
      grant_type: 'client_credentials',
    });
    const wrong = await deviceToken({
      device_id: reg.body.data.device_id,
      device_secret: 'not-the-secret',
      grant_type: 'client_credentials',
    });
    expect(expectError(unknown, 401, 2001)).toEqual(expectError(wrong, 401, 2001));
  });

  it.each(['password', 'refresh_token', 'CLIENT_CREDENTIALS'])(
    'refuses grant_type %j: 400/1001',
    async (grantType) => {
      const reg = await register(registration());
      const { device_id, device_secret } = reg.body.data;
      expectValidation(
        await deviceToken({ device_id, device_secret, grant_type: grantType }),
        'grant_type',
        grantType,
      );
    },
  );

  it('refuses a request without grant_type, device_id or device_secret: 400/1001, never echoing the secret', async () => {
    const reg = await register(registration());
    const { device_id, device_secret } = reg.body.data;
    expectValidation(await deviceToken({ device_id, device_secret }), 'grant_type', null);
    expectValidation(
      await deviceToken({ device_secret, grant_type: 'client_credentials' }),
      'device_id',
      null,
    );
    const noSecret = await deviceToken({ device_id, grant_type: 'client_credentials' });
    expectValidation(noSecret, 'device_secret', '[redacted]');
    const numeric = await deviceToken({ device_id, device_secret: 12345, grant_type: 'client_credentials' });
    expectValidation(numeric, 'device_secret', '[redacted]');
    expect(numeric.text).not.toContain('12345');
  });

  it('refuses a device_id that is not an identifier: 400/1001', async () => {
    const res = await deviceToken({
      device_id: '../dev',
      device_secret: 'x',
      grant_type: 'client_credentials',
    });
    expectValidation(res, 'device_id', '../dev');
  });

  it('a second token does not invalidate the first', async () => {
    const reg = await register(registration());
    const { device_id, device_secret } = reg.body.data;
    const first = await freshToken(device_id, device_secret);
    advance(2_000);
    const second = await freshToken(device_id, device_secret);
    expect(second).not.toBe(first);
    expect((await heartbeat(first)).status).toBe(200);
    expect((await heartbeat(second)).status).toBe(200);
    expect((await heartbeat(first)).status).toBe(200);
  });
});

describe('device and operator tokens', () => {
  it('an expired token answers 401/2002 on device and operator endpoints; a new token works', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    expect((await heartbeat(d.token)).status).toBe(200);

    advance(86_400_000 - 30_000);
    expect((await heartbeat(d.token)).status).toBe(200);
    expect((await tp.http.get(`/v1/operator/devices/${d.deviceId}`, { token: t.token })).status).toBe(200);

    advance(31_000);
    expectError(await heartbeat(d.token), 401, 2002);
    expectError(await telemetry(d.token, { timestamp: isoNow(), connector_id: 1, state: 'idle' }), 401, 2002);
    expectError(await tp.http.get(`/v1/operator/devices/${d.deviceId}`, { token: t.token }), 401, 2002);
    expectError(
      await tp.http.post(`/v1/operator/devices/${d.deviceId}/connectors/1/stop`, {
        token: t.token,
        json: {},
      }),
      401,
      2002,
    );

    const token = await freshToken(d.deviceId, d.secret);
    expect((await heartbeat(token)).status).toBe(200);
    const opRes = await tp.http.post('/v1/operator/oauth/token', {
      json: { client_id: t.clientId, client_secret: t.clientSecret, grant_type: 'client_credentials' },
    });
    expect(opRes.status).toBe(200);
    expect(
      (await tp.http.get(`/v1/operator/devices/${d.deviceId}`, { token: opRes.body.access_token })).status,
    ).toBe(200);
  });

  it('an expired token is checked before the body: 401/2002 even for an invalid body', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    advance(86_401_000);
    expectError(await heartbeat(d.token, { status: 'nonsense' }), 401, 2002);
  });

  it('an operator token on a device endpoint and a device token on an operator endpoint: 401/2001', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    expectError(await heartbeat(t.token), 401, 2001);
    expectError(await telemetry(t.token, { timestamp: isoNow(), connector_id: 1, state: 'idle' }), 401, 2001);
    expectError(await tp.http.get(`/v1/operator/devices/${d.deviceId}`, { token: d.token }), 401, 2001);
    expectError(
      await tp.http.post(`/v1/operator/devices/${d.deviceId}/connectors/1/stop`, {
        token: d.token,
        json: {},
      }),
      401,
      2001,
    );
    expectError(await tp.http.get('/v1/operator/charging-records', { token: d.token }), 401, 2001);
  });

  it('refuses garbage and tampered tokens: 401/2001', async () => {
    const t = await tenant();
    const victim = await registerDevice(tp, sn(), t.siteId);
    const d = await registerDevice(tp, sn(), t.siteId);
    const [kind, claims, mac] = d.token.split('.') as [string, string, string];
    expect(kind).toBe('dv');

    // Same MAC, claims rewritten to impersonate another charger.
    const decoded = JSON.parse(Buffer.from(claims, 'base64url').toString('utf8'));
    const forged = Buffer.from(JSON.stringify({ ...decoded, sub: victim.deviceId })).toString('base64url');
    // Same MAC, claims with a far expiry.
    const longer = Buffer.from(JSON.stringify({ ...decoded, exp: decoded.exp + 86_400 * 365 })).toString(
      'base64url',
    );
    const flippedMac = `${mac[0] === 'A' ? 'B' : 'A'}${mac.slice(1)}`;
    const bad = [
      'garbage',
      'a.b.c',
      '...',
      `${kind}.${forged}.${mac}`,
      `${kind}.${longer}.${mac}`,
      `${kind}.${claims}.${flippedMac}`,
      `${kind}.${claims}`,
      `op.${claims}.${mac}`,
      `${kind}.${claims}.${mac}x`,
      `${kind}.${claims}.`,
      'x'.repeat(5_000),
    ];
    for (const token of bad) {
      expectError(await heartbeat(token), 401, 2001);
    }
    // And the genuine token still works.
    expect((await heartbeat(d.token)).status).toBe(200);
  });

  it('refuses a missing or non-bearer Authorization header: 401/2001', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const body = { timestamp: isoNow(), status: 'online', fault_code: 0 };
    expectError(await tp.http.post('/v1/device/heartbeat', { json: body }), 401, 2001);
    for (const authorization of [
      d.token,
      `Basic ${d.token}`,
      `Token ${d.token}`,
      'Bearer',
      'Bearer ',
      'Bearer     ',
    ]) {
      expectError(
        await tp.http.post('/v1/device/heartbeat', { json: body, headers: { authorization } }),
        401,
        2001,
      );
    }
    expectError(await tp.http.get(`/v1/operator/devices/${d.deviceId}`), 401, 2001);
    // The scheme is case-insensitive.
    const ok = await tp.http.post('/v1/device/heartbeat', {
      json: body,
      headers: { authorization: `bearer ${d.token}` },
    });
    expect(ok.status).toBe(200);
  });
});

describe('device reset (admin CLI: another connection to the same database)', () => {
  it('revokes the old credentials within about a second; the serial then registers again with the same device_id', async () => {
    const t = await tenant();
    const serialNumber = sn();
    const d = await registerDevice(tp, serialNumber, t.siteId);
    expect((await heartbeat(d.token)).status).toBe(200);
    expectError(await register(registration({ sn: serialNumber })), 409, 4001);

    // Reset through a second SQLite connection, as `charger-platform devices reset` does from its own process.
    const admin = await openStoreForDataDir(tp.dataDir);
    try {
      expect(await admin.resetDevice(d.deviceId)).toBe(true);
    } finally {
      await admin.close();
    }

    // The old secret is refused at once (read from the database).
    expectError(
      await deviceToken({ device_id: d.deviceId, device_secret: d.secret, grant_type: 'client_credentials' }),
      401,
      2001,
    );

    // The platform's credential cache notices the other connection's commit and reloads.
    const started = Date.now();
    let last: HttpResult | undefined;
    while (Date.now() - started < 5_000) {
      last = await heartbeat(d.token);
      if (last.status !== 200) break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(last).toBeDefined();
    expectError(last!, 401, 2001);
    expect(Date.now() - started).toBeLessThan(3_000);
    expectError(await telemetry(d.token, { timestamp: isoNow(), connector_id: 1, state: 'idle' }), 401, 2001);

    // Registering the same serial again: same device_id, new secret, still in its site.
    const again = await register(registration({ sn: serialNumber, firmware_version: '2.5.0' }));
    expect(again.status).toBe(200);
    expect(again.body.data.device_id).toBe(d.deviceId);
    expect(again.body.data.device_secret).not.toBe(d.secret);
    expect(again.body.data.expires_in).toBe(86_400);

    expectError(
      await deviceToken({ device_id: d.deviceId, device_secret: d.secret, grant_type: 'client_credentials' }),
      401,
      2001,
    );
    const token = await freshToken(d.deviceId, again.body.data.device_secret);
    expect((await heartbeat(token)).status).toBe(200);
    // A token of the old generation stays revoked after re-registration.
    expectError(await heartbeat(d.token), 401, 2001);

    const view = await operatorDevice(t.token, d.deviceId);
    expect(view).toMatchObject({
      device_id: d.deviceId,
      sn: serialNumber,
      firmware_version: '2.5.0',
      site_id: t.siteId,
    });

    // And it is registered again: a third registration is refused.
    expectError(await register(registration({ sn: serialNumber })), 409, 4001);
  });

  it('resetting an unknown device changes nothing', async () => {
    const admin = await openStoreForDataDir(tp.dataDir);
    try {
      expect(await admin.resetDevice('dev_00000000000000000000')).toBe(false);
    } finally {
      await admin.close();
    }
  });
});
