import { describe, expect, it } from 'vitest';
import { errorsPlatformPerFile, expectApiError } from '../helpers/error-checks.js';

/**
 * The error envelope everywhere (spec "Errors", DESIGN.md §4) for request bodies: malformed JSON, content types
 * and body sizes get an ErrorResponse with X-API-Version and nothing internal. Routes, query strings, paths and
 * raw HTTP are in errors-requests.test.ts; X-API-Version, internal errors and leaks in errors-responses.test.ts.
 */

const ctx = errorsPlatformPerFile();
const heartbeatBody = () => ({ timestamp: new Date().toISOString(), status: 'online', fault_code: 0 });

/** JSON endpoints with what each needs to get past authentication. */
function jsonEndpoints() {
  return [
    { name: 'device register', path: '/v1/device/register', token: undefined },
    { name: 'device token', path: '/v1/device/token', token: undefined },
    { name: 'heartbeat', path: '/v1/device/heartbeat', token: ctx.device.token },
    { name: 'telemetry', path: '/v1/device/telemetry', token: ctx.device.token },
    {
      name: 'stop',
      path: `/v1/operator/devices/${ctx.device.deviceId}/connectors/1/stop`,
      token: ctx.tenant.token,
    },
    { name: 'flexibility', path: '/v1/operator/control/flexibility', token: ctx.tenant.token },
  ];
}

describe('malformed bodies: 400/1002', () => {
  it.each([
    '{"sn":',
    '{bad json}',
    "{'sn':'x'}",
    '{"a":1,}',
    '{"a":1}{"b":2}',
    '{"a":1} trailing',
    'NaN',
    '\u0000',
  ])('refuses %j on every JSON endpoint', async (raw) => {
    for (const e of jsonEndpoints()) {
      const res = await ctx.tp.http.post(e.path, { token: e.token, raw, contentType: 'application/json' });
      expect({ endpoint: e.name, status: res.status, code: res.body?.code }).toEqual({
        endpoint: e.name,
        status: 400,
        code: 1002,
      });
      expectApiError(res, 400, 1002);
    }
  });

  it('refuses malformed JSON on the operator token endpoint too', async () => {
    const res = await ctx.tp.http.post('/v1/operator/oauth/token', {
      raw: '{"client_id":',
      contentType: 'application/json',
    });
    expectApiError(res, 400, 1002, 'invalid_request');
  });

  it('refuses an empty body declared as JSON', async () => {
    for (const e of jsonEndpoints()) {
      const res = await ctx.tp.http.post(e.path, {
        token: e.token,
        raw: '',
        contentType: 'application/json',
      });
      expectApiError(res, 400, 1002);
    }
  });

  it('refuses __proto__ and constructor.prototype poisoning, and nothing is polluted', async () => {
    const poisons = [
      '{"__proto__":{"polluted":"yes"}}',
      '{"sn":"x","nested":{"__proto__":{"polluted":"yes"}}}',
      '{"constructor":{"prototype":{"polluted":"yes"}}}',
      `{"timestamp":"${new Date().toISOString()}","status":"online","fault_code":0,"__proto__":{"isAdmin":true}}`,
    ];
    for (const raw of poisons) {
      for (const e of jsonEndpoints()) {
        const res = await ctx.tp.http.post(e.path, { token: e.token, raw, contentType: 'application/json' });
        expectApiError(res, 400, 1002);
      }
    }
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(({} as Record<string, unknown>).isAdmin).toBeUndefined();
  });

  it('answers a JSON value that is not an object with 400/1001 on body', async () => {
    for (const raw of ['null', '[]', '"text"', '42', 'true']) {
      const res = await ctx.tp.http.post('/v1/device/register', { raw, contentType: 'application/json' });
      const body = expectApiError(res, 400, 1001);
      expect(body.details.field).toBe('body');
    }
  });
});

describe('content type: 415/1002', () => {
  it.each([
    'text/plain',
    'text/plain; charset=utf-8',
    'application/x-www-form-urlencoded',
    'application/xml',
    'multipart/form-data; boundary=x',
    'application/octet-stream',
  ])('refuses %s on every JSON endpoint', async (contentType) => {
    const raw = contentType.startsWith('application/x-www') ? 'sn=abc&model=m' : '{"sn":"abc"}';
    for (const e of jsonEndpoints()) {
      const res = await ctx.tp.http.post(e.path, { token: e.token, raw, contentType });
      expect({ endpoint: e.name, status: res.status }).toEqual({ endpoint: e.name, status: 415 });
      expectApiError(res, 415, 1002);
    }
  });

  it('refuses a body without a content type', async () => {
    for (const e of jsonEndpoints()) {
      const res = await ctx.tp.http.post(e.path, { token: e.token, raw: JSON.stringify(heartbeatBody()) });
      expectApiError(res, 415, 1002);
    }
  });

  it('accepts application/json with a charset', async () => {
    const res = await ctx.tp.http.post('/v1/device/heartbeat', {
      token: ctx.device.token,
      raw: JSON.stringify(heartbeatBody()),
      contentType: 'application/json; charset=utf-8',
    });
    expect(res.status).toBe(200);
    expect(res.body.code).toBe(0);
  });

  it('the operator token endpoint alone also takes form bodies (OAuth clients)', async () => {
    const form = new URLSearchParams({
      client_id: ctx.tenant.clientId,
      client_secret: ctx.tenant.clientSecret,
      grant_type: 'client_credentials',
    }).toString();
    const res = await ctx.tp.http.post('/v1/operator/oauth/token', {
      raw: form,
      contentType: 'application/x-www-form-urlencoded',
    });
    expect(res.status).toBe(200);
    expect(res.body.token_type).toBe('Bearer');
    expect(res.headers['x-api-version']).toBe('1.3.0');
  });
});

describe('body size: 413/1002 above 64 KiB', () => {
  /** A heartbeat padded to exactly `bytes` bytes of JSON. */
  function paddedHeartbeat(bytes: number): string {
    const base = JSON.stringify({ ...heartbeatBody(), pad: '' });
    const raw = JSON.stringify({ ...heartbeatBody(), pad: 'x'.repeat(bytes - base.length) });
    expect(Buffer.byteLength(raw)).toBe(bytes);
    return raw;
  }

  it('accepts a body of exactly 64 KiB and refuses one byte more', async () => {
    const fits = await ctx.tp.http.post('/v1/device/heartbeat', {
      token: ctx.device.token,
      raw: paddedHeartbeat(64 * 1024),
      contentType: 'application/json',
    });
    expect(fits.status).toBe(200);

    const over = await ctx.tp.http.post('/v1/device/heartbeat', {
      token: ctx.device.token,
      raw: paddedHeartbeat(64 * 1024 + 1),
      contentType: 'application/json',
    });
    expectApiError(over, 413, 1002);
  });

  it('refuses a 1 MiB body on every JSON endpoint', async () => {
    const raw = JSON.stringify({ sn: 'x'.repeat(1024 * 1024) });
    for (const e of jsonEndpoints()) {
      const res = await ctx.tp.http.post(e.path, { token: e.token, raw, contentType: 'application/json' });
      expectApiError(res, 413, 1002);
    }
  });
});
