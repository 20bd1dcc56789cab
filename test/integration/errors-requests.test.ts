import tls from 'node:tls';
import { describe, expect, it } from 'vitest';
import {
  errorsPlatformPerFile,
  expectApiError,
  expectEnvelope,
  expectNoLeak,
} from '../helpers/error-checks.js';

/**
 * The error envelope everywhere (spec "Errors", DESIGN.md §4) for requests the platform cannot route or read:
 * unknown routes, repeated and unknown query parameters, hostile path ids and HTTP its parser refuses.
 */

const ctx = errorsPlatformPerFile();

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
    const res = await ctx.tp.http.call(method, path, { token: ctx.tenant.token });
    expectApiError(res, 404, 3001);
  });

  it('does not echo the query string of an unknown route', async () => {
    const res = await ctx.tp.http.get('/v1/nope?client_secret=hunter2&x=%3Cscript%3E');
    expectApiError(res, 404, 3001);
    expect(res.text).not.toContain('hunter2');
    expect(res.text).not.toContain('script');
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
    const res = await ctx.tp.http.get(`/v1/operator/charging-records?${query}`, { token: ctx.tenant.token });
    const body = expectApiError(res, 400, 1001);
    expect(body.details).toEqual({ field, value });
  });
});

describe('a query parameter on an operation that takes none: 400/1001 naming it, nothing done', () => {
  it('GET of one device', async () => {
    const res = await ctx.tp.http.get(`/v1/operator/devices/${ctx.device.deviceId}?_=1700000000`, {
      token: ctx.tenant.token,
    });
    expect(expectApiError(res, 400, 1001).details).toEqual({ field: '_', value: '1700000000' });
  });

  it('a stop is not queued', async () => {
    const path = `/v1/operator/devices/${ctx.device.deviceId}/connectors/1/stop`;
    const res = await ctx.tp.http.post(`${path}?trace=abc`, { token: ctx.tenant.token, json: {} });
    expect(expectApiError(res, 400, 1001).details).toEqual({ field: 'trace', value: 'abc' });
    const commands = await ctx.tp.http.get(`/v1/operator/devices/${ctx.device.deviceId}/commands`, {
      token: ctx.tenant.token,
    });
    expect(commands.status, commands.text).toBe(200);
    expect(commands.body.data.items).toEqual([]);
  });

  it("a charger's heartbeat", async () => {
    const res = await ctx.tp.http.post('/v1/device/heartbeat?x=1', {
      token: ctx.device.token,
      json: { timestamp: new Date().toISOString(), status: 'online', fault_code: null },
    });
    expect(expectApiError(res, 400, 1001).details).toEqual({ field: 'x', value: '1' });
  });

  it('an empty query string is no parameter', async () => {
    const res = await ctx.tp.http.get(`/v1/operator/devices/${ctx.device.deviceId}?`, {
      token: ctx.tenant.token,
    });
    expect(res.status, res.text).toBe(200);
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
    const res = await ctx.tp.http.get(`/v1/operator/devices/${id}`, { token: ctx.tenant.token });
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
      const res = await ctx.tp.http.post(`/v1/operator/devices/${id}/connectors/1/stop`, {
        token: ctx.tenant.token,
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
    const res = await ctx.tp.http.get(`/v1/operator/devices/${id}`, { token: ctx.tenant.token });
    const body = expectApiError(res, 400, 1001);
    expect(body.details).toEqual({ field, value });
  });

  it.each(['%zz', '%c0%af', '%ff', '%E0%A4%A'])(
    '%s, not decodable, is refused: 400/1001 on path',
    async (id) => {
      const res = await ctx.tp.http.get(`/v1/operator/devices/${id}`, { token: ctx.tenant.token });
      const body = expectApiError(res, 400, 1001);
      expect(body.details).toEqual({ field: 'path', value: `/v1/operator/devices/${id}` });
    },
  );

  it('an over-long path parameter is refused: 400/1001', async () => {
    const res = await ctx.tp.http.get(`/v1/operator/devices/${'y'.repeat(250)}`, { token: ctx.tenant.token });
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
    const res = await ctx.tp.http.post(`/v1/operator/devices/${ctx.device.deviceId}/connectors/${cid}/stop`, {
      token: ctx.tenant.token,
      json: {},
    });
    const body = expectApiError(res, 400, 1001);
    expect(body.details).toEqual({ field: 'connector_id', value });
  });

  it('a well-formed id that does not exist is 404/3001', async () => {
    const res = await ctx.tp.http.get('/v1/operator/devices/dev_00000000000000000000', {
      token: ctx.tenant.token,
    });
    expectApiError(res, 404, 3001);
  });
});

describe('malformed HTTP', () => {
  /** Speaks raw HTTP/1.1 over TLS and returns whatever the server answers before it closes. */
  function rawExchange(request: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const socket = tls.connect(
        { host: '127.0.0.1', port: ctx.tp.port, ca: ctx.tp.ca, servername: 'localhost' },
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
