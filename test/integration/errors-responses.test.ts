import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_BACKEND } from '../helpers/backends.js';
import {
  errorsPlatformPerFile,
  expectApiError,
  expectEnvelope,
  expectNoLeak,
} from '../helpers/error-checks.js';
import {
  createTenant,
  type HttpResult,
  type RegisteredDevice,
  registerDevice,
  startTestPlatform,
  type TestPlatform,
} from '../helpers/platform.js';
import { openStoredData } from '../helpers/stored-data.js';

/**
 * The error envelope everywhere (spec "Errors", DESIGN.md §4) from the answer's side: X-API-Version on every
 * response, internal errors answered 500/9001 without internals, and no error body leaking any.
 */

const ctx = errorsPlatformPerFile();
const heartbeatBody = () => ({ timestamp: new Date().toISOString(), status: 'online', fault_code: 0 });

describe('X-API-Version on every response', () => {
  it('is 1.3.0 on successes and on errors of every kind', async () => {
    const reg = await ctx.tp.http.post('/v1/device/register', {
      json: { sn: ctx.sn(), model: 'M', manufacturer: 'Acme', firmware_version: '1' },
    });
    const responses: Array<[string, HttpResult]> = [
      ['healthz', await ctx.tp.http.get('/healthz')],
      ['register', reg],
      [
        'device token',
        await ctx.tp.http.post('/v1/device/token', {
          json: {
            device_id: reg.body.data.device_id,
            device_secret: reg.body.data.device_secret,
            grant_type: 'client_credentials',
          },
        }),
      ],
      [
        'heartbeat',
        await ctx.tp.http.post('/v1/device/heartbeat', { token: ctx.device.token, json: heartbeatBody() }),
      ],
      [
        'operator token',
        await ctx.tp.http.post('/v1/operator/oauth/token', {
          json: {
            client_id: ctx.tenant.clientId,
            client_secret: ctx.tenant.clientSecret,
            grant_type: 'client_credentials',
          },
        }),
      ],
      [
        'device',
        await ctx.tp.http.get(`/v1/operator/devices/${ctx.device.deviceId}`, { token: ctx.tenant.token }),
      ],
      ['records', await ctx.tp.http.get('/v1/operator/charging-records', { token: ctx.tenant.token })],
      ['400/1001', await ctx.tp.http.post('/v1/device/heartbeat', { token: ctx.device.token, json: {} })],
      [
        '400/1002',
        await ctx.tp.http.post('/v1/device/heartbeat', {
          token: ctx.device.token,
          raw: '{',
          contentType: 'application/json',
        }),
      ],
      ['401/2001', await ctx.tp.http.post('/v1/device/heartbeat', { json: heartbeatBody() })],
      ['404/3001 route', await ctx.tp.http.get('/v1/nope')],
      [
        '404/3001 device',
        await ctx.tp.http.get('/v1/operator/devices/dev_00000000000000000000', { token: ctx.tenant.token }),
      ],
      [
        '409/4001',
        await ctx.tp.http.post('/v1/device/register', {
          json: { sn: ctx.deviceSn, model: 'M', manufacturer: 'Acme', firmware_version: '1' },
        }),
      ],
      [
        '413/1002',
        await ctx.tp.http.post('/v1/device/register', {
          raw: 'x'.repeat(70_000),
          contentType: 'application/json',
        }),
      ],
      ['415/1002', await ctx.tp.http.post('/v1/device/register', { raw: 'x', contentType: 'text/plain' })],
      ['400 bad url', await ctx.tp.http.get('/v1/operator/devices/%zz', { token: ctx.tenant.token })],
      [
        '400 long param',
        await ctx.tp.http.get(`/v1/operator/devices/${'a'.repeat(300)}`, { token: ctx.tenant.token }),
      ],
    ];
    for (const [name, res] of responses) {
      expect({ name, version: res.headers['x-api-version'] }).toEqual({ name, version: '1.3.0' });
      expect(res.headers['x-request-id']).toBeTypeOf('string');
    }
    const statuses = responses.map(([, r]) => r.status);
    expect(statuses).toEqual([
      200, 200, 200, 200, 200, 200, 200, 400, 400, 401, 404, 404, 409, 413, 415, 400, 400,
    ]);
  });
});

describe('internal errors: 500/9001 without internals', () => {
  let broken: TestPlatform;
  let d: RegisteredDevice;
  beforeAll(async () => {
    broken = await startTestPlatform();
    const t = await createTenant(broken, 'broken');
    d = await registerDevice(broken, `SN-BROKEN-${process.pid}`, t.siteId);
    // Break the schema under the running platform, from another connection.
    const db = await openStoredData(broken.dataDir, { write: true });
    try {
      // SQLite keeps recent telemetry in `telemetry_recent` (`telemetry` is a view of it), PostgreSQL in `telemetry`.
      await db.exec(TEST_BACKEND === 'sqlite' ? 'DROP TABLE telemetry_recent' : 'DROP TABLE telemetry');
    } finally {
      await db.close();
    }
  });
  afterAll(async () => {
    await broken?.stop();
  });

  it('a failing SQLite write answers a bare 9001: no SQL, no SQLite error, no path, no stack', async () => {
    const res = await broken.http.post('/v1/device/telemetry', {
      token: d.token,
      json: { timestamp: new Date().toISOString(), connector_id: 1, state: 'idle' },
    });
    expectApiError(res, 500, 9001);
    expect(res.body).toEqual({ code: 9001, message: 'Internal error' });
    expect(res.text).not.toMatch(/telemetry|no such table/i);
  });

  it('the platform keeps serving after an internal error', async () => {
    const res = await broken.http.post('/v1/device/heartbeat', { token: d.token, json: heartbeatBody() });
    expect(res.status).toBe(200);
  });
});

describe('error bodies never leak internals', () => {
  it('holds across a sample of refusals', async () => {
    const samples: HttpResult[] = [
      await ctx.tp.http.post('/v1/device/register', { raw: '{"sn":', contentType: 'application/json' }),
      await ctx.tp.http.post('/v1/device/register', {
        json: { sn: ctx.deviceSn, model: 'M', manufacturer: 'A', firmware_version: '1' },
      }),
      await ctx.tp.http.post('/v1/device/token', {
        json: { device_id: ctx.device.deviceId, device_secret: 'wrong', grant_type: 'client_credentials' },
      }),
      await ctx.tp.http.post('/v1/device/heartbeat', { token: 'dv.e30.AAAA', json: heartbeatBody() }),
      await ctx.tp.http.post('/v1/device/telemetry', {
        token: ctx.device.token,
        json: { connector_id: 'DROP TABLE devices' },
      }),
      await ctx.tp.http.get("/v1/operator/devices/dev_1'%20OR%20'1'='1", { token: ctx.tenant.token }),
      await ctx.tp.http.get(
        '/v1/operator/charging-records?start_time=2025-01-01T00:00:00Z&end_time=2024-01-01T00:00:00Z',
        {
          token: ctx.tenant.token,
        },
      ),
      await ctx.tp.http.post('/v1/operator/control/flexibility', {
        token: ctx.tenant.token,
        json: { target_type: 'moon' },
      }),
      await ctx.tp.http.get('/v1/operator/devices/%c0%af', { token: ctx.tenant.token }),
    ];
    for (const res of samples) {
      expect(res.status).toBeGreaterThanOrEqual(400);
      expect(res.status).toBeLessThan(500);
      expectEnvelope(res);
      expectNoLeak(res);
    }
  });
});
