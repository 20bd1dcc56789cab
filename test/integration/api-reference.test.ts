import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_REFERENCE_ASSETS } from '../../platform/http/api-reference-page.js';
import { createTenant, startTestPlatform, type TestPlatform } from '../helpers/platform.js';

/**
 * The interactive API reference at /docs (Swagger UI from the platform's own node_modules): everything it loads
 * comes from the platform, under a Content-Security-Policy that allows nothing else, and its Authorize dialog's
 * client-credentials request is one the token endpoint accepts.
 */

let tp: TestPlatform;
beforeAll(async () => {
  tp = await startTestPlatform();
});
afterAll(async () => {
  await tp.stop();
});

const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

const TYPES: Record<string, string> = {
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'api-reference.js': 'text/javascript; charset=utf-8',
  'swagger-ui.css': 'text/css; charset=utf-8',
  'favicon-32x32.png': 'image/png',
};

describe('GET /docs', () => {
  it('is an HTML page under a CSP that allows only this server, with no inline script or style', async () => {
    const res = await tp.http.get('/docs');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(res.headers['content-security-policy']).toBe(CSP);
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    // Nothing from another host: an isolated network serves the whole page.
    expect(res.text).not.toMatch(/https?:\/\//i);
    expect(res.text).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/i);
    expect(res.text).not.toMatch(/<style|\sstyle=/i);
  });

  it('references only its own assets, each served with its type', async () => {
    const html = (await tp.http.get('/docs')).text;
    const referenced = [...html.matchAll(/\s(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    expect(referenced).toEqual([
      '/docs/assets/favicon-32x32.png',
      '/docs/assets/swagger-ui.css',
      '/v1/openapi.json',
      '/docs/assets/swagger-ui-bundle.js',
      '/docs/assets/api-reference.js',
    ]);
    expect(Object.keys(TYPES).sort()).toEqual([...API_REFERENCE_ASSETS].sort());
    for (const url of referenced) {
      const res = await tp.http.get(url);
      expect(res.status, url).toBe(200);
      const name = url.replace('/docs/assets/', '');
      if (url.startsWith('/docs/assets/')) {
        expect(res.headers['content-type'], url).toBe(TYPES[name]);
        expect(res.headers['x-content-type-options'], url).toBe('nosniff');
        expect(res.headers.etag, url).toMatch(/^"[A-Za-z0-9_-]+"$/);
      }
    }
    const bundle = await tp.http.get('/docs/assets/swagger-ui-bundle.js');
    expect(bundle.text.length).toBeGreaterThan(1_000_000);
    expect(bundle.text).toContain('SwaggerUIBundle');
    const css = await tp.http.get('/docs/assets/swagger-ui.css');
    expect(css.text).toContain('.swagger-ui');
    // No web fonts or stylesheets fetched from elsewhere.
    expect(css.text).not.toMatch(/@import|@font-face|url\(["']?https?:/i);
  });

  it("starts Swagger UI on this platform's document from a served script, with nothing fetched elsewhere", async () => {
    const res = await tp.http.get('/docs/assets/api-reference.js');
    expect(res.text).toContain('SwaggerUIBundle({');
    expect(res.text).toContain("url: '/v1/openapi.json'");
    // The default would fetch a validator badge from validator.swagger.io.
    expect(res.text).toContain('validatorUrl: null');
    expect(res.text).toContain('persistAuthorization: false');
    expect(res.text).not.toMatch(/https?:\/\//i);
  });

  it('revalidates assets by ETag and answers 404 for anything else under /docs/assets', async () => {
    const first = await tp.http.get('/docs/assets/swagger-ui.css');
    const again = await tp.http.get('/docs/assets/swagger-ui.css', {
      headers: { 'if-none-match': String(first.headers.etag) },
    });
    expect(again.status).toBe(304);
    expect(again.text).toBe('');
    for (const path of [
      '/docs/assets/index.html',
      '/docs/assets/swagger-ui-bundle.js.map',
      '/docs/assets/..%2Fpackage.json',
      '/docs/assets/constructor',
      '/docs/assets/__proto__',
    ]) {
      const res = await tp.http.get(path);
      expect(res.status, path).toBe(404);
      expect(res.body.code, path).toBe(3001);
    }
  });
});

describe('"Authorize" in the reference', () => {
  it('declares client credentials against the token endpoint, which takes the request Swagger UI sends', async () => {
    const doc = (await tp.http.get('/v1/openapi.json')).body;
    const flow = doc.components.securitySchemes.operatorOAuth.flows.clientCredentials;
    expect(flow.tokenUrl).toBe('/v1/operator/oauth/token');
    expect(Object.keys(flow.scopes).sort()).toEqual(['read', 'write']);
    expect(doc.paths['/docs/assets/{name}'].get.parameters[0].schema.enum).toEqual([...API_REFERENCE_ASSETS]);

    // Swagger UI's client-credentials request: a form body, the client in HTTP Basic, the ticked scopes.
    const tenant = await createTenant(tp, 'Reference Co');
    const basic = Buffer.from(`${tenant.clientId}:${tenant.clientSecret}`).toString('base64');
    const res = await tp.http.post(flow.tokenUrl, {
      raw: 'grant_type=client_credentials&scope=read',
      contentType: 'application/x-www-form-urlencoded',
      headers: { authorization: `Basic ${basic}` },
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ token_type: 'Bearer', scope: 'read' });
    // ... and the token it obtained is then sent as a bearer token ("Try it out").
    const devices = await tp.http.get('/v1/operator/devices', { token: res.body.access_token });
    expect(devices.status).toBe(200);
  });
});
