import { afterAll, beforeAll, beforeEach, expect } from 'vitest';
import {
  createTenant,
  expectError,
  type HttpResult,
  operatorToken,
  type RegisteredDevice,
  registerDevice,
  startTestPlatform,
  type TestPlatform,
} from './platform.js';
import { createClientOf } from './sealed-writes.js';

/**
 * The set-up and checks of the error-envelope tests (spec "Errors", DESIGN.md §4; errors, errors-requests,
 * errors-responses): every error body is an ErrorResponse, every response carries X-API-Version, and nothing
 * internal (stack traces, SQL, file paths) reaches a client.
 */

export type Caller = {
  operatorId: string;
  siteId: string;
  clientId: string;
  clientSecret: string;
  token: string;
};

/** A platform and the operator (with a site) whose callers the tests make. */
export async function startErrorsPlatform(): Promise<{
  tp: TestPlatform;
  operator: { operatorId: string; siteId: string };
}> {
  const tp = await startTestPlatform();
  const t = await createTenant(tp, 'errors');
  return { tp, operator: { operatorId: t.operatorId, siteId: t.siteId } };
}

/** A fresh API client and a fresh charger (serial `sn`) for every test, so that no test spends another's rate budget. */
export async function freshCaller(
  tp: TestPlatform,
  operator: { operatorId: string; siteId: string },
  sn: string,
): Promise<{ tenant: Caller; device: RegisteredDevice }> {
  const { client, secret } = await createClientOf(tp, {
    operator_ids: [operator.operatorId],
    scopes: ['read', 'write'],
  });
  const token = await operatorToken(tp.http, client.client_id, secret);
  const tenant = { ...operator, clientId: client.client_id, clientSecret: secret, token };
  return { tenant, device: await registerDevice(tp, sn, operator.siteId) };
}

/** What each test of an errors file gets: one platform per file, a fresh caller and charger per test. */
export interface ErrorsContext {
  readonly tp: TestPlatform;
  readonly operator: { operatorId: string; siteId: string };
  /** A fresh API client and a fresh charger for every test, so that no test spends another's rate budget. */
  readonly tenant: Caller;
  readonly device: RegisteredDevice;
  readonly deviceSn: string;
  /** A new serial, unique in the run. */
  sn(): string;
}

/** Starts the errors files' platform for the file, and a fresh caller for each of its tests. */
export function errorsPlatformPerFile(): ErrorsContext {
  let platform: Awaited<ReturnType<typeof startErrorsPlatform>> | undefined;
  let caller: { tenant: Caller; device: RegisteredDevice; deviceSn: string } | undefined;
  let serial = 0;
  const sn = () => `SN-E-${process.pid}-${++serial}`;
  beforeAll(async () => {
    platform = await startErrorsPlatform();
  });
  afterAll(async () => {
    await platform?.tp.stop();
  });
  beforeEach(async () => {
    const { tp, operator } = started();
    const deviceSn = sn();
    caller = { ...(await freshCaller(tp, operator, deviceSn)), deviceSn };
  });
  const started = () => {
    if (!platform) throw new Error('the errors platform exists only inside a test');
    return platform;
  };
  const current = () => {
    if (!caller) throw new Error('the caller exists only inside a test');
    return caller;
  };
  return {
    get tp() {
      return started().tp;
    },
    get operator() {
      return started().operator;
    },
    get tenant() {
      return current().tenant;
    },
    get device() {
      return current().device;
    },
    get deviceSn() {
      return current().deviceSn;
    },
    sn,
  };
}

/** Only `code`, `message` and optionally `details` (an object): no `error`, `statusCode`, `stack`. */
/** `oauth`: the operator token endpoint's refusals also carry RFC 6749's `error` (DESIGN.md §15). */
export function expectEnvelope(res: HttpResult, oauth?: string): void {
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
export function expectNoLeak(res: HttpResult): void {
  const text = res.text;
  expect(text).not.toMatch(/SQLITE/i);
  expect(text).not.toMatch(/\bat\s+\S+\s+\(/); // "at fn (file:line)"
  expect(text).not.toMatch(/\.(?:ts|js|cjs|mjs):\d+/);
  expect(text).not.toMatch(/\/(?:work|tmp|home|root|usr|app|srv|opt)\//);
  expect(text).not.toMatch(/node_modules|node:internal|file:\/\//);
  expect(text).not.toMatch(/\b(?:SELECT|INSERT|UPDATE|DELETE FROM)\b/);
  expect(text).not.toMatch(/"stack"|TypeError|SyntaxError|FST_ERR/);
}

export function expectApiError(res: HttpResult, status: number, code: number, oauth?: string) {
  const body = expectError(res, status, code);
  expectEnvelope(res, oauth);
  expectNoLeak(res);
  expect(res.headers['x-api-version']).toBe('1.3.0');
  return body;
}
