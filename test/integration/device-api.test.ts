import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deviceCalls, expectValidation } from '../helpers/device-calls.js';
import { expectError, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { platformPerFile } from '../helpers/platform-per-file.js';

/**
 * The charger-side surface (spec "POST /v1/device/...", DESIGN.md §3, §4, §7) over real HTTPS and SQLite:
 * registration. Tokens are in device-api-tokens.test.ts, heartbeats in device-api-heartbeat.test.ts, telemetry
 * and liveness in device-api-telemetry.test.ts. One platform for the file; every test uses its own tenant and
 * serial numbers.
 */

const tp = platformPerFile();

const { sn, tenant, registration, register, deviceToken, operatorDevice } = deviceCalls(() => tp);

describe('POST /v1/device/register', () => {
  it('registers a charger and answers device_id, device_secret and expires_in 86400 in the envelope', async () => {
    const res = await register(registration({ mac: '00:1A:2B:3C:4D:5E' }));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      code: 0,
      message: 'success',
      data: { device_id: expect.any(String), device_secret: expect.any(String), expires_in: 86_400 },
    });
    expect(res.body.data.device_id).toMatch(/^dev_[0-9a-f]{20}$/);
    // 32 random bytes, base64url.
    expect(res.body.data.device_secret).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(res.headers['x-api-version']).toBe('1.3.0');
  });

  it('gives every charger its own device_id and secret', async () => {
    const a = await register(registration());
    const b = await register(registration());
    expect(a.status).toBe(200);
    expect(b.status).toBe(200);
    expect(a.body.data.device_id).not.toBe(b.body.data.device_id);
    expect(a.body.data.device_secret).not.toBe(b.body.data.device_secret);
  });

  it.each(['sn', 'model', 'manufacturer', 'firmware_version'])(
    'refuses a request without %s: 400/1001',
    async (field) => {
      const body: Record<string, unknown> = registration();
      delete body[field];
      expectValidation(await register(body), field, null);
    },
  );

  it.each([
    ['sn', ''],
    ['model', 42],
    ['manufacturer', 'Acme\u0000Corp'],
    ['firmware_version', 'v'.repeat(65)],
  ])('refuses an invalid %s: 400/1001 with the value echoed', async (field, value) => {
    expectValidation(await register(registration({ [field]: value })), field, value);
  });

  it('refuses a body that is not an object', async () => {
    expectValidation(await register(['sn']), 'body', '[array of 1]');
  });

  it.each(['00:1A:2B:3C:4D', '00:1A:2B:3C:4D:5E:6F', 'GG:1A:2B:3C:4D:5E', '001A2B3C4D5E', 'not a mac'])(
    'refuses the MAC address %j: 400/1001',
    async (mac) => {
      expectValidation(await register(registration({ mac })), 'mac', mac);
    },
  );

  it('accepts a MAC written with dashes', async () => {
    const res = await register(registration({ mac: '00-1a-2b-3c-4d-5e' }));
    expect(res.status).toBe(200);
  });

  it('does not keep anything of a refused registration: the serial can register afterwards', async () => {
    const body = registration();
    expectValidation(await register({ ...body, mac: 'bad' }), 'mac', 'bad');
    const ok = await register(body);
    expect(ok.status).toBe(200);
  });

  it('refuses a serial number that is already registered: 409/4001, and the first registration keeps working', async () => {
    const body = registration();
    const first = await register(body);
    expect(first.status).toBe(200);
    const again = await register({ ...body, model: 'Other model', firmware_version: '9.9.9' });
    const err = expectError(again, 409, 4001);
    expect(Object.keys(err).sort()).toEqual(['code', 'message']);
    expect(again.text).not.toContain(first.body.data.device_secret);

    // No silent takeover: the original secret is still the valid one.
    const tok = await deviceToken({
      device_id: first.body.data.device_id,
      device_secret: first.body.data.device_secret,
      grant_type: 'client_credentials',
    });
    expect(tok.status).toBe(200);
  });

  describe('connectors declaration (additive field)', () => {
    it('stores declared connectors: rating and V2G capability show on the operator device view', async () => {
      const t = await tenant();
      const serialNumber = sn();
      const reg = await register(
        registration({
          sn: serialNumber,
          connectors: [
            { connector_id: 2, max_power_kw: 50, v2g_capable: true },
            { connector_id: 1, max_power_kw: 11 },
          ],
        }),
      );
      expect(reg.status).toBe(200);
      const deviceId = reg.body.data.device_id as string;
      await tp.store.assignDevice(deviceId, t.siteId);
      const view = await operatorDevice(t.token, deviceId);
      expect(view).toEqual({
        device_id: deviceId,
        sn: serialNumber,
        model: 'Wallbox AC22',
        manufacturer: 'Acme',
        firmware_version: '2.4.1',
        site_id: t.siteId,
        status: 'offline',
        connectors: [
          {
            connector_id: 1,
            status: 'unavailable',
            energy_delivered: 0,
            max_power_kw: 11,
            v2g_capable: false,
            available: true,
          },
          {
            connector_id: 2,
            status: 'unavailable',
            energy_delivered: 0,
            max_power_kw: 50,
            v2g_capable: true,
            available: true,
          },
        ],
      });
    });

    it('refuses duplicate connector ids: 400/1001 on connectors', async () => {
      const res = await register(
        registration({
          connectors: [
            { connector_id: 1, max_power_kw: 22 },
            { connector_id: 1, max_power_kw: 11 },
          ],
        }),
      );
      expectValidation(res, 'connectors', '[array of 2]');
    });

    it.each([
      [[{ connector_id: 0, max_power_kw: 22 }], 'connectors.0.connector_id', 0],
      [[{ connector_id: -1, max_power_kw: 22 }], 'connectors.0.connector_id', -1],
      [[{ connector_id: 1.5, max_power_kw: 22 }], 'connectors.0.connector_id', 1.5],
      [[{ connector_id: 17, max_power_kw: 22 }], 'connectors.0.connector_id', 17],
      [
        [
          { connector_id: 1, max_power_kw: 22 },
          { connector_id: 2, max_power_kw: 0 },
        ],
        'connectors.1.max_power_kw',
        0,
      ],
      [[{ connector_id: 1 }], 'connectors.0.max_power_kw', null],
      [[{ connector_id: 1, max_power_kw: 22, v2g_capable: 'yes' }], 'connectors.0.v2g_capable', 'yes'],
      [[], 'connectors', '[array of 0]'],
      ['1,2', 'connectors', '1,2'],
    ])('refuses the declaration %j: 400/1001 at %s', async (connectors, field, value) => {
      expectValidation(await register(registration({ connectors })), field, value);
    });
  });

  describe('allowlist policy', () => {
    let strict: TestPlatform;
    beforeAll(async () => {
      strict = await startTestPlatform({ registration: 'allowlist' });
    });
    afterAll(async () => {
      await strict?.stop();
    });

    it('refuses a serial number that is not on the allowlist: 403/2003, then accepts it once allowed', async () => {
      const body = registration();
      const refused = await strict.http.post('/v1/device/register', { json: body });
      expectError(refused, 403, 2003);

      // Allowing another serial does not help this one.
      await strict.store.allowSerial(`${body.sn}-other`);
      expectError(await strict.http.post('/v1/device/register', { json: body }), 403, 2003);

      await strict.store.allowSerial(body.sn);
      const ok = await strict.http.post('/v1/device/register', { json: body });
      expect(ok.status).toBe(200);
      expect(ok.body.code).toBe(0);
      expect(ok.body.data.expires_in).toBe(86_400);

      // Allowed once does not mean registrable twice.
      expectError(await strict.http.post('/v1/device/register', { json: body }), 409, 4001);
    });

    it('validates the request before applying the policy', async () => {
      const res = await strict.http.post('/v1/device/register', { json: registration({ model: '' }) });
      expectValidation(res, 'model', '');
    });
  });
});
