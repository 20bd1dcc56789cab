import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AnyRoute } from '../../platform/http/route-spec.js';
import { garbageFor } from '../helpers/fuzz-garbage.js';
import {
  check,
  clockMovedMs,
  type Expected,
  expectHealthy,
  expectWellFormed,
  FORM_ROUTE,
  internalErrorsLogged,
  type Layer,
  type Snapshot,
  send,
  sent,
  snapshot,
  spend,
  startFuzzPlatform,
  stopFuzzPlatform,
  unauthenticatedAnswer,
} from '../helpers/fuzz-platform.js';
import { paramNames, pathWith, sampleBody, sampleQuery, validParams } from '../helpers/fuzz-samples.js';
import type { createTenant, RegisteredDevice, TestPlatform } from '../helpers/platform.js';

/**
 * Property-based garbage at every endpoint of the route table (`platform.routes`, so a new endpoint is fuzzed
 * without touching this file); the telemetry stream's is in fuzz-stream.test.ts. Every answer must be a
 * well-formed ErrorResponse whose code is the one the layer that refuses it documents (DESIGN.md §4), never a
 * 5xx, never a leak, and the platform's stored state must not move. Generators are built to be invalid by
 * construction and are filtered with the route's own zod schema, so nothing accidentally valid reaches a write
 * endpoint (test/helpers/fuzz-*.ts).
 *
 * Reproducible: one fixed seed (`FUZZ_SEED=n` explores others), bounded runs; rate limits kept out of the way
 * with the fake clock (test/helpers/fuzz-platform.ts).
 */

let tp: TestPlatform;
let tenant: Awaited<ReturnType<typeof createTenant>>;
let device: RegisteredDevice;
let routes: readonly AnyRoute[];

beforeAll(async () => {
  ({ tp, tenant, device, routes } = await startFuzzPlatform());
});
afterAll(async () => {
  await stopFuzzPlatform();
});

describe('HTTP garbage at every endpoint of the route table', () => {
  let before: Snapshot;
  const covered = new Map<string, Set<Layer>>();
  const note = (route: AnyRoute, layer: Layer) => {
    const key = `${route.method} ${route.url}`;
    covered.set(key, (covered.get(key) ?? new Set()).add(layer));
  };

  beforeAll(async () => {
    // The heartbeat of expectHealthy() is the only write of this block; its rows exist before the snapshot.
    await expectHealthy();
    before = await snapshot();
  });

  it('the samples the generators break are valid requests, and every endpoint is fuzzable', () => {
    expect(routes.length).toBeGreaterThanOrEqual(30);
    for (const route of routes) {
      const label = `${route.method} ${route.url}`;
      if (route.params) expect(route.params.safeParse(validParams(route)).success, label).toBe(true);
      if (route.query) expect(route.query.safeParse(sampleQuery(route)).success, label).toBe(true);
      if (route.body) {
        const sample = sampleBody(route);
        expect(sample, `${label}: add a valid sample body`).toBeDefined();
        expect(route.body.safeParse(sample).success, label).toBe(true);
      }
    }
  });

  it('valid credentials: every refusal is the validation answer of the layer that refuses', async () => {
    for (const route of routes) {
      await fc.assert(
        fc.asyncProperty(garbageFor(route), async (g) => {
          note(route, g.layer);
          await check(route, g, true);
        }),
        { numRuns: route.body ? 80 : 40 },
      );
    }
  }, 60_000);

  it('no credentials (or garbage ones): 401/2001 unless parsing or routing refused it first', async () => {
    const garbageToken = fc.oneof(
      fc.constant(undefined),
      fc.stringMatching(/^[\x20-\x7e]{0,200}$/).map((t) => `Bearer ${t}`),
      fc.constantFrom(
        'Bearer',
        'Bearer ',
        'Basic Zm9vOmJhcg==',
        'bearer op..',
        `Bearer ${'A'.repeat(6_000)}`,
        'Bearer op.e30.',
        'Bearer dv.e30.AAAA',
      ),
    );
    for (const route of routes) {
      await fc.assert(
        fc.asyncProperty(garbageFor(route), garbageToken, async (g, authorization) => {
          const expected = unauthenticatedAnswer(route, g);
          const res = await send({
            method: g.method,
            path: g.path,
            ...(authorization !== undefined && route.auth.kind !== 'none' ? { authorization } : {}),
            ...(g.body !== undefined ? { body: g.body } : {}),
            ...(g.contentType !== undefined ? { contentType: g.contentType } : {}),
            ...(g.headers ? { headers: g.headers } : {}),
          });
          const label = `${route.method} ${route.url} [no auth: ${String(authorization).slice(0, 40)}] ${g.label}`;
          expectWellFormed(res, label);
          expect({ label, status: res.status, code: res.body.code }, res.text.slice(0, 300)).toEqual({
            label,
            status: expected.status,
            code: expected.code,
          });
        }),
        { numRuns: 20 },
      );
    }
  }, 60_000);

  it('fixed hostile inputs: raw traversal in the path, duplicate keys, huge numbers, a body of 5,000 levels', async () => {
    // Unencoded dot segments are not normalised into another route.
    for (const path of [
      '/v1/operator/devices/../sites',
      '/v1/operator/devices/..%2F..%2Fsites',
      '/v1/operator/devices/%2e%2e/%2e%2e/sites',
      '/v1/operator/./devices',
      '//v1//operator//devices',
      '/v1/operator/devices/x/../../sites',
      '/v1/device/../operator/sites',
    ]) {
      spend(routes.find((r) => r.url === '/v1/operator/sites')!, true);
      const res = await send({ method: 'GET', path, authorization: `Bearer ${tenant.token}` });
      expectWellFormed(res, path);
      expect([400, 404], `${path} -> ${res.status}`).toContain(res.status);
    }
    const heartbeat = routes.find((r) => r.url === '/v1/device/heartbeat')!;
    const t = new Date().toISOString();
    const fixed: Array<[string, string, Expected]> = [
      [
        'duplicate key, last one wrong',
        `{"timestamp":"${t}","status":"online","fault_code":0,"status":5}`,
        { status: 400, code: 1001 },
      ],
      [
        'number overflowing to Infinity',
        `{"timestamp":"${t}","status":"online","fault_code":1e400}`,
        { status: 400, code: 1001 },
      ],
      [
        'huge integer',
        `{"timestamp":"${t}","status":"online","fault_code":${'9'.repeat(400)}}`,
        { status: 400, code: 1001 },
      ],
      [
        'negative zero',
        `{"timestamp":"${t}","status":"online","fault_code":-0.0000001}`,
        { status: 400, code: 1001 },
      ],
      ['5,000 nested arrays', `${'['.repeat(5_000)}${']'.repeat(5_000)}`, { status: 400, code: 1001 }],
      ['5,000 nested objects', `${'{"a":'.repeat(5_000)}1${'}'.repeat(5_000)}`, { status: 400, code: 1001 }],
      [
        '30,000 nested arrays (just under 64 KiB)',
        `${'['.repeat(30_000)}${']'.repeat(30_000)}`,
        { status: 400, code: 1001 },
      ],
      [
        'nesting inside a valid body',
        `{"timestamp":"${t}","status":"online","fault_code":${'['.repeat(5_000)}${']'.repeat(5_000)}}`,
        { status: 400, code: 1001 },
      ],
      ['UTF-8 BOM then garbage', '\uFEFF{"a"', { status: 400, code: 1002 }],
      ['UTF-16 body', '', { status: 400, code: 1002 }],
    ];
    for (const [label, raw, expected] of fixed) {
      const body = label === 'UTF-16 body' ? Buffer.from(`{"timestamp":"${t}"}`, 'utf16le') : raw;
      spend(heartbeat, true);
      const res = await send({
        method: 'POST',
        path: '/v1/device/heartbeat',
        authorization: `Bearer ${device.token}`,
        body,
        contentType: 'application/json',
      });
      expectWellFormed(res, label);
      expect({ label, status: res.status, code: res.body.code }).toEqual({ label, ...expected });
    }
  });

  it('regression: invalid UTF-8 is refused with 400/1002 instead of being stored as U+FFFD', async () => {
    const register = Buffer.concat([
      Buffer.from('{"sn":"SN-UTF8-'),
      Buffer.from([0xc0, 0xaf]),
      Buffer.from('","model":"m","manufacturer":"Acme","firmware_version":"1"}'),
    ]);
    const res = await send({
      method: 'POST',
      path: '/v1/device/register',
      body: register,
      contentType: 'application/json',
    });
    expectWellFormed(res, 'register with invalid UTF-8');
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ code: 1002, message: expect.stringMatching(/UTF-8/) });
    const form = Buffer.concat([
      Buffer.from('grant_type=client_credentials&client_id=x&client_secret='),
      Buffer.from([0xff]),
    ]);
    const token = await send({
      method: 'POST',
      path: FORM_ROUTE,
      body: form,
      contentType: 'application/x-www-form-urlencoded',
    });
    expectWellFormed(token, 'form token request with invalid UTF-8');
    expect({ status: token.status, code: token.body.code }).toEqual({ status: 400, code: 1002 });
    // Valid multi-byte UTF-8 is still accepted.
    tp.advance(61_000);
    const ok = await send({
      method: 'POST',
      path: '/v1/device/heartbeat',
      authorization: `Bearer ${device.token}`,
      body: Buffer.from(
        JSON.stringify({
          timestamp: new Date().toISOString(),
          status: 'online',
          fault_code: 0,
          note: 'Grüße 😀',
        }),
      ),
      contentType: 'application/json',
    });
    expect(ok.status, ok.text).toBe(200);
  });

  it('regression: an unknown field name is echoed cut to 200 characters, like a value', async () => {
    const key = 'k'.repeat(60_000);
    const viaQuery = await send({
      method: 'GET',
      path: `/v1/operator/sites?${'q'.repeat(12_000)}=1`,
      authorization: `Bearer ${tenant.token}`,
    });
    spend(routes.find((r) => r.url === '/v1/operator/sites')!, true);
    expectWellFormed(viaQuery, 'unknown 12 KB query parameter');
    expect(viaQuery.body.details.field).toBe(`${'q'.repeat(200)}…`);
    const stop = routes.find((r) => r.url.endsWith('/stop'))!;
    spend(stop, true);
    const viaBody = await send({
      method: 'POST',
      path: pathWith(stop, validParams(stop)),
      authorization: `Bearer ${tenant.token}`,
      body: JSON.stringify({ [key]: 1 }),
      contentType: 'application/json',
    });
    expectWellFormed(viaBody, 'unknown 60 KB body field');
    expect(viaBody.body).toEqual({
      code: 1001,
      message: `Invalid parameter ${'k'.repeat(200)}…: unknown field`,
      details: { field: `${'k'.repeat(200)}…`, value: 1 },
    });
  });

  it('covered every endpoint, nothing stored moved, nothing crashed, no internal error', async () => {
    for (const route of routes) expect(covered.has(`${route.method} ${route.url}`), route.url).toBe(true);
    // Every layer that applies to an endpoint was hit at least once.
    for (const route of routes) {
      const layers = covered.get(`${route.method} ${route.url}`)!;
      if (route.body) expect(layers.has('body'), route.url).toBe(true);
      if (route.streamed) expect(layers.has('file'), route.url).toBe(true);
      else if (route.method !== 'GET') expect(layers.has('transport'), route.url).toBe(true);
      if (paramNames(route).length)
        expect(layers.has('params') || layers.has('framework'), route.url).toBe(true);
      if (route.query) expect(layers.has('query'), route.url).toBe(true);
    }
    await expectHealthy();
    const after = await snapshot();
    // The health check's heartbeat writes no row of its own (heartbeats update the device).
    expect(after.counts).toEqual(before.counts);
    expect(after.devices).toEqual(before.devices);
    expect(after.clients).toEqual(before.clients);
    expect(internalErrorsLogged()).toEqual([]);
    // The fake clock stayed well inside the tokens' lifetime, so no answer above was a 2002 in disguise.
    expect(clockMovedMs).toBeLessThan(86_400_000 / 2);
    expect(sent).toBeGreaterThan(2_000);
  });
});
