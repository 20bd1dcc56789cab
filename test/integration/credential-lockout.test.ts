import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { GUARD_LIMITS } from '../../platform/http/rate-limit/rate-limiter.js';
import {
  createTenant,
  expectError,
  type HttpClient,
  type HttpResult,
  httpClient,
  registerDevice,
  startTestPlatform,
  type TestPlatform,
} from '../helpers/platform.js';
import { rateItem } from '../helpers/rate-limit-headers.js';

/**
 * Nobody can lock someone else out (DESIGN.md §18): failed token and registration attempts count per claimed id
 * *and* source address, and one budget per address guards the unauthenticated routes. Real HTTPS on loopback:
 * `tp.http` connects from 127.0.0.1, `other` from 127.0.0.2, standing for another client. The fake clock ends
 * the windows.
 */

let tp: TestPlatform;
let other: HttpClient;

beforeAll(async () => {
  tp = await startTestPlatform();
  other = httpClient(tp.url, tp.ca, { localAddress: '127.0.0.2' });
});
afterAll(async () => {
  await other.close();
  await tp.stop();
});
// Fresh windows for every test: the address budget of 127.0.0.1 is shared by all of them.
beforeEach(() => {
  tp.advance(61_000);
});

/** A 429/5001 of `rateClass` with Retry-After and its RateLimit items. */
function expectLockedOut(res: HttpResult, rateClass: string): number {
  const body = expectError(res, 429, 5001);
  const { limit, windowSeconds } = GUARD_LIMITS[rateClass as keyof typeof GUARD_LIMITS];
  const retry = body.details?.retry_after_seconds as number;
  expect(retry).toBeGreaterThanOrEqual(1);
  expect(retry).toBeLessThanOrEqual(windowSeconds);
  expect(res.headers['retry-after']).toBe(String(retry));
  expect(rateItem(res, 'ratelimit-policy', rateClass)).toBe(`"${rateClass}";q=${limit};w=${windowSeconds}`);
  expect(rateItem(res, 'ratelimit', rateClass)).toBe(`"${rateClass}";r=0;t=${retry}`);
  return retry;
}

const operatorToken = (http: HttpClient, clientId: string, secret: string) =>
  http.post('/v1/operator/oauth/token', {
    json: { client_id: clientId, client_secret: secret, grant_type: 'client_credentials' },
  });
const deviceToken = (http: HttpClient, deviceId: string, secret: string) =>
  http.post('/v1/device/token', {
    json: { device_id: deviceId, device_secret: secret, grant_type: 'client_credentials' },
  });
const register = (http: HttpClient, sn: string) =>
  http.post('/v1/device/register', {
    json: { sn, model: 'Test AC', manufacturer: 'Acme', firmware_version: '1.0.0' },
  });

describe('failed credentials lock out their address for that id, never the id everywhere', () => {
  it('operator tokens: wrong secrets from 127.0.0.1 lock 127.0.0.1 out; 127.0.0.2 still gets a token', async () => {
    const t = await createTenant(tp, 'Lockout Operator');
    const { limit } = GUARD_LIMITS.operatorTokenFailures;
    for (let i = 0; i < limit; i++) {
      const wrong = await operatorToken(tp.http, t.clientId, `wrong-${i}`);
      expectError(wrong, 401, 2001);
      expect(rateItem(wrong, 'ratelimit', 'operatorTokenFailures')).toMatch(
        new RegExp(`^"operatorTokenFailures";r=${limit - 1 - i};t=\\d+$`),
      );
    }
    // Locked out here, even with the right secret, however it is presented.
    expectLockedOut(await operatorToken(tp.http, t.clientId, t.clientSecret), 'operatorTokenFailures');
    const basic = Buffer.from(`${t.clientId}:${t.clientSecret}`).toString('base64');
    const viaBasic = await tp.http.post('/v1/operator/oauth/token', {
      raw: 'grant_type=client_credentials',
      contentType: 'application/x-www-form-urlencoded',
      headers: { authorization: `Basic ${basic}` },
    });
    expectLockedOut(viaBasic, 'operatorTokenFailures');

    // Another address: the right secret gets a token that works; its own failures start from zero.
    const elsewhere = await operatorToken(other, t.clientId, t.clientSecret);
    expect(elsewhere.status).toBe(200);
    expect(elsewhere.body.token_type).toBe('Bearer');
    expect((await other.get('/v1/operator/sites', { token: elsewhere.body.access_token })).status).toBe(200);
    const wrongThere = await operatorToken(other, t.clientId, 'wrong-there');
    expectError(wrongThere, 401, 2001);
    expect(rateItem(wrongThere, 'ratelimit', 'operatorTokenFailures')).toMatch(/r=9;/);

    // Guesses at a client_id that does not exist lock only that id at this address.
    for (let i = 0; i < limit; i++)
      expectError(await operatorToken(tp.http, 'cli_guess', `g-${i}`), 401, 2001);
    expectLockedOut(await operatorToken(tp.http, 'cli_guess', 'g'), 'operatorTokenFailures');
    const bystander = await createTenant(tp, 'Lockout Bystander');
    expect((await operatorToken(tp.http, bystander.clientId, bystander.clientSecret)).status).toBe(200);

    // The lock-out ends with its window.
    tp.advance(60_000);
    const again = await operatorToken(tp.http, t.clientId, t.clientSecret);
    expect(again.status).toBe(200);
  });

  it('charger tokens: wrong secrets from 127.0.0.1 lock 127.0.0.1 out; 127.0.0.2 still gets a token', async () => {
    const dev = await registerDevice(tp, 'LO-DEV-1', undefined);
    const { limit } = GUARD_LIMITS.deviceTokenFailures;
    for (let i = 0; i < limit; i++) {
      const wrong = await deviceToken(tp.http, dev.deviceId, `wrong-${i}`);
      expectError(wrong, 401, 2001);
      expect(rateItem(wrong, 'ratelimit', 'deviceTokenFailures')).toMatch(
        new RegExp(`^"deviceTokenFailures";r=${limit - 1 - i};t=\\d+$`),
      );
    }
    expectLockedOut(await deviceToken(tp.http, dev.deviceId, dev.secret), 'deviceTokenFailures');

    const elsewhere = await deviceToken(other, dev.deviceId, dev.secret);
    expect(elsewhere.status).toBe(200);
    const heartbeat = await other.post('/v1/device/heartbeat', {
      token: elsewhere.body.data.access_token,
      json: { timestamp: new Date(tp.now()).toISOString(), status: 'online', fault_code: 0 },
    });
    expect(heartbeat.status).toBe(200);

    // Still locked out just before the window ends, free after it.
    tp.advance(58_000);
    expectLockedOut(await deviceToken(tp.http, dev.deviceId, dev.secret), 'deviceTokenFailures');
    tp.advance(2_000);
    expect((await deviceToken(tp.http, dev.deviceId, dev.secret)).status).toBe(200);
  });

  it('charger tokens per device: 60 a minute, spent only by the right secret', async () => {
    const dev = await registerDevice(tp, 'LO-DEV-2', undefined); // spent one
    tp.advance(61_000);
    for (let i = 0; i < 60; i++) {
      const ok = await deviceToken(tp.http, dev.deviceId, dev.secret);
      expect(ok.status).toBe(200);
      expect(rateItem(ok, 'ratelimit', 'deviceReporting')).toMatch(new RegExp(`;r=${59 - i};`));
      if (i % 10 === 0) expectError(await deviceToken(other, dev.deviceId, 'wrong'), 401, 2001);
    }
    // Spent: refused before the secret is even looked at, from any address; the window ends it.
    const spent = expectError(await deviceToken(other, dev.deviceId, dev.secret), 429, 5001);
    expect(spent.details.retry_after_seconds).toBeGreaterThanOrEqual(1);
    expectError(await deviceToken(tp.http, dev.deviceId, dev.secret), 429, 5001);
    tp.advance(60_000);
    expect((await deviceToken(tp.http, dev.deviceId, dev.secret)).status).toBe(200);
  });

  it('registration: refusals from 127.0.0.1 lock 127.0.0.1 out for that serial only', async () => {
    const first = await register(tp.http, 'LO-REG-1');
    expect(first.status).toBe(200);
    const { limit } = GUARD_LIMITS.registerFailures;
    for (let i = 0; i < limit; i++) expectError(await register(tp.http, 'LO-REG-1'), 409, 4001);
    expectLockedOut(await register(tp.http, 'LO-REG-1'), 'registerFailures');
    // The same address registers another serial; another address gets the real answer for this one.
    expect((await register(tp.http, 'LO-REG-2')).status).toBe(200);
    expectError(await register(other, 'LO-REG-1'), 409, 4001);
    // Reset by its operator, the charger registers again from its own address.
    expect(await tp.store.resetDevice(first.body.data.device_id)).toBe(true);
    expect((await register(other, 'LO-REG-1')).status).toBe(200);

    tp.advance(60_000);
    expectError(await register(tp.http, 'LO-REG-1'), 409, 4001);
  });
});

describe('one budget per address over the unauthenticated routes', () => {
  it('refuses a flood from 127.0.0.1 on every unauthenticated route, not 127.0.0.2 nor authenticated calls', async () => {
    const t = await createTenant(tp, 'Flood Tenant');
    const dev = await registerDevice(tp, 'LO-FLOOD-1', t.siteId);
    tp.advance(61_000);
    const { limit, windowSeconds } = GUARD_LIMITS.unauthenticated;

    // Anything counts, bad bodies too: the budget is spent before the body is read.
    let spent = 0;
    while (spent < limit) {
      const batch = Math.min(25, limit - spent);
      const answers = await Promise.all(
        Array.from({ length: batch }, () => tp.http.post('/v1/device/token', { json: {} })),
      );
      for (const res of answers) expectError(res, 400, 1001);
      spent += batch;
    }
    const last = await tp.http.post('/v1/device/register', { json: {} });
    const retry = expectLockedOut(last, 'unauthenticated');
    expect(retry).toBeLessThanOrEqual(windowSeconds);
    expectLockedOut(await deviceToken(tp.http, dev.deviceId, dev.secret), 'unauthenticated');
    expectLockedOut(await operatorToken(tp.http, t.clientId, t.clientSecret), 'unauthenticated');
    expectLockedOut(await register(tp.http, 'LO-FLOOD-2'), 'unauthenticated');

    // Authenticated routes and the probes answer as ever from the same address.
    const hb = await tp.http.post('/v1/device/heartbeat', {
      token: dev.token,
      json: { timestamp: new Date(tp.now()).toISOString(), status: 'online', fault_code: 0 },
    });
    expect(hb.status).toBe(200);
    expect((await tp.http.get('/v1/operator/sites', { token: t.token })).status).toBe(200);
    expect((await tp.http.get('/healthz')).status).toBe(200);
    expect((await tp.http.get('/readyz')).status).toBe(200);

    // Another address is unaffected, its budget whole.
    const elsewhere = await deviceToken(other, dev.deviceId, dev.secret);
    expect(elsewhere.status).toBe(200);
    expect(rateItem(elsewhere, 'ratelimit', 'unauthenticated')).toMatch(
      new RegExp(`^"unauthenticated";r=${limit - 1};t=\\d+$`),
    );
    expect((await register(other, 'LO-FLOOD-3')).status).toBe(200);

    tp.advance(windowSeconds * 1000);
    const after = await deviceToken(tp.http, dev.deviceId, dev.secret);
    expect(after.status).toBe(200);
    expect(rateItem(after, 'ratelimit-policy', 'unauthenticated')).toBe(
      `"unauthenticated";q=${limit};w=${windowSeconds}`,
    );
  });
});
