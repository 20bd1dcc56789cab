import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GUARD_LIMITS } from '../../platform/http/rate-limit/rate-limiter.js';
import { RATE_LIMITS, signRequest } from '../../shared/index.js';
import { instancesOverRedis } from '../helpers/instances.js';
import {
  createTenant,
  expectError,
  type HttpClient,
  httpClient,
  registerDevice,
  type TestPlatform,
} from '../helpers/platform.js';
import { rateItem } from '../helpers/rate-limit-headers.js';

/**
 * Three platform instances over one PostgreSQL database and one Redis (DESIGN.md §13) share their limits and
 * credentials: rate limits, failed-credential lock-outs, used request signatures, and revoked or rotated device
 * credentials hold whichever instance a request reaches. PostgreSQL only (`npm run test:postgres`), like
 * several-instances.test.ts.
 */

const cluster = instancesOverRedis('cp-instances-');
let a: TestPlatform;
let b: TestPlatform;
let c: TestPlatform;
let tenant: Awaited<ReturnType<typeof createTenant>>;

beforeAll(async () => {
  await cluster.start();
  a = await cluster.instance('inst-a');
  b = await cluster.instance('inst-b');
  c = await cluster.instance('inst-c');
  tenant = await createTenant(a, 'Instances Alpha');
});

afterAll(async () => {
  for (const p of [a, b, c]) await p?.stop();
  await cluster.stop();
});

describe('several instances, one database, one Redis', () => {
  it("shares rate limits: a client's query over the limit is refused whichever instance it reaches", async () => {
    const own = await createTenant(a, 'Instances Limits');
    const { limit } = RATE_LIMITS.operatorQuery;
    const instances = [a, b, c];
    for (let i = 0; i < limit; i++) {
      const res = await instances[i % 3]!.http.get('/v1/operator/devices', { token: own.token });
      expect(res.status).toBe(200);
      expect(res.headers.ratelimit).toMatch(new RegExp(`r=${limit - i - 1};`));
    }
    for (const p of instances)
      expectError(await p.http.get('/v1/operator/devices', { token: own.token }), 429, 5001);
  });

  it('counts failed credentials on every instance: a lock-out on one holds on all, for that address only', async () => {
    const own = await createTenant(a, 'Instances Lockout');
    const dev = await registerDevice(a, 'MI-LOCK-1', own.siteId);
    const instances = [a, b, c];
    const fromElsewhere = instances.map((p) => httpClient(p.url, p.ca, { localAddress: '127.0.0.2' }));
    const opToken = (http: HttpClient, secret: string) =>
      http.post('/v1/operator/oauth/token', {
        json: { client_id: own.clientId, client_secret: secret, grant_type: 'client_credentials' },
      });
    const devToken = (http: HttpClient, secret: string) =>
      http.post('/v1/device/token', {
        json: { device_id: dev.deviceId, device_secret: secret, grant_type: 'client_credentials' },
      });
    try {
      for (const [rateClass, ask, secret] of [
        ['operatorTokenFailures', opToken, own.clientSecret],
        ['deviceTokenFailures', devToken, dev.secret],
      ] as const) {
        const { limit } = GUARD_LIMITS[rateClass];
        for (let i = 0; i < limit; i++) {
          const wrong = await ask(instances[i % 3]!.http, `wrong-${i}`);
          expectError(wrong, 401, 2001);
          expect(rateItem(wrong, 'ratelimit', rateClass)).toMatch(new RegExp(`;r=${limit - 1 - i};`));
        }
        for (const p of instances) {
          const locked = await ask(p.http, secret);
          expectError(locked, 429, 5001);
          expect(rateItem(locked, 'ratelimit', rateClass)).toMatch(/;r=0;/);
        }
        for (const http of fromElsewhere) expect((await ask(http, secret)).status).toBe(200);
      }
      // The address budget is shared too: 127.0.0.2 spent one per token above, whichever instance answered.
      const last = await devToken(fromElsewhere[0]!, dev.secret);
      const { limit } = GUARD_LIMITS.unauthenticated;
      expect(rateItem(last, 'ratelimit', 'unauthenticated')).toMatch(new RegExp(`;r=${limit - 7};`));
    } finally {
      for (const http of fromElsewhere) await http.close();
    }
  });

  it('refuses on another instance a signature already used on one', async () => {
    const dev = await registerDevice(a, 'MI-SIGN-1', tenant.siteId);
    const body = JSON.stringify({
      timestamp: new Date(Date.now() - 2_000).toISOString(),
      connector_id: 1,
      state: 'charging',
      power: 7,
    });
    const stamp = Math.floor(Date.now() / 1000);
    const headers = {
      'x-timestamp': String(stamp),
      'x-signature': signRequest(dev.secret, 'POST', '/v1/device/telemetry', stamp, body),
    };
    const send = (p: TestPlatform) =>
      p.http.post('/v1/device/telemetry', {
        token: dev.token,
        headers,
        raw: body,
        contentType: 'application/json',
      });
    expect((await send(a)).status).toBe(200);
    const replayed = expectError(await send(b), 401, 2001);
    expect(replayed.message).toMatch(/replayed/);
    expectError(await send(c), 401, 2001);
  });

  it('a reset or a secret rotation on one instance revokes the old credentials on all of them', async () => {
    const heartbeat = (p: TestPlatform, token: string) =>
      p.http.post('/v1/device/heartbeat', {
        token,
        json: { timestamp: new Date().toISOString(), status: 'online', fault_code: 0 },
      });
    const refusedEverywhere = async (token: string) => {
      const deadline = Date.now() + 5_000;
      for (const p of [a, b, c]) {
        for (;;) {
          const res = await heartbeat(p, token);
          if (res.status === 401) break;
          expect(Date.now(), 'the revocation never reached every instance').toBeLessThan(deadline);
          if (res.status === 429) {
            // The device's shared 10/s budget, spent by the steps just before on a fast machine: wait it out.
            await new Promise((r) => setTimeout(r, 1000 * (res.body.details?.retry_after_seconds ?? 1)));
            continue;
          }
          expect(res.status, res.text).toBe(200);
          await new Promise((r) => setTimeout(r, 250)); // under the shared 10/s limit
        }
      }
    };
    // Each instance has admitted the token once, so each holds the device in its directory.
    const reset = await registerDevice(a, 'MI-RESET-1', tenant.siteId);
    for (const p of [a, b, c]) expect((await heartbeat(p, reset.token)).status).toBe(200);
    expect(await a.store.resetDevice(reset.deviceId)).toBe(true);
    await refusedEverywhere(reset.token);

    const rotated = await registerDevice(a, 'MI-ROTATE-1', tenant.siteId);
    for (const p of [a, b, c]) expect((await heartbeat(p, rotated.token)).status).toBe(200);
    const rotation = await b.http.post('/v1/device/secret/rotate', { token: rotated.token, json: {} });
    expect(rotation.status, rotation.text).toBe(200);
    // Two-phase (DESIGN.md §17): the old token works everywhere until the new secret is used, and another
    // instance answers a repeated rotation with the same pending secret.
    for (const p of [a, b, c]) expect((await heartbeat(p, rotated.token)).status).toBe(200);
    const again = await a.http.post('/v1/device/secret/rotate', { token: rotated.token, json: {} });
    expect(again.status, again.text).toBe(200);
    expect(again.body.data.device_secret).toBe(rotation.body.data.device_secret);
    // The new secret works at once on another instance, and its token on a third.
    const renewed = await c.http.post('/v1/device/token', {
      json: {
        device_id: rotated.deviceId,
        device_secret: rotation.body.data.device_secret,
        grant_type: 'client_credentials',
      },
    });
    expect(renewed.status, renewed.text).toBe(200);
    expect((await heartbeat(a, renewed.body.data.access_token)).status).toBe(200);
    // Once the new secret is in use, the old token is refused on every instance.
    await refusedEverywhere(rotated.token);
  });
});
