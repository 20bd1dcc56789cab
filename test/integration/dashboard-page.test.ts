import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DASHBOARD_CSP } from '../../platform/http/dashboard-page.js';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';

/**
 * `/dashboard` as served (the browser tests drive it in Chromium, test/browser/dashboard.test.ts): one HTML page
 * under a CSP that allows only this server, its built script and stylesheet, nothing from anywhere else, and a
 * clear 404 for anything that is not one of its files.
 */
let tp: TestPlatform;
beforeAll(async () => {
  tp = await startTestPlatform();
});
afterAll(async () => {
  await tp.stop();
});

describe('GET /dashboard', () => {
  it('is an HTML page under a strict CSP, with no inline script or style and no other host', async () => {
    const res = await tp.http.get('/dashboard');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(res.headers['content-security-policy']).toBe(DASHBOARD_CSP);
    expect(DASHBOARD_CSP).toContain("default-src 'none'");
    expect(DASHBOARD_CSP).not.toMatch(/unsafe|https?:|\*/);
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.headers['x-frame-options']).toBe('DENY');
    expect(res.text).not.toMatch(/https?:\/\//i);
    expect(res.text).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/i);
    expect(res.text).not.toMatch(/<style|\sstyle=/i);
  });

  it('serves the built script and stylesheet it references, revalidated by ETag', async () => {
    const html = (await tp.http.get('/dashboard')).text;
    const referenced = [...html.matchAll(/\s(?:src|href)="(\/[^"]+)"/g)].map((m) => m[1]!);
    expect(referenced).toEqual([
      '/dashboard/assets/dashboard.css',
      '/dashboard/assets/dashboard.js',
      '/docs',
    ]);
    const js = await tp.http.get('/dashboard/assets/dashboard.js');
    expect(js.status).toBe(200);
    expect(js.headers['content-type']).toBe('text/javascript; charset=utf-8');
    // The app talks to this origin only: its API paths and the stream, never a full URL of its own making.
    expect(js.text).toContain('/v1/operator/oauth/token');
    expect(js.text).toContain('/v1/operator/stream');
    const css = await tp.http.get('/dashboard/assets/dashboard.css');
    expect(css.headers['content-type']).toBe('text/css; charset=utf-8');
    expect(css.text).not.toMatch(/@import|@font-face|url\(["']?https?:/i);
    const again = await tp.http.get('/dashboard/assets/dashboard.js', {
      headers: { 'if-none-match': String(js.headers.etag) },
    });
    expect(again.status).toBe(304);
  });

  it('answers 404 in the error envelope for anything else, and redirects a trailing slash', async () => {
    for (const name of ['nope.js', 'index.html', '..%2f..%2fpackage.json']) {
      const res = await tp.http.get(`/dashboard/assets/${name}`);
      expect(res.status, name).toBe(404);
      expect(res.body.code).toBe(3001);
    }
    const slash = await tp.http.get('/dashboard/');
    expect(slash.status).toBe(301);
    expect(slash.headers.location).toBe('/dashboard');
  });
});
