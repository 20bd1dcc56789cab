import type { Readable } from 'node:stream';
import fc from 'fast-check';
import { Agent } from 'undici';
import { expect } from 'vitest';
import type { AnyRoute } from '../../platform/http/route-spec.js';
import { RATE_LIMITS } from '../../shared/index.js';
import {
  createTenant,
  type RegisteredDevice,
  registerDevice,
  startTestPlatform,
  type TestPlatform,
} from './platform.js';
import { openStoredData } from './stored-data.js';

/**
 * The platform the HTTP fuzz tests (fuzz-http, fuzz-stream) send their garbage to, and what they check of each
 * answer and of the stored state. One per test file: `startFuzzPlatform()` in beforeAll sets this module's state
 * (vitest gives each test file its own modules), `stopFuzzPlatform()` in afterAll ends it.
 *
 * Reproducible: one fixed seed, bounded runs. Rate limits are kept out of the way with the fake clock (the
 * budget of each class is counted and the clock moved past the window before it runs out), so that every
 * answer asserted is the real validation answer and never a 429.
 */

/** Fixed for `npm test`; `FUZZ_SEED=n` explores other inputs (a failure prints the seed and path to replay). */
export const SEED = Number(process.env.FUZZ_SEED ?? 0x5eed_0006);
fc.configureGlobal({ seed: SEED, numRuns: 20, endOnFailure: true });

// biome-ignore lint/suspicious/noExplicitAny: response bodies are inspected field by field
export type Json = any;

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  body: Json;
  /** The path asked (the token endpoint's refusals also carry RFC 6749's `error`, DESIGN.md §15). */
  path: string;
}

export interface Expected {
  status: number;
  code: number;
  /** Acceptable `details.field` values, when the refusal names a field. */
  fields?: readonly string[];
}

/**
 * Which layer refuses the request: body parsing (before the handler), the router, the route's schemas, or the
 * checks of a streamed file body (its type, size and signature header), which run after authentication.
 */
export type Layer = 'transport' | 'framework' | 'params' | 'query' | 'body' | 'file';

export interface Garbage {
  label: string;
  method: string;
  path: string;
  body?: string | Buffer | (() => Readable);
  contentType?: string;
  headers?: Record<string, string>;
  layer: Layer;
  /** The answer with valid credentials (or on a route without authentication). */
  expect: Expected;
}

/** DESIGN.md §4: the HTTP statuses each documented code may come with. */
export const STATUS_OF: Record<number, readonly number[]> = {
  1001: [400],
  1002: [400, 413, 415],
  2001: [401],
  2002: [401],
  2003: [403],
  3001: [404],
  4001: [409],
  5001: [429],
};
export const FORBIDDEN_IN_INPUT = /sqlite|\/work|node_modules|__proto__|constructor|prototype/i;
export const FORM_ROUTE = '/v1/operator/oauth/token';

let tp: TestPlatform;
let agent: Agent;
let tenant: Awaited<ReturnType<typeof createTenant>>;
let device: RegisteredDevice;

export interface FuzzTarget {
  tp: TestPlatform;
  tenant: Awaited<ReturnType<typeof createTenant>>;
  device: RegisteredDevice;
  routes: readonly AnyRoute[];
}

export async function startFuzzPlatform(): Promise<FuzzTarget> {
  // Errors (level 50) are captured: an internal error anywhere during the fuzz fails the run.
  tp = await startTestPlatform({ logLevel: 'warn' });
  agent = new Agent({ connect: { ca: tp.ca }, keepAliveTimeout: 2_000 });
  tenant = await createTenant(tp, 'fuzz');
  device = await registerDevice(tp, `SN-FUZZ-${process.pid}`, tenant.siteId);
  return fuzzTarget();
}

/** The platform started, its tenant and charger, and its route table (the samples read their ids). */
export function fuzzTarget(): FuzzTarget {
  if (!tp) throw new Error('startFuzzPlatform() first');
  return { tp, tenant, device, routes: tp.platform.routes };
}

export async function stopFuzzPlatform(): Promise<void> {
  await agent?.close();
  await tp?.stop();
}

/** Raw request: the path goes out byte for byte (no URL normalisation), the body exactly as given. */
export async function send(req: {
  method: string;
  path: string;
  authorization?: string;
  body?: string | Buffer | (() => Readable);
  contentType?: string;
  headers?: Record<string, string>;
}): Promise<Answer> {
  const headers: Record<string, string> = { ...req.headers };
  if (req.authorization !== undefined) headers.authorization = req.authorization;
  if (req.contentType !== undefined) headers['content-type'] = req.contentType;
  const body = typeof req.body === 'function' ? req.body() : req.body;
  const res = await agent.request({
    origin: tp.url,
    path: req.path,
    method: req.method as 'GET',
    headers,
    body,
  });
  const text = await res.body.text();
  sent++;
  let parsed: Json;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  return { status: res.statusCode, headers: res.headers, text, body: parsed, path: req.path };
}

export let sent = 0;

/** Requests per rate class since the clock last moved; the clock moves past every window before one runs out. */
const spentInWindow = new Map<string, number>();
export let clockMovedMs = 0;
export function spend(route: AnyRoute, authenticated: boolean): void {
  if (!authenticated || route.auth.kind === 'none' || !route.rate) return;
  const n = (spentInWindow.get(route.rate) ?? 0) + 1;
  // Authenticated routes spend only the spec's classes.
  if (n >= RATE_LIMITS[route.rate as keyof typeof RATE_LIMITS].limit) {
    tp.advance(61_000);
    clockMovedMs += 61_000;
    spentInWindow.clear();
    spentInWindow.set(route.rate, 1);
  } else {
    spentInWindow.set(route.rate, n);
  }
}

export const tokenFor = (route: AnyRoute): string | undefined =>
  route.auth.kind === 'operator' ? tenant.token : route.auth.kind === 'device' ? device.token : undefined;

/** The shape every error answer must have, and nothing of the implementation in it. */
export function expectWellFormed(res: Answer, label: string): void {
  const where = `${label} -> ${res.status} ${res.text.slice(0, 300)}`;
  expect(res.status, where).toBeGreaterThanOrEqual(400);
  expect(res.status, where).toBeLessThan(500);
  expect(res.headers['content-type'], where).toMatch(/^application\/json/);
  expect(res.headers['x-api-version'], where).toBe('1.3.0');
  expect(res.body, where).toBeTypeOf('object');
  expect(res.body, where).not.toBeNull();
  const oauth = res.path.split('?')[0] === FORM_ROUTE;
  const keys = ['code', 'message', 'details', ...(oauth ? ['error', 'error_description'] : [])];
  for (const key of Object.keys(res.body)) expect(keys, where).toContain(key);
  if (oauth && res.status < 429) expect(typeof res.body.error, where).toBe('string');
  expect(Number.isInteger(res.body.code), where).toBe(true);
  expect(Object.keys(STATUS_OF).map(Number), where).toContain(res.body.code);
  expect(STATUS_OF[res.body.code], where).toContain(res.status);
  expect(typeof res.body.message, where).toBe('string');
  expect(res.body.message.length, where).toBeGreaterThan(0);
  if ('details' in res.body) {
    expect(typeof res.body.details, where).toBe('object');
    expect(res.body.details, where).not.toBeNull();
    expect(Array.isArray(res.body.details), where).toBe(false);
  }
  // No leak: no stack frame, no SQLite, no path of the checkout, no dependency; the echo stays small.
  expect(res.text, where).not.toMatch(/SQLITE|\/work|node_modules|node:internal|"stack"|\n\s+at\s/i);
  expect(res.text, where).not.toMatch(/\bat\s+\S+\s+\(\S+:\d+:\d+\)/);
  expect(res.text.length, where).toBeLessThan(4096);
}

export async function check(route: AnyRoute, g: Garbage, authenticated: boolean): Promise<void> {
  const token = authenticated ? tokenFor(route) : undefined;
  const expected = authenticated ? g.expect : unauthenticatedAnswer(route, g);
  spend(route, authenticated);
  const res = await send({
    method: g.method,
    path: g.path,
    ...(token ? { authorization: `Bearer ${token}` } : {}),
    ...(g.body !== undefined ? { body: g.body } : {}),
    ...(g.contentType !== undefined ? { contentType: g.contentType } : {}),
    ...(g.headers ? { headers: g.headers } : {}),
  });
  const label = `${route.method} ${route.url} [${authenticated ? 'auth' : 'no auth'}] ${g.label}`;
  expectWellFormed(res, label);
  expect(
    { label, status: res.status, code: res.body.code },
    `${res.text.slice(0, 300)} for ${g.method} ${g.path.slice(0, 300)}`,
  ).toEqual({ label, status: expected.status, code: expected.code });
  if (expected.fields) expect(expected.fields, label).toContain(res.body.details?.field);
}

/**
 * Without credentials: body parsing and the router answer before the route runs, so their refusals stay; every
 * other request to an authenticated route is refused with 401/2001 before anything of it is looked at.
 */
export function unauthenticatedAnswer(route: AnyRoute, g: Garbage): Expected {
  if (route.auth.kind === 'none' || g.layer === 'transport' || g.layer === 'framework') return g.expect;
  return { status: 401, code: 2001 };
}

export interface Snapshot {
  counts: Record<string, number>;
  devices: unknown[];
  clients: unknown[];
}

export async function snapshot(): Promise<Snapshot> {
  const db = await openStoredData(tp.dataDir);
  try {
    const counts: Record<string, number> = {};
    for (const t of await db.tables()) counts[t] = await db.value(`SELECT COUNT(*) FROM "${t}"`);
    return {
      counts,
      // Secrets and identities must not move either (a rotation keeps the row count).
      devices: await db.all(
        'SELECT device_id, sn, registered, secret_sealed, secret_gen, site_id, firmware_version FROM devices ORDER BY device_id',
      ),
      clients: await db.all('SELECT client_id, secret_sealed, scopes FROM clients ORDER BY client_id'),
    };
  } finally {
    await db.close();
  }
}

export async function expectHealthy(): Promise<void> {
  const res = await send({ method: 'GET', path: '/healthz' });
  expect(res.status).toBe(200);
  expect(res.body).toMatchObject({ status: 'ok' });
  // The credentials used are still good: nothing rotated, revoked or expired them.
  const me = await send({
    method: 'GET',
    path: `/v1/operator/devices/${device.deviceId}`,
    authorization: `Bearer ${tenant.token}`,
  });
  expect(me.status, me.text).toBe(200);
  tp.advance(61_000);
  const hb = await send({
    method: 'POST',
    path: '/v1/device/heartbeat',
    authorization: `Bearer ${device.token}`,
    body: JSON.stringify({ timestamp: new Date().toISOString(), status: 'online', fault_code: 0 }),
    contentType: 'application/json',
  });
  expect(hb.status, hb.text).toBe(200);
}

export function internalErrorsLogged(): string[] {
  return tp.logs.filter((line) => {
    try {
      return (JSON.parse(line) as { level?: number }).level! >= 50;
    } catch {
      return true;
    }
  });
}
