import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTenant,
  expectError,
  operatorToken,
  type RegisteredDevice,
  registerDevice,
  type TestPlatform,
} from '../helpers/platform.js';
import { startTwoTenants } from '../helpers/two-tenants.js';

/**
 * The operator API's token endpoint, device view and charging records over real HTTPS; its commands and
 * flexibility controls are in operator-commands.test.ts.
 */

let tp: TestPlatform;
let tenant: Awaited<ReturnType<typeof createTenant>>;
let dev: RegisteredDevice;
let otherDev: RegisteredDevice;

beforeAll(async () => {
  ({ tp, tenant, dev, otherDev } = await startTwoTenants());
});
afterAll(async () => {
  await tp.stop();
});

describe('POST /v1/operator/oauth/token', () => {
  const path = '/v1/operator/oauth/token';

  it('issues an unenveloped bearer token from a JSON body', async () => {
    const res = await tp.http.post(path, {
      json: {
        client_id: tenant.clientId,
        client_secret: tenant.clientSecret,
        grant_type: 'client_credentials',
      },
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ token_type: 'Bearer', expires_in: 86400, scope: 'read write' });
    expect(typeof res.body.access_token).toBe('string');
    expect(res.body.code).toBeUndefined();
    expect(res.headers['cache-control']).toBe('no-store');
  });

  it('accepts form-urlencoded bodies and HTTP Basic client authentication', async () => {
    const form = new URLSearchParams({
      client_id: tenant.clientId,
      client_secret: tenant.clientSecret,
      grant_type: 'client_credentials',
    });
    const viaForm = await tp.http.post(path, {
      raw: form.toString(),
      contentType: 'application/x-www-form-urlencoded',
    });
    expect(viaForm.status).toBe(200);
    expect(viaForm.body.token_type).toBe('Bearer');

    const basic = Buffer.from(
      `${encodeURIComponent(tenant.clientId)}:${encodeURIComponent(tenant.clientSecret)}`,
    ).toString('base64');
    const viaBasic = await tp.http.post(path, {
      raw: 'grant_type=client_credentials',
      contentType: 'application/x-www-form-urlencoded',
      headers: { authorization: `Basic ${basic}` },
    });
    expect(viaBasic.status).toBe(200);
    const devices = await tp.http.get(`/v1/operator/devices/${dev.deviceId}`, {
      token: viaBasic.body.access_token,
    });
    expect(devices.status).toBe(200);
  });

  it('narrows scopes on request and refuses scopes the client lacks', async () => {
    const ro = await tp.http.post(path, {
      json: {
        client_id: tenant.clientId,
        client_secret: tenant.clientSecret,
        grant_type: 'client_credentials',
        scope: 'read',
      },
    });
    expect(ro.body.scope).toBe('read');
    const stop = await tp.http.post(`/v1/operator/devices/${dev.deviceId}/connectors/1/stop`, {
      token: ro.body.access_token,
      json: {},
    });
    expectError(stop, 403, 2003);

    const readOnly = await createTenant(tp, 'Gamma Read', ['read']);
    const widen = await tp.http.post(path, {
      json: {
        client_id: readOnly.clientId,
        client_secret: readOnly.clientSecret,
        grant_type: 'client_credentials',
        scope: 'read write',
      },
    });
    // RFC 6749 §5.2 invalid_scope, kept in the ErrorResponse (DESIGN.md §15).
    expect(expectError(widen, 400, 1001)).toMatchObject({
      details: { field: 'scope', value: 'read write' },
      error: 'invalid_scope',
      error_description: 'Requested scope is not granted to this client',
    });
    expect(widen.headers['cache-control']).toBe('no-store');
  });

  it('refuses a wrong grant_type, a wrong secret and an unknown client', async () => {
    const grant = await tp.http.post(path, {
      json: { client_id: tenant.clientId, client_secret: tenant.clientSecret, grant_type: 'password' },
    });
    expect(expectError(grant, 400, 1001).details).toEqual({ field: 'grant_type', value: 'password' });
    expect(grant.body.error).toBe('unsupported_grant_type');

    const wrong = await tp.http.post(path, {
      json: { client_id: tenant.clientId, client_secret: 'not-the-secret', grant_type: 'client_credentials' },
    });
    expectError(wrong, 401, 2001);
    expect(wrong.body.error).toBe('invalid_client');
    expect(wrong.headers['www-authenticate']).toBe(
      'Basic realm="charger-platform", error="invalid_client", error_description="Invalid client credentials"',
    );

    const unknown = await tp.http.post(path, {
      json: { client_id: 'cli_nobody', client_secret: 'x', grant_type: 'client_credentials' },
    });
    expectError(unknown, 401, 2001);
    expect(unknown.body.message).toBe(wrong.body.message);
  });

  it('never echoes a secret in a validation error', async () => {
    const res = await tp.http.post(path, {
      json: { client_id: tenant.clientId, client_secret: 'x'.repeat(300), grant_type: 'client_credentials' },
    });
    const body = expectError(res, 400, 1001);
    expect(body.details).toEqual({ field: 'client_secret', value: '[redacted]' });
  });

  it('keeps earlier tokens valid when a new one is issued', async () => {
    const first = await operatorToken(tp.http, tenant.clientId, tenant.clientSecret);
    const second = await operatorToken(tp.http, tenant.clientId, tenant.clientSecret);
    for (const token of [first, second, tenant.token]) {
      const res = await tp.http.get(`/v1/operator/devices/${dev.deviceId}`, { token });
      expect(res.status).toBe(200);
    }
  });
});

describe('GET /v1/operator/devices/{device_id}', () => {
  it('returns the device with its connectors’ live state', async () => {
    const ts = new Date(Date.now() - 1000).toISOString();
    const tel = await tp.http.post('/v1/device/telemetry', {
      token: dev.token,
      json: {
        timestamp: ts,
        connector_id: 1,
        state: 'charging',
        voltage: 230.5,
        current: 16,
        power: 11.04,
        energy_delivered: 3.2,
        soc: 47,
        temperature: 31.5,
      },
    });
    expect(tel.status).toBe(200);
    const res = await tp.http.get(`/v1/operator/devices/${dev.deviceId}`, { token: tenant.token });
    expect(res.status).toBe(200);
    expect(res.body.code).toBe(0);
    expect(res.body.message).toBe('success');
    const d = res.body.data;
    expect(d).toMatchObject({
      device_id: dev.deviceId,
      sn: 'OP-SN-1',
      model: 'Test AC',
      manufacturer: 'Acme',
      firmware_version: '1.0.0',
      status: 'online',
      site_id: tenant.siteId,
    });
    expect(d.connectors).toHaveLength(2);
    expect(d.connectors[0]).toMatchObject({
      connector_id: 1,
      status: 'charging',
      power: 11.04,
      voltage: 230.5,
      current: 16,
      energy_delivered: 3.2,
      soc: 47,
      temperature: 31.5,
      last_telemetry_time: ts,
    });
    expect(d.connectors[1]).toMatchObject({ connector_id: 2, v2g_capable: true, max_power_kw: 50 });
  });

  it('answers 404/3001 for an unknown device and, identically, for another tenant’s device', async () => {
    const unknown = await tp.http.get('/v1/operator/devices/dev_doesnotexist', { token: tenant.token });
    const foreign = await tp.http.get(`/v1/operator/devices/${otherDev.deviceId}`, { token: tenant.token });
    expectError(unknown, 404, 3001);
    expectError(foreign, 404, 3001);
    expect(foreign.body).toEqual(unknown.body);
  });

  it('hides a registered device that is in no site', async () => {
    const loose = await registerDevice(tp, 'OP-SN-LOOSE', undefined);
    expectError(
      await tp.http.get(`/v1/operator/devices/${loose.deviceId}`, { token: tenant.token }),
      404,
      3001,
    );
  });

  it('refuses requests without a valid operator token', async () => {
    const path = `/v1/operator/devices/${dev.deviceId}`;
    expectError(await tp.http.get(path), 401, 2001);
    expectError(await tp.http.get(path, { token: 'op.garbage.token' }), 401, 2001);
    expectError(await tp.http.get(path, { token: dev.token }), 401, 2001);
    const tampered = `${tenant.token.slice(0, -3)}${tenant.token.slice(-3) === 'AAA' ? 'BBB' : 'AAA'}`;
    expectError(await tp.http.get(path, { token: tampered }), 401, 2001);
  });
});

describe('GET /v1/operator/charging-records', () => {
  const H = 3_600_000;
  const base = Date.parse('2026-06-01T00:00:00Z');
  beforeAll(async () => {
    const rec = (id: string, deviceId: string, connector: number, startH: number, endH: number) => ({
      record_id: id,
      device_id: deviceId,
      connector_id: connector,
      start_time: new Date(base + startH * H).toISOString(),
      end_time: new Date(base + endH * H).toISOString(),
      energy: 10,
      max_power: 11,
      avg_power: 7,
      cost: 3.5,
      meter_start: 100,
      meter_end: 110,
      vehicle_info: { vin: 'VIN1', soc_start: 20, soc_end: 80 },
    });
    await tp.store.insertChargingRecords([
      rec('r1', dev.deviceId, 1, 0, 2),
      rec('r2', dev.deviceId, 2, 3, 5),
      rec('r3', dev.deviceId, 1, 6, 7),
      rec('r4', otherDev.deviceId, 1, 1, 4),
    ]);
  });
  const q = (query: string) => tp.http.get(`/v1/operator/charging-records${query}`, { token: tenant.token });

  it('lists the tenant’s records newest first with the default page and size', async () => {
    const res = await q('');
    expect(res.status).toBe(200);
    expect(res.body.data.page).toBe(1);
    expect(res.body.data.size).toBe(20);
    expect(res.body.data.total).toBe(3);
    expect(res.body.data.items.map((r: { record_id: string }) => r.record_id)).toEqual(['r3', 'r2', 'r1']);
    expect(res.body.data.items[2]).toEqual({
      record_id: 'r1',
      device_id: dev.deviceId,
      connector_id: 1,
      start_time: '2026-06-01T00:00:00.000Z',
      end_time: '2026-06-01T02:00:00.000Z',
      energy: 10,
      max_power: 11,
      avg_power: 7,
      cost: 3.5,
      meter_start: 100,
      meter_end: 110,
      vehicle_info: { vin: 'VIN1', soc_start: 20, soc_end: 80 },
    });
  });

  it('filters by device, connector and overlapping time window [start_time, end_time)', async () => {
    const ids = async (query: string) =>
      (await q(query)).body.data.items.map((r: { record_id: string }) => r.record_id);
    expect(await ids('?connector_id=1')).toEqual(['r3', 'r1']);
    expect(await ids(`?device_id=${dev.deviceId}&connector_id=2`)).toEqual(['r2']);
    // Window 02:00-03:00 touches r1's end and r2's start: neither overlaps.
    expect(await ids('?start_time=2026-06-01T02:00:00Z&end_time=2026-06-01T03:00:00Z')).toEqual([]);
    expect(await ids('?start_time=2026-06-01T01:59:00Z&end_time=2026-06-01T03:00:01Z')).toEqual(['r2', 'r1']);
    expect(await ids('?start_time=2026-06-01T03:30:00%2B02:00')).toEqual(['r3', 'r2', 'r1']);
    expect(await ids(`?device_id=${otherDev.deviceId}`)).toEqual([]);
  });

  it('pages', async () => {
    const p2 = await q('?size=2&page=2');
    expect(p2.body.data).toMatchObject({ total: 3, page: 2, size: 2 });
    expect(p2.body.data.items.map((r: { record_id: string }) => r.record_id)).toEqual(['r1']);
    const beyond = await q('?size=100&page=5');
    expect(beyond.body.data).toMatchObject({ total: 3, page: 5, size: 100, items: [] });
  });

  it.each([
    ['?page=0', 'page', '0'],
    ['?size=0', 'size', '0'],
    ['?size=101', 'size', '101'],
    ['?connector_id=0', 'connector_id', '0'],
    ['?page=abc', 'page', 'abc'],
    ['?size=1.5', 'size', '1.5'],
    ['?start_time=yesterday', 'start_time', 'yesterday'],
    ['?end_time=2026-13-01T00:00:00Z', 'end_time', '2026-13-01T00:00:00Z'],
    ['?start_time=2026-06-02T00:00:00Z&end_time=2026-06-01T00:00:00Z', 'end_time', '2026-06-01T00:00:00Z'],
    ['?colour=blue', 'colour', 'blue'],
    ['?page=1&page=2', 'page', '[array of 2]'],
  ])('refuses %s with 400/1001 naming the field', async (query, field, value) => {
    const body = expectError(await q(query), 400, 1001);
    expect(body.details).toEqual({ field, value });
  });
});
