import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStoreForDataDir } from '../helpers/backends.js';
import {
  createTenant,
  expectError,
  type HttpResult,
  registerDevice,
  startTestPlatform,
  type TestPlatform,
} from '../helpers/platform.js';

/**
 * The charger-side surface (spec "POST /v1/device/...", DESIGN.md §3, §4, §7) over real HTTPS and SQLite.
 * One platform for the file; every test uses its own tenant and serial numbers. The fake clock only moves
 * forward, so every test takes its tokens after any earlier test's `advance`.
 */

let tp: TestPlatform;
/** How far the platform's fake clock is ahead of the wall clock. */

beforeAll(async () => {
  tp = await startTestPlatform();
});
afterAll(async () => {
  await tp?.stop();
});

const advance = (ms: number): void => tp.advance(ms);
const platformNow = (): number => tp.now();
const isoNow = () => new Date(platformNow()).toISOString();

let serial = 0;
function sn(prefix = 'SN'): string {
  serial += 1;
  return `${prefix}-${process.pid}-${serial}-${Math.random().toString(36).slice(2, 8)}`;
}
let tenants = 0;
function tenant() {
  tenants += 1;
  return createTenant(tp, `tenant-${tenants}`);
}

const registration = (overrides: Record<string, unknown> = {}) => ({
  sn: sn(),
  model: 'Wallbox AC22',
  manufacturer: 'Acme',
  firmware_version: '2.4.1',
  ...overrides,
});

function register(body: unknown): Promise<HttpResult> {
  return tp.http.post('/v1/device/register', { json: body });
}
function deviceToken(body: unknown): Promise<HttpResult> {
  return tp.http.post('/v1/device/token', { json: body });
}
async function freshToken(deviceId: string, secret: string): Promise<string> {
  const res = await deviceToken({
    device_id: deviceId,
    device_secret: secret,
    grant_type: 'client_credentials',
  });
  expect(res.status).toBe(200);
  return res.body.data.access_token as string;
}
function heartbeat(token: string, body: unknown = { timestamp: isoNow(), status: 'online', fault_code: 0 }) {
  return tp.http.post('/v1/device/heartbeat', { token, json: body });
}
function telemetry(token: string, body: unknown) {
  return tp.http.post('/v1/device/telemetry', { token, json: body });
}
async function operatorDevice(operatorToken: string, deviceId: string) {
  const res = await tp.http.get(`/v1/operator/devices/${deviceId}`, { token: operatorToken });
  expect(res.status).toBe(200);
  expect(res.body.code).toBe(0);
  // biome-ignore lint/suspicious/noExplicitAny: response bodies are inspected field by field
  return res.body.data as any;
}

/** A 400/1001 naming exactly this field and echoing exactly this value. */
function expectValidation(res: HttpResult, field: string, value: unknown): void {
  const body = expectError(res, 400, 1001);
  expect(body.details).toEqual({ field, value });
}

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
          },
          {
            connector_id: 2,
            status: 'unavailable',
            energy_delivered: 0,
            max_power_kw: 50,
            v2g_capable: true,
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

describe('POST /v1/device/heartbeat', () => {
  it('answers commands and server_time from the platform clock', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const res = await heartbeat(d.token);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      code: 0,
      message: 'success',
      data: { commands: [], server_time: expect.any(String) },
    });
    const serverTime = res.body.data.server_time as string;
    expect(new Date(serverTime).toISOString()).toBe(serverTime);
    // The fake clock is ahead of the wall clock (tp.now()): server_time follows the platform's clock.
    expect(Math.abs(Date.parse(serverTime) - platformNow())).toBeLessThan(5_000);
  });

  it('records the heartbeat: last_heartbeat shows on the operator view', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const before = await operatorDevice(t.token, d.deviceId);
    expect(before.last_heartbeat).toBeUndefined();
    const res = await heartbeat(d.token, { timestamp: isoNow(), status: 'fault', fault_code: 17 });
    expect(res.status).toBe(200);
    const view = await operatorDevice(t.token, d.deviceId);
    expect(view.last_heartbeat).toBe(res.body.data.server_time);
    // A charger reporting a fault is still connected.
    expect(view.status).toBe('online');
  });

  it.each(['timestamp', 'status', 'fault_code'])(
    'refuses a heartbeat without %s: 400/1001',
    async (field) => {
      const t = await tenant();
      const d = await registerDevice(tp, sn(), t.siteId);
      const body: Record<string, unknown> = { timestamp: isoNow(), status: 'online', fault_code: 0 };
      delete body[field];
      expectValidation(await heartbeat(d.token, body), field, null);
    },
  );

  it.each([
    ['status', 'sleeping'],
    ['status', 'ONLINE'],
    ['status', ''],
    ['fault_code', -1],
    ['fault_code', 1.5],
    ['fault_code', '0'],
    ['fault_code', 2_147_483_648],
    ['timestamp', 'yesterday'],
    ['timestamp', '2025-13-01T00:00:00Z'],
    ['timestamp', '2025-06-01 12:00:00'],
    ['timestamp', 1_750_000_000],
  ])('refuses %s %j: 400/1001', async (field, value) => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const body = { timestamp: isoNow(), status: 'online', fault_code: 0, [field]: value };
    expectValidation(await heartbeat(d.token, body), field, value);
  });

  it('accepts a timestamp with an explicit offset', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const res = await heartbeat(d.token, {
      timestamp: '2025-06-01T14:00:00+02:00',
      status: 'online',
      fault_code: 0,
    });
    expect(res.status).toBe(200);
  });

  describe('pending commands', () => {
    const schedule = {
      schedule_id: 'night',
      type: 'daily',
      time_slots: [{ start: '22:00', end: '06:00', power_limit: 11 }],
      timezone: 'Europe/Berlin',
    };

    it('delivers stop, schedule and flexibility commands with command_id, command, params and expiry', async () => {
      const t = await tenant();
      const d = await registerDevice(tp, sn(), t.siteId);

      const t0 = platformNow();
      const stop = await tp.http.post(`/v1/operator/devices/${d.deviceId}/connectors/1/stop`, {
        token: t.token,
        json: { reason: 'time_limit' },
      });
      expect(stop.status).toBe(200);
      expect(stop.body.data.status).toBe('queued');
      const sched = await tp.http.post(`/v1/operator/devices/${d.deviceId}/connectors/2/schedule`, {
        token: t.token,
        json: schedule,
      });
      expect(sched.status).toBe(200);
      const flex = await tp.http.post('/v1/operator/control/flexibility', {
        token: t.token,
        json: {
          target_type: 'site',
          target_ids: [t.siteId],
          command: 'set_power_limit',
          params: { power_limit_percent: 40, duration: 3_600, reason: 'grid peak' },
        },
      });
      expect(flex.status).toBe(200);
      expect(flex.body.data).toMatchObject({ status: 'executing', device_count: 1 });
      const t1 = platformNow();

      const res = await heartbeat(d.token);
      expect(res.status).toBe(200);
      const commands = res.body.data.commands as Array<Record<string, unknown>>;
      expect(commands).toHaveLength(3);
      for (const c of commands) {
        expect(Object.keys(c).sort()).toEqual(['command', 'command_id', 'expiry', 'params']);
        expect(new Date(c.expiry as string).toISOString()).toBe(c.expiry);
      }
      const byName = new Map(commands.map((c) => [c.command, c]));

      const stopCmd = byName.get('stop')!;
      expect(stopCmd.command_id).toBe(stop.body.data.command_id);
      expect(stopCmd.params).toEqual({ connector_id: 1, reason: 'time_limit' });
      const stopExpiry = Date.parse(stopCmd.expiry as string);
      expect(stopExpiry).toBeGreaterThanOrEqual(t0 + 15 * 60_000);
      expect(stopExpiry).toBeLessThanOrEqual(t1 + 15 * 60_000);

      const schedCmd = byName.get('set_schedule')!;
      expect(schedCmd.command_id).toBe(sched.body.data.command_id);
      expect(schedCmd.params).toEqual({
        connector_id: 2,
        schedule: {
          ...schedule,
          enabled: true,
          time_slots: [{ start: '22:00', end: '06:00', power_limit: 11, action: 'charge' }],
        },
      });
      const schedExpiry = Date.parse(schedCmd.expiry as string);
      expect(schedExpiry).toBeGreaterThanOrEqual(t0 + 7 * 86_400_000);
      expect(schedExpiry).toBeLessThanOrEqual(t1 + 7 * 86_400_000);

      const flexCmd = byName.get('set_power_limit')!;
      expect(flexCmd.command_id).toMatch(/^cmd_/);
      expect(flexCmd.params).toEqual({
        control_id: flex.body.data.control_id,
        power_limit_percent: 40,
        duration: 3_600,
        reason: 'grid peak',
        starts_at: expect.any(String),
        ends_at: flexCmd.expiry,
      });
      const params = flexCmd.params as { starts_at: string; ends_at: string };
      expect(Date.parse(params.ends_at) - Date.parse(params.starts_at)).toBe(3_600_000);
    });

    it('delivers a command again on the next heartbeat (at least once), and never after its expiry', async () => {
      const t = await tenant();
      const d = await registerDevice(tp, sn(), t.siteId);
      const stop = await tp.http.post(`/v1/operator/devices/${d.deviceId}/connectors/1/stop`, {
        token: t.token,
        json: {},
      });
      expect(stop.status).toBe(200);
      const sched = await tp.http.post(`/v1/operator/devices/${d.deviceId}/connectors/1/schedule`, {
        token: t.token,
        json: schedule,
      });
      expect(sched.status).toBe(200);
      const flex = await tp.http.post('/v1/operator/control/flexibility', {
        token: t.token,
        json: {
          target_type: 'operator',
          target_ids: [t.operatorId],
          command: 'pause_charging',
          params: { duration: 1_800 },
        },
      });
      expect(flex.status).toBe(200);

      const pending = async (token: string) => {
        const res = await heartbeat(token);
        expect(res.status).toBe(200);
        return res.body.data.commands as Array<{ command: string; command_id: string; expiry: string }>;
      };
      const names = async (token: string) => (await pending(token)).map((c) => c.command).sort();

      const first = await pending(d.token);
      expect(first.map((c) => c.command).sort()).toEqual(['pause_charging', 'set_schedule', 'stop']);
      // Delivered, not yet reported: sent again, with the same ids, on every heartbeat.
      const again = await pending(d.token);
      expect(again.map((c) => c.command_id).sort()).toEqual(first.map((c) => c.command_id).sort());
      expect(again.find((c) => c.command === 'stop')?.command_id).toBe(stop.body.data.command_id);
      expect(await names(d.token)).toEqual(['pause_charging', 'set_schedule', 'stop']);

      const expiry = (name: string) => Date.parse(first.find((c) => c.command === name)!.expiry);
      const stopExpiry = expiry('stop');
      const pauseExpiry = expiry('pause_charging');
      const scheduleExpiry = expiry('set_schedule');
      expect(stopExpiry).toBeLessThan(pauseExpiry);
      expect(pauseExpiry).toBeLessThan(scheduleExpiry);
      /** Moves the fake clock forward to the instant `ms`. */
      const advanceTo = (ms: number) => {
        const delta = ms - platformNow();
        expect(delta).toBeGreaterThan(0);
        advance(delta);
      };

      // Stop: 15 minutes. Still there just before its expiry, never after it.
      advanceTo(stopExpiry - 20_000);
      expect(await names(d.token)).toEqual(['pause_charging', 'set_schedule', 'stop']);
      advanceTo(stopExpiry + 1_000);
      expect(await names(d.token)).toEqual(['pause_charging', 'set_schedule']);

      // Pause: its 30-minute window.
      advanceTo(pauseExpiry - 20_000);
      expect(await names(d.token)).toEqual(['pause_charging', 'set_schedule']);
      advanceTo(pauseExpiry + 1_000);
      expect(await names(d.token)).toEqual(['set_schedule']);

      // Schedule: up to 7 days (the device token lives 24 h: take a new one).
      advanceTo(scheduleExpiry - 20_000);
      const token = await freshToken(d.deviceId, d.secret);
      expect(await names(token)).toEqual(['set_schedule']);
      advanceTo(scheduleExpiry + 1_000);
      expect(await names(token)).toEqual([]);
    });

    it('delivers only to the addressed charger', async () => {
      const t = await tenant();
      const a = await registerDevice(tp, sn(), t.siteId);
      const b = await registerDevice(tp, sn(), t.siteId);
      const stop = await tp.http.post(`/v1/operator/devices/${a.deviceId}/connectors/1/stop`, {
        token: t.token,
        json: {},
      });
      expect(stop.status).toBe(200);
      expect((await heartbeat(b.token)).body.data.commands).toEqual([]);
      expect((await heartbeat(a.token)).body.data.commands).toHaveLength(1);
    });

    it('holds commands back while the charger reports offline and delivers them once it is online', async () => {
      const t = await tenant();
      const d = await registerDevice(tp, sn(), t.siteId);
      const stop = await tp.http.post(`/v1/operator/devices/${d.deviceId}/connectors/1/stop`, {
        token: t.token,
        json: {},
      });
      expect(stop.status).toBe(200);
      const offline = await heartbeat(d.token, { timestamp: isoNow(), status: 'offline', fault_code: 0 });
      expect(offline.status).toBe(200);
      expect(offline.body.data.commands).toEqual([]);
      const online = await heartbeat(d.token);
      expect(online.body.data.commands.map((c: { command_id: string }) => c.command_id)).toEqual([
        stop.body.data.command_id,
      ]);
    });
  });

  it('a heartbeat with status offline marks the device offline at once, connectors unavailable', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    expect((await heartbeat(d.token)).status).toBe(200);
    const tel = await telemetry(d.token, {
      timestamp: isoNow(),
      connector_id: 1,
      state: 'charging',
      power: 7,
    });
    expect(tel.status).toBe(200);
    const online = await operatorDevice(t.token, d.deviceId);
    expect(online.status).toBe('online');
    expect(online.connectors[0].status).toBe('charging');

    const res = await heartbeat(d.token, { timestamp: isoNow(), status: 'offline', fault_code: 0 });
    expect(res.status).toBe(200);
    const view = await operatorDevice(t.token, d.deviceId);
    expect(view.status).toBe('offline');
    expect(view.connectors.map((c: { status: string }) => c.status)).toEqual(['unavailable', 'unavailable']);

    // The next online heartbeat brings it back.
    expect((await heartbeat(d.token)).status).toBe(200);
    const back = await operatorDevice(t.token, d.deviceId);
    expect(back.status).toBe('online');
    expect(back.connectors[0].status).toBe('charging');
  });
});

describe('POST /v1/device/telemetry', () => {
  const base = (overrides: Record<string, unknown> = {}) => ({
    timestamp: isoNow(),
    connector_id: 1,
    state: 'charging',
    voltage: 230,
    current: 16,
    power: 11,
    energy_delivered: 4.25,
    soc: 55,
    temperature: 31.5,
    ...overrides,
  });

  it('updates the connector live state shown on the operator device endpoint', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const ts = new Date(platformNow() - 1_000).toISOString();
    const res = await telemetry(
      d.token,
      base({
        timestamp: ts,
        phase_details: { l1: { voltage: 230, current: 16, power: 3.7 }, l2: { voltage: 231 } },
      }),
    );
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ code: 0, message: 'success', data: { accepted: 1 } });

    const view = await operatorDevice(t.token, d.deviceId);
    expect(view.status).toBe('online');
    expect(view.connectors).toEqual([
      {
        connector_id: 1,
        status: 'charging',
        power: 11,
        voltage: 230,
        current: 16,
        energy_delivered: 4.25,
        soc: 55,
        temperature: 31.5,
        last_telemetry_time: ts,
        max_power_kw: 22,
        v2g_capable: false,
      },
      { connector_id: 2, status: 'unavailable', energy_delivered: 0, max_power_kw: 50, v2g_capable: true },
    ]);
  });

  it('keeps the newest state when an older record arrives late', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const newer = new Date(platformNow() - 1_000).toISOString();
    const older = new Date(platformNow() - 60_000).toISOString();
    expect((await telemetry(d.token, base({ timestamp: newer, soc: 70 }))).status).toBe(200);
    expect(
      (await telemetry(d.token, base({ timestamp: older, state: 'idle', power: 0, soc: 40 }))).status,
    ).toBe(200);
    const view = await operatorDevice(t.token, d.deviceId);
    expect(view.connectors[0]).toMatchObject({ status: 'charging', soc: 70, last_telemetry_time: newer });
  });

  it('learns a connector it was not told about from telemetry', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId, [
      { connector_id: 1, max_power_kw: 22, v2g_capable: false },
    ]);
    const ts = isoNow();
    expect((await telemetry(d.token, { timestamp: ts, connector_id: 3, state: 'idle' })).status).toBe(200);
    const view = await operatorDevice(t.token, d.deviceId);
    expect(view.connectors).toHaveLength(2);
    expect(view.connectors[1]).toEqual({
      connector_id: 3,
      status: 'idle',
      energy_delivered: 0,
      last_telemetry_time: ts,
      v2g_capable: false,
    });
  });

  it('accepts a discharging record with negative power and shows it', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const res = await telemetry(
      d.token,
      base({ connector_id: 2, state: 'discharging', power: -7.4, current: -32, soc: 64 }),
    );
    expect(res.status).toBe(200);
    const view = await operatorDevice(t.token, d.deviceId);
    expect(view.connectors[1]).toMatchObject({
      connector_id: 2,
      status: 'discharging',
      power: -7.4,
      current: -32,
      soc: 64,
      v2g_capable: true,
    });
  });

  it.each([
    ['soc', { soc: 101 }, 101],
    ['soc', { soc: -1 }, -1],
    ['soc', { soc: 55.5 }, 55.5],
    ['connector_id', { connector_id: 0 }, 0],
    ['connector_id', { connector_id: 1.5 }, 1.5],
    ['connector_id', { connector_id: '1' }, '1'],
    ['state', { state: 'unavailable' }, 'unavailable'],
    ['state', { state: 'boosting' }, 'boosting'],
    ['timestamp', { timestamp: 'not-a-date' }, 'not-a-date'],
    ['timestamp', { timestamp: '2025-02-30T10:00:00Z' }, '2025-02-30T10:00:00Z'],
    ['timestamp', { timestamp: '2025-06-01T10:00:00' }, '2025-06-01T10:00:00'],
    ['power', { state: 'discharging', power: 7.4 }, 7.4],
    ['power', { state: 'discharging', power: 0 }, 0],
    ['voltage', { voltage: -1 }, -1],
    ['temperature', { temperature: 500 }, 500],
    ['phase_details.l1.voltage', { phase_details: { l1: { voltage: 'high' } } }, 'high'],
  ])('refuses %s in %j: 400/1001 naming the field and value', async (field, overrides, value) => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    expectValidation(await telemetry(d.token, base(overrides)), field, value);
  });

  it('refuses discharging without power: 400/1001 on power', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const body: Record<string, unknown> = base({ state: 'discharging' });
    delete body.power;
    expectValidation(await telemetry(d.token, body), 'power', null);
  });

  it.each(['timestamp', 'connector_id', 'state'])('refuses a record without %s: 400/1001', async (field) => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const body: Record<string, unknown> = base();
    delete body[field];
    expectValidation(await telemetry(d.token, body), field, null);
  });

  it('a refused record changes nothing', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    expectValidation(await telemetry(d.token, base({ soc: 101 })), 'soc', 101);
    const view = await operatorDevice(t.token, d.deviceId);
    expect(view.connectors[0]).toEqual({
      connector_id: 1,
      status: 'unavailable',
      energy_delivered: 0,
      max_power_kw: 22,
      v2g_capable: false,
    });
  });
});

describe('liveness (DESIGN.md §7)', () => {
  it('is offline until the first authenticated request, online after it, offline 90 s after the last one', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    // Registration and token exchange are not authenticated requests.
    const fresh = await operatorDevice(t.token, d.deviceId);
    expect(fresh.status).toBe('offline');

    expect(
      (await telemetry(d.token, { timestamp: isoNow(), connector_id: 1, state: 'charging', power: 11 }))
        .status,
    ).toBe(200);
    const online = await operatorDevice(t.token, d.deviceId);
    expect(online.status).toBe('online');
    expect(online.connectors[0].status).toBe('charging');

    advance(80_000);
    const still = await operatorDevice(t.token, d.deviceId);
    expect(still.status).toBe('online');
    expect(still.connectors[0].status).toBe('charging');

    advance(11_000);
    const gone = await operatorDevice(t.token, d.deviceId);
    expect(gone.status).toBe('offline');
    expect(gone.connectors.map((c: { status: string }) => c.status)).toEqual(['unavailable', 'unavailable']);
    // The last reported values stay visible.
    expect(gone.connectors[0].power).toBe(11);

    expect((await heartbeat(d.token)).status).toBe(200);
    expect((await operatorDevice(t.token, d.deviceId)).status).toBe('online');
  });

  it('an unauthenticated request does not make a device online', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    // Unauthenticated: does not make the device online.
    expectError(
      await tp.http.post('/v1/device/heartbeat', {
        json: { timestamp: isoNow(), status: 'online', fault_code: 0 },
      }),
      401,
      2001,
    );
    expect((await operatorDevice(t.token, d.deviceId)).status).toBe('offline');
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
