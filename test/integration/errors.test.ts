import tls from 'node:tls';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
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
import { createClientOf } from '../helpers/sealed-writes.js';
import { openStoredData } from '../helpers/stored-data.js';

/**
 * The error envelope everywhere (spec "Errors", DESIGN.md §4): every error body is an ErrorResponse, every
 * response carries X-API-Version, and nothing internal (stack traces, SQL, file paths) reaches a client.
 */

let tp: TestPlatform;
let operator: { operatorId: string; siteId: string };
/** A fresh API client and a fresh charger for every test, so that no test spends another's rate budget. */
let tenant: { operatorId: string; siteId: string; clientId: string; clientSecret: string; token: string };
let device: RegisteredDevice;
let deviceSn: string;

beforeAll(async () => {
  tp = await startTestPlatform();
  const t = await createTenant(tp, 'errors');
  operator = { operatorId: t.operatorId, siteId: t.siteId };
});
afterAll(async () => {
  await tp?.stop();
});
beforeEach(async () => {
  const { client, secret } = await createClientOf(tp, {
    operator_ids: [operator.operatorId],
    scopes: ['read', 'write'],
  });
  const token = await operatorToken(tp.http, client.client_id, secret);
  tenant = { ...operator, clientId: client.client_id, clientSecret: secret, token };
  deviceSn = sn();
  device = await registerDevice(tp, deviceSn, operator.siteId);
});

let serial = 0;
const sn = () => `SN-E-${process.pid}-${++serial}`;
const heartbeatBody = () => ({ timestamp: new Date().toISOString(), status: 'online', fault_code: 0 });

/** Only `code`, `message` and optionally `details` (an object): no `error`, `statusCode`, `stack`. */
/** `oauth`: the operator token endpoint's refusals also carry RFC 6749's `error` (DESIGN.md §15). */
function expectEnvelope(res: HttpResult, oauth?: string): void {
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  expect(res.body).toBeTypeOf('object');
  expect(Number.isInteger(res.body.code)).toBe(true);
  expect(res.body.code).not.toBe(0);
  expect(res.body.message).toBeTypeOf('string');
  expect(res.body.message.length).toBeGreaterThan(0);
  const keys = ['code', 'message', 'details', ...(oauth ? ['error', 'error_description'] : [])];
  for (const key of Object.keys(res.body)) expect(keys).toContain(key);
  if (oauth) expect(res.body).toMatchObject({ error: oauth, error_description: res.body.message });
  if ('details' in res.body) {
    expect(res.body.details).toBeTypeOf('object');
    expect(Array.isArray(res.body.details)).toBe(false);
  }
}

/** Nothing of the implementation: stack frames, SQL, SQLite, file-system paths, runtime error names. */
function expectNoLeak(res: HttpResult): void {
  const text = res.text;
  expect(text).not.toMatch(/SQLITE/i);
  expect(text).not.toMatch(/\bat\s+\S+\s+\(/); // "at fn (file:line)"
  expect(text).not.toMatch(/\.(?:ts|js|cjs|mjs):\d+/);
  expect(text).not.toMatch(/\/(?:work|tmp|home|root|usr|app|srv|opt)\//);
  expect(text).not.toMatch(/node_modules|node:internal|file:\/\//);
  expect(text).not.toMatch(/\b(?:SELECT|INSERT|UPDATE|DELETE FROM)\b/);
  expect(text).not.toMatch(/"stack"|TypeError|SyntaxError|FST_ERR/);
}

function expectApiError(res: HttpResult, status: number, code: number, oauth?: string) {
  const body = expectError(res, status, code);
  expectEnvelope(res, oauth);
  expectNoLeak(res);
  expect(res.headers['x-api-version']).toBe('1.3.0');
  return body;
}

/** JSON endpoints with what each needs to get past authentication. */
function jsonEndpoints() {
  return [
    { name: 'device register', path: '/v1/device/register', token: undefined },
    { name: 'device token', path: '/v1/device/token', token: undefined },
    { name: 'heartbeat', path: '/v1/device/heartbeat', token: device.token },
    { name: 'telemetry', path: '/v1/device/telemetry', token: device.token },
    { name: 'stop', path: `/v1/operator/devices/${device.deviceId}/connectors/1/stop`, token: tenant.token },
    { name: 'flexibility', path: '/v1/operator/control/flexibility', token: tenant.token },
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
      const res = await tp.http.post(e.path, { token: e.token, raw, contentType: 'application/json' });
      expect({ endpoint: e.name, status: res.status, code: res.body?.code }).toEqual({
        endpoint: e.name,
        status: 400,
        code: 1002,
      });
      expectApiError(res, 400, 1002);
    }
  });

  it('refuses malformed JSON on the operator token endpoint too', async () => {
    const res = await tp.http.post('/v1/operator/oauth/token', {
      raw: '{"client_id":',
      contentType: 'application/json',
    });
    expectApiError(res, 400, 1002, 'invalid_request');
  });

  it('refuses an empty body declared as JSON', async () => {
    for (const e of jsonEndpoints()) {
      const res = await tp.http.post(e.path, { token: e.token, raw: '', contentType: 'application/json' });
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
        const res = await tp.http.post(e.path, { token: e.token, raw, contentType: 'application/json' });
        expectApiError(res, 400, 1002);
      }
    }
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(({} as Record<string, unknown>).isAdmin).toBeUndefined();
  });

  it('answers a JSON value that is not an object with 400/1001 on body', async () => {
    for (const raw of ['null', '[]', '"text"', '42', 'true']) {
      const res = await tp.http.post('/v1/device/register', { raw, contentType: 'application/json' });
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
      const res = await tp.http.post(e.path, { token: e.token, raw, contentType });
      expect({ endpoint: e.name, status: res.status }).toEqual({ endpoint: e.name, status: 415 });
      expectApiError(res, 415, 1002);
    }
  });

  it('refuses a body without a content type', async () => {
    for (const e of jsonEndpoints()) {
      const res = await tp.http.post(e.path, { token: e.token, raw: JSON.stringify(heartbeatBody()) });
      expectApiError(res, 415, 1002);
    }
  });

  it('accepts application/json with a charset', async () => {
    const res = await tp.http.post('/v1/device/heartbeat', {
      token: device.token,
      raw: JSON.stringify(heartbeatBody()),
      contentType: 'application/json; charset=utf-8',
    });
    expect(res.status).toBe(200);
    expect(res.body.code).toBe(0);
  });

  it('the operator token endpoint alone also takes form bodies (OAuth clients)', async () => {
    const form = new URLSearchParams({
      client_id: tenant.clientId,
      client_secret: tenant.clientSecret,
      grant_type: 'client_credentials',
    }).toString();
    const res = await tp.http.post('/v1/operator/oauth/token', {
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
    const fits = await tp.http.post('/v1/device/heartbeat', {
      token: device.token,
      raw: paddedHeartbeat(64 * 1024),
      contentType: 'application/json',
    });
    expect(fits.status).toBe(200);

    const over = await tp.http.post('/v1/device/heartbeat', {
      token: device.token,
      raw: paddedHeartbeat(64 * 1024 + 1),
      contentType: 'application/json',
    });
    expectApiError(over, 413, 1002);
  });

  it('refuses a 1 MiB body on every JSON endpoint', async () => {
    const raw = JSON.stringify({ sn: 'x'.repeat(1024 * 1024) });
    for (const e of jsonEndpoints()) {
      const res = await tp.http.post(e.path, { token: e.token, raw, contentType: 'application/json' });
      expectApiError(res, 413, 1002);
    }
  });
});

describe('routes', () => {
  it.each([
    ['GET', '/v1/nope'],
    ['GET', '/'],
    ['POST', '/v1/device/unknown'],
    ['GET', '/v1/device/heartbeat'],
    ['DELETE', '/v1/device/heartbeat'],
    ['PUT', '/v1/device/register'],
    ['GET', '/v2/operator/devices'],
    ['GET', '/v1/operator/devices/dev_1/extra/segment'],
  ])('answers %s %s with 404/3001', async (method, path) => {
    const res = await tp.http.call(method, path, { token: tenant.token });
    expectApiError(res, 404, 3001);
  });

  it('does not echo the query string of an unknown route', async () => {
    const res = await tp.http.get('/v1/nope?client_secret=hunter2&x=%3Cscript%3E');
    expectApiError(res, 404, 3001);
    expect(res.text).not.toContain('hunter2');
    expect(res.text).not.toContain('script');
  });
});

describe('X-API-Version on every response', () => {
  it('is 1.3.0 on successes and on errors of every kind', async () => {
    const reg = await tp.http.post('/v1/device/register', {
      json: { sn: sn(), model: 'M', manufacturer: 'Acme', firmware_version: '1' },
    });
    const responses: Array<[string, HttpResult]> = [
      ['healthz', await tp.http.get('/healthz')],
      ['register', reg],
      [
        'device token',
        await tp.http.post('/v1/device/token', {
          json: {
            device_id: reg.body.data.device_id,
            device_secret: reg.body.data.device_secret,
            grant_type: 'client_credentials',
          },
        }),
      ],
      [
        'heartbeat',
        await tp.http.post('/v1/device/heartbeat', { token: device.token, json: heartbeatBody() }),
      ],
      [
        'operator token',
        await tp.http.post('/v1/operator/oauth/token', {
          json: {
            client_id: tenant.clientId,
            client_secret: tenant.clientSecret,
            grant_type: 'client_credentials',
          },
        }),
      ],
      ['device', await tp.http.get(`/v1/operator/devices/${device.deviceId}`, { token: tenant.token })],
      ['records', await tp.http.get('/v1/operator/charging-records', { token: tenant.token })],
      ['400/1001', await tp.http.post('/v1/device/heartbeat', { token: device.token, json: {} })],
      [
        '400/1002',
        await tp.http.post('/v1/device/heartbeat', {
          token: device.token,
          raw: '{',
          contentType: 'application/json',
        }),
      ],
      ['401/2001', await tp.http.post('/v1/device/heartbeat', { json: heartbeatBody() })],
      ['404/3001 route', await tp.http.get('/v1/nope')],
      [
        '404/3001 device',
        await tp.http.get('/v1/operator/devices/dev_00000000000000000000', { token: tenant.token }),
      ],
      [
        '409/4001',
        await tp.http.post('/v1/device/register', {
          json: { sn: deviceSn, model: 'M', manufacturer: 'Acme', firmware_version: '1' },
        }),
      ],
      [
        '413/1002',
        await tp.http.post('/v1/device/register', {
          raw: 'x'.repeat(70_000),
          contentType: 'application/json',
        }),
      ],
      ['415/1002', await tp.http.post('/v1/device/register', { raw: 'x', contentType: 'text/plain' })],
      ['400 bad url', await tp.http.get('/v1/operator/devices/%zz', { token: tenant.token })],
      [
        '400 long param',
        await tp.http.get(`/v1/operator/devices/${'a'.repeat(300)}`, { token: tenant.token }),
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

describe('repeated and unknown query parameters: 400/1001', () => {
  it.each([
    ['page=1&page=2', 'page', '[array of 2]'],
    ['size=10&size=10', 'size', '[array of 2]'],
    ['device_id=dev_a&device_id=dev_b', 'device_id', '[array of 2]'],
    ['connector_id=1&connector_id=2', 'connector_id', '[array of 2]'],
    ['page=1&colour=red', 'colour', 'red'],
    ['page=0', 'page', '0'],
    ['page=1e3', 'page', '1e3'],
    ['size=101', 'size', '101'],
  ])('?%s', async (query, field, value) => {
    const res = await tp.http.get(`/v1/operator/charging-records?${query}`, { token: tenant.token });
    const body = expectApiError(res, 400, 1001);
    expect(body.details).toEqual({ field, value });
  });
});

describe('path ids with traversal or control characters', () => {
  const hostile = [
    '%2e%2e%2f',
    '..%2f..%2fetc%2fpasswd',
    '%2e%2e',
    '%00',
    'dev%00admin',
    '%0d%0aX-Injected:%201',
    '%1b%5b31m',
    '%7f',
    '%zz',
    '%c0%af',
    '%ff%fe',
    '%E0%A4%A',
    '%25',
    '%20',
    'a%2fb',
    '%3Cscript%3E',
    'x'.repeat(65),
    'y'.repeat(250),
    `dev_${'%41'.repeat(80)}`,
  ];

  it.each(hostile)('GET /v1/operator/devices/%s answers a well-formed 4xx ErrorResponse', async (id) => {
    const res = await tp.http.get(`/v1/operator/devices/${id}`, { token: tenant.token });
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(res.status).toBeLessThan(500);
    expectEnvelope(res);
    expectNoLeak(res);
    expect(res.headers['x-api-version']).toBe('1.3.0');
    expect(res.headers['x-injected']).toBeUndefined();
  });

  it.each(hostile)(
    'POST .../devices/%s/connectors/1/stop answers a well-formed 4xx ErrorResponse',
    async (id) => {
      const res = await tp.http.post(`/v1/operator/devices/${id}/connectors/1/stop`, {
        token: tenant.token,
        json: {},
      });
      expect(res.status).toBeGreaterThanOrEqual(400);
      expect(res.status).toBeLessThan(500);
      expectEnvelope(res);
      expectNoLeak(res);
      expect(res.headers['x-api-version']).toBe('1.3.0');
    },
  );

  it.each([
    ['%2e%2e%2f', 'device_id', '../'],
    ['..%2f..%2fetc%2fpasswd', 'device_id', '../../etc/passwd'],
    ['%00', 'device_id', '\u0000'],
    ['%0d%0a', 'device_id', '\r\n'],
    ['x'.repeat(65), 'device_id', 'x'.repeat(65)],
  ])('%s is refused as a device_id: 400/1001', async (id, field, value) => {
    const res = await tp.http.get(`/v1/operator/devices/${id}`, { token: tenant.token });
    const body = expectApiError(res, 400, 1001);
    expect(body.details).toEqual({ field, value });
  });

  it.each(['%zz', '%c0%af', '%ff', '%E0%A4%A'])(
    '%s, not decodable, is refused: 400/1001 on path',
    async (id) => {
      const res = await tp.http.get(`/v1/operator/devices/${id}`, { token: tenant.token });
      const body = expectApiError(res, 400, 1001);
      expect(body.details).toEqual({ field: 'path', value: `/v1/operator/devices/${id}` });
    },
  );

  it('an over-long path parameter is refused: 400/1001', async () => {
    const res = await tp.http.get(`/v1/operator/devices/${'y'.repeat(250)}`, { token: tenant.token });
    const body = expectApiError(res, 400, 1001);
    expect(body.details.field).toBe('path');
  });

  it.each([
    ['%00', '\u0000'],
    ['0', '0'],
    ['-1', '-1'],
    ['1.5', '1.5'],
    ['one', 'one'],
    ['1%2f2', '1/2'],
    ['1%20', '1 '],
    ['99999999999999999999', '99999999999999999999'],
  ])('connector_id %s is refused: 400/1001', async (cid, value) => {
    const res = await tp.http.post(`/v1/operator/devices/${device.deviceId}/connectors/${cid}/stop`, {
      token: tenant.token,
      json: {},
    });
    const body = expectApiError(res, 400, 1001);
    expect(body.details).toEqual({ field: 'connector_id', value });
  });

  it('a well-formed id that does not exist is 404/3001', async () => {
    const res = await tp.http.get('/v1/operator/devices/dev_00000000000000000000', { token: tenant.token });
    expectApiError(res, 404, 3001);
  });
});

describe('malformed HTTP', () => {
  /** Speaks raw HTTP/1.1 over TLS and returns whatever the server answers before it closes. */
  function rawExchange(request: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const socket = tls.connect(
        { host: '127.0.0.1', port: tp.port, ca: tp.ca, servername: 'localhost' },
        () => {
          socket.write(request);
        },
      );
      let data = '';
      socket.setEncoding('utf8');
      socket.on('data', (chunk: string) => {
        data += chunk;
      });
      socket.on('close', () => resolve(data));
      socket.on('error', (err) => (data ? resolve(data) : reject(err)));
      socket.setTimeout(5_000, () => socket.destroy(new Error('timeout')));
    });
  }

  function parseRaw(raw: string) {
    const [head = '', body = ''] = raw.split('\r\n\r\n');
    const [statusLine = '', ...headerLines] = head.split('\r\n');
    const headers = Object.fromEntries(
      headerLines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]),
    );
    return { status: Number(statusLine.split(' ')[1]), headers, body: JSON.parse(body) };
  }

  it('a request the HTTP parser refuses still gets an ErrorResponse with X-API-Version', async () => {
    const res = parseRaw(await rawExchange('GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n'));
    expect(res.status).toBe(400);
    expect(res.headers['x-api-version']).toBe('1.3.0');
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.body).toEqual({ code: 1002, message: expect.any(String) });
  });

  it('oversized headers get 431 with an ErrorResponse', async () => {
    const res = parseRaw(
      await rawExchange(`GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`),
    );
    expect(res.status).toBe(431);
    expect(res.headers['x-api-version']).toBe('1.3.0');
    expect(res.body).toEqual({ code: 1002, message: expect.any(String) });
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
      await db.exec('DROP TABLE telemetry');
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
      await tp.http.post('/v1/device/register', { raw: '{"sn":', contentType: 'application/json' }),
      await tp.http.post('/v1/device/register', {
        json: { sn: deviceSn, model: 'M', manufacturer: 'A', firmware_version: '1' },
      }),
      await tp.http.post('/v1/device/token', {
        json: { device_id: device.deviceId, device_secret: 'wrong', grant_type: 'client_credentials' },
      }),
      await tp.http.post('/v1/device/heartbeat', { token: 'dv.e30.AAAA', json: heartbeatBody() }),
      await tp.http.post('/v1/device/telemetry', {
        token: device.token,
        json: { connector_id: 'DROP TABLE devices' },
      }),
      await tp.http.get("/v1/operator/devices/dev_1'%20OR%20'1'='1", { token: tenant.token }),
      await tp.http.get(
        '/v1/operator/charging-records?start_time=2025-01-01T00:00:00Z&end_time=2024-01-01T00:00:00Z',
        {
          token: tenant.token,
        },
      ),
      await tp.http.post('/v1/operator/control/flexibility', {
        token: tenant.token,
        json: { target_type: 'moon' },
      }),
      await tp.http.get('/v1/operator/devices/%c0%af', { token: tenant.token }),
    ];
    for (const res of samples) {
      expect(res.status).toBeGreaterThanOrEqual(400);
      expect(res.status).toBeLessThan(500);
      expectEnvelope(res);
      expectNoLeak(res);
    }
  });
});
