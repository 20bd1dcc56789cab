import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTenant, type HttpResult, startTestPlatform, type TestPlatform } from '../helpers/platform.js';

/** CORS for browser integrations (DESIGN.md §15): `serve --cors-origin`, exact origins, off by default. */

const APP = 'https://app.example.com';
const DEV = 'http://localhost:5173';
const OTHER = 'https://evil.example.net';

let on: TestPlatform;
let off: TestPlatform;
let token: string;
let offToken: string;
let client: { clientId: string; clientSecret: string };

beforeAll(async () => {
  [on, off] = await Promise.all([startTestPlatform({ corsOrigins: [APP, DEV] }), startTestPlatform()]);
  const tenant = await createTenant(on, 'Cors Co');
  token = tenant.token;
  client = tenant;
  offToken = (await createTenant(off, 'Cors Off Co')).token;
});
afterAll(async () => {
  await Promise.all([on?.stop(), off?.stop()]);
});

const corsHeaders = (res: HttpResult) =>
  Object.keys(res.headers).filter((h) => h.startsWith('access-control-'));

function preflight(tp: TestPlatform, path: string, origin: string, method = 'POST') {
  return tp.http.call('OPTIONS', path, {
    headers: {
      origin,
      'access-control-request-method': method,
      'access-control-request-headers': 'authorization, content-type',
    },
  });
}

describe('an allowed origin', () => {
  it('gets 204 to a preflight on any path, with the methods, headers and max-age', async () => {
    for (const [path, origin, method] of [
      ['/v1/operator/devices/dev_anything/connectors/1/stop', APP, 'POST'],
      ['/v1/operator/devices/dev_anything', DEV, 'GET'],
      ['/v1/operator/oauth/token', APP, 'POST'],
      ['/v1/operator/webhooks/wh_anything', APP, 'PATCH'],
      ['/no/such/path', APP, 'DELETE'],
    ] as const) {
      const res = await preflight(on, path, origin, method);
      expect(res.status, `${method} ${path}`).toBe(204);
      expect(res.text).toBe('');
      expect(res.headers['access-control-allow-origin']).toBe(origin);
      expect(res.headers.vary).toBe('Origin');
      expect(res.headers['access-control-allow-methods']).toBe('GET, POST, PUT, PATCH, DELETE');
      expect(res.headers['access-control-allow-headers']).toBe(
        'Authorization, Content-Type, X-Signature, X-Timestamp, X-Request-Id, X-Artifact-Signature, If-None-Match, ' +
          'If-Range, Range',
      );
      expect(res.headers['access-control-max-age']).toBe('600');
    }
  });

  it('preflights are neither authenticated nor rate-limited', async () => {
    // More than the operator query limit (60 a minute), with no credentials.
    const answers = await Promise.all(
      Array.from({ length: 70 }, () => preflight(on, '/v1/operator/devices', APP, 'GET')),
    );
    expect(answers.map((r) => r.status)).toEqual(answers.map(() => 204));
    for (const r of answers) expect(r.headers.ratelimit).toBeUndefined();
    const after = await on.http.get('/v1/operator/devices', { token, headers: { origin: APP } });
    expect(after.status).toBe(200);
  });

  it('reads answers of GET with a token, and the headers it needs are exposed', async () => {
    const res = await on.http.get('/v1/operator/devices', { token, headers: { origin: APP } });
    expect(res.status, res.text).toBe(200);
    expect(res.headers['access-control-allow-origin']).toBe(APP);
    expect(res.headers.vary).toBe('Origin');
    expect(res.headers['access-control-expose-headers']).toBe(
      'RateLimit, RateLimit-Policy, Retry-After, X-Request-Id, X-API-Version, ETag, Content-Range, Content-Disposition',
    );
    // What is exposed is there to read.
    expect(res.headers.ratelimit).toBeDefined();
    expect(res.headers['ratelimit-policy']).toBeDefined();
    expect(res.headers['x-request-id']).toBeDefined();
    expect(res.headers['x-api-version']).toBe('1.3.0');
    // Preflight-only headers are not on actual responses.
    expect(res.headers['access-control-allow-methods']).toBeUndefined();
  });

  it('reads answers of POST, and error answers too', async () => {
    const res = await on.http.post('/v1/operator/oauth/token', {
      headers: { origin: DEV },
      json: {
        client_id: client.clientId,
        client_secret: client.clientSecret,
        grant_type: 'client_credentials',
      },
    });
    expect(res.status, res.text).toBe(200);
    expect(res.headers['access-control-allow-origin']).toBe(DEV);
    const refused = await on.http.post('/v1/operator/devices/dev_none/connectors/1/stop', {
      headers: { origin: APP },
      json: {},
    });
    expect(refused.status).toBe(401);
    expect(refused.headers['access-control-allow-origin']).toBe(APP);
    expect(refused.headers['access-control-expose-headers']).toContain('X-Request-Id');
  });
});

describe('another origin', () => {
  it('gets a 403 ErrorResponse to its preflight, with no CORS header (the browser sends nothing more)', async () => {
    for (const origin of [OTHER, `${APP}/`, 'https://APP.example.com', 'null']) {
      const res = await preflight(on, '/v1/operator/devices/dev_anything/connectors/1/stop', origin);
      expect(res.status, origin).toBe(403);
      expect(res.body).toEqual({
        code: 2003,
        message: 'Cross-origin requests from this origin are not allowed',
        details: { field: 'origin', value: origin },
      });
      expect(corsHeaders(res), origin).toEqual([]);
    }
  });

  it('gets answers without CORS headers (which the browser then withholds from the page)', async () => {
    const res = await on.http.get('/v1/operator/devices', { token, headers: { origin: OTHER } });
    expect(res.status).toBe(200);
    expect(corsHeaders(res)).toEqual([]);
    const post = await on.http.post('/v1/operator/oauth/token', {
      headers: { origin: OTHER },
      json: {
        client_id: client.clientId,
        client_secret: client.clientSecret,
        grant_type: 'client_credentials',
      },
    });
    expect(post.status).toBe(200);
    expect(corsHeaders(post)).toEqual([]);
  });

  it('and requests without an Origin (servers, curl) are answered as before', async () => {
    const res = await on.http.get('/v1/operator/devices', { token });
    expect(res.status).toBe(200);
    expect(corsHeaders(res)).toEqual([]);
    // An OPTIONS that is no preflight is a request for a route that does not exist.
    const options = await on.http.call('OPTIONS', '/v1/operator/devices', { headers: { origin: APP } });
    expect(options.status).toBe(404);
    expect(options.body.code).toBe(3001);
  });
});

describe('CORS off (no --cors-origin)', () => {
  it('refuses every preflight with a 403 ErrorResponse, not a 404', async () => {
    for (const origin of [APP, OTHER]) {
      const res = await preflight(off, '/v1/operator/devices/dev_anything/connectors/1/stop', origin);
      expect(res.status).toBe(403);
      expect(res.body.code).toBe(2003);
      expect(corsHeaders(res)).toEqual([]);
      expect(res.headers['x-api-version']).toBe('1.3.0');
    }
  });

  it('adds no CORS header and no Vary to answers', async () => {
    const res = await off.http.get('/v1/operator/devices', { token: offToken, headers: { origin: APP } });
    expect(res.status).toBe(200);
    expect(corsHeaders(res)).toEqual([]);
    expect(res.headers.vary).toBeUndefined();
  });

  it('registers the same routes as with CORS on (the preflight route is not an API operation)', async () => {
    const key = (r: { method: string; url: string }) => `${r.method} ${r.url}`;
    expect(on.registeredRoutes.map(key).sort()).toEqual(off.registeredRoutes.map(key).sort());
    const paths = async (tp: TestPlatform) => (await tp.http.get('/v1/openapi.json')).body.paths;
    expect(await paths(on)).toEqual(await paths(off));
  });
});
