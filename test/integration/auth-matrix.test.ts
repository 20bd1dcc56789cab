import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AnyRoute } from '../../platform/http/route-spec.js';
import { AuthMatrix, type Client, type Tenant } from '../helpers/auth-matrix.js';
import { bodyOf, expectRefusal, type Ids, key, queryOf, scopeOf } from '../helpers/auth-matrix-requests.js';
import type { RegisteredDevice, TestPlatform } from '../helpers/platform.js';

/**
 * Authentication as a matrix over the route table (`platform.routes`: a new endpoint joins every column without
 * touching this file) × every kind of wrong credential, each answered with exactly the documented refusal
 * (DESIGN.md §2, §4, §8; docs/api.md), and every endpoint passing with the right credentials. The platform
 * logs at debug level throughout, and no token, secret or signature used here may appear in what it logged.
 * Tenancy (another tenant's resources answer byte for byte like missing ones) is in auth-tenancy.test.ts,
 * tampered, look-alike and expired tokens and signatures in auth-tokens.test.ts; each checks its own logs the
 * same way. The world and
 * the requests are in test/helpers/auth-matrix.ts and auth-matrix-requests.ts.
 */

const matrix = new AuthMatrix();
const {
  secrets,
  keep,
  keepToken,
  newClient,
  newDevice,
  resourcesOf,
  call,
  authed,
  operatorRoutes,
  deviceRoutes,
} = matrix;
const { upgrade } = matrix;
let tp: TestPlatform;
let routes: readonly AnyRoute[];
let alpha: Tenant;
let bravo: Tenant;
let readOnly: Client;
let writeOnly: Client;
let devA: RegisteredDevice;
let own: Ids;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

beforeAll(async () => {
  ({ tp, routes, alpha, bravo, readOnly, writeOnly, devA, own } = await matrix.start());
});
afterAll(async () => {
  await tp?.stop();
});

describe('the route table', () => {
  it('every authenticated endpoint has a valid request here', () => {
    expect(routes.length).toBeGreaterThanOrEqual(30);
    for (const route of authed()) {
      expect(bodyOf(route, own), `${key(route)}: add a valid body`).not.toBe('missing');
      if (route.body && bodyOf(route, own) !== undefined) {
        expect(route.body.safeParse(bodyOf(route, own)).success, key(route)).toBe(true);
      }
    }
  });
});

describe('credential matrix: every endpoint × every wrong credential gets exactly the documented refusal', () => {
  it('no Authorization header: 401/2001', async () => {
    for (const route of authed()) expectRefusal(await call(route, undefined), 401, 2001, key(route));
  });

  it('malformed Authorization headers: 401/2001', async () => {
    const basic = `Basic ${Buffer.from(`${alpha.clientId}:${alpha.clientSecret}`).toString('base64')}`;
    keep(basic.slice(6));
    const valid = (r: AnyRoute) => (r.auth.kind === 'device' ? devA.token : alpha.token);
    const malformed: Array<(r: AnyRoute) => string> = [
      () => 'Bearer',
      () => 'Bearer ',
      () => 'Bearer x',
      () => 'Bearer op',
      () => 'Bearer op..',
      () => 'Bearer ..',
      () => 'Bearer op.e30.',
      () => 'Bearer dv.e30.AAAA',
      () => `Bearer ${'A'.repeat(5_000)}`,
      () => basic, // client credentials are for the token endpoint only
      (r) => valid(r), // no scheme
      (r) => `Token ${valid(r)}`,
      (r) => `Bearer ${valid(r)} extra`,
      (r) => `Bearer ${valid(r)}.${valid(r)}`,
      (r) => `Bearer ${valid(r).split('.').reverse().join('.')}`,
    ];
    for (const route of authed()) {
      for (const [i, header] of malformed.entries()) {
        expectRefusal(await call(route, header(route)), 401, 2001, `${key(route)} malformed #${i}`);
      }
    }
  });

  it('a device token on operator endpoints and an operator token on device endpoints: 401/2001', async () => {
    for (const route of operatorRoutes())
      expectRefusal(
        await call(route, `Bearer ${devA.token}`),
        401,
        2001,
        `${key(route)} with a device token`,
      );
    for (const route of deviceRoutes()) {
      for (const token of [alpha.token, readOnly.token, writeOnly.token])
        expectRefusal(
          await call(route, `Bearer ${token}`),
          401,
          2001,
          `${key(route)} with an operator token`,
        );
    }
  });

  it('a read-only token on write endpoints and a write-only token on read endpoints: 403/2003', async () => {
    let write = 0;
    let read = 0;
    for (const route of operatorRoutes()) {
      if (scopeOf(route) === 'write') {
        write++;
        expectRefusal(await call(route, `Bearer ${readOnly.token}`), 403, 2003, `${key(route)} read-only`);
      } else {
        read++;
        expectRefusal(await call(route, `Bearer ${writeOnly.token}`), 403, 2003, `${key(route)} write-only`);
      }
    }
    expect(write).toBeGreaterThanOrEqual(8);
    expect(read).toBeGreaterThanOrEqual(9);
    // A token asked for with a narrower scope is refused the same way, even for a client granted both.
    const res = await tp.http.post('/v1/operator/oauth/token', {
      json: {
        client_id: alpha.clientId,
        client_secret: alpha.clientSecret,
        grant_type: 'client_credentials',
        scope: 'read',
      },
    });
    expect(res.status, res.text).toBe(200);
    keepToken(res.body.access_token);
    for (const route of operatorRoutes().filter((r) => scopeOf(r) === 'write')) {
      expectRefusal(
        await call(route, `Bearer ${res.body.access_token}`),
        403,
        2003,
        `${key(route)} scope=read`,
      );
    }
  });

  it('a device token after its secret was rotated and the new one used: 401/2001 on every device endpoint, the old secret too', async () => {
    const d = await newDevice(alpha, 'ROT');
    const rotated = await tp.http.post('/v1/device/secret/rotate', { token: d.token });
    expect(rotated.status, rotated.text).toBe(200);
    const newSecret: string = rotated.body.data.device_secret;
    keep(newSecret);
    // Two-phase (DESIGN.md §17): the old token still passes until the new secret has been used.
    const heartbeat = deviceRoutes().find((r) => r.url === '/v1/device/heartbeat')!;
    const during = await call(heartbeat, `Bearer ${d.token}`);
    expect(during.status, during.text).toBe(200);
    // The new secret works, and the token it gives passes authentication everywhere.
    const fresh = await tp.http.post('/v1/device/token', {
      json: { device_id: d.deviceId, device_secret: newSecret, grant_type: 'client_credentials' },
    });
    expect(fresh.status, fresh.text).toBe(200);
    keepToken(fresh.body.data.access_token);
    for (const route of deviceRoutes())
      expectRefusal(await call(route, `Bearer ${d.token}`), 401, 2001, `${key(route)} after rotation`);
    const old = await tp.http.post('/v1/device/token', {
      json: { device_id: d.deviceId, device_secret: d.secret, grant_type: 'client_credentials' },
    });
    expectRefusal(old, 401, 2001, 'device token with the rotated-away secret');
    const hb = await tp.http.post('/v1/device/heartbeat', {
      token: fresh.body.data.access_token,
      json: bodyOf(deviceRoutes().find((r) => r.url === '/v1/device/heartbeat')!, own),
    });
    expect(hb.status, hb.text).toBe(200);
  });

  it('a device token after the device was reset: 401/2001 within about a second, the old secret too', async () => {
    const d = await newDevice(alpha, 'RESET');
    expect(await tp.store.resetDevice(d.deviceId)).toBe(true);
    const heartbeat = deviceRoutes().find((r) => r.url === '/v1/device/heartbeat')!;
    const deadline = Date.now() + 3_000;
    for (;;) {
      const res = await call(heartbeat, `Bearer ${d.token}`);
      if (res.status === 401) break;
      expect(res.status, res.text).toBe(200);
      expect(Date.now(), 'the reset never reached the running platform').toBeLessThan(deadline);
      await sleep(150);
    }
    for (const route of deviceRoutes())
      expectRefusal(await call(route, `Bearer ${d.token}`), 401, 2001, `${key(route)} after reset`);
    const old = await tp.http.post('/v1/device/token', {
      json: { device_id: d.deviceId, device_secret: d.secret, grant_type: 'client_credentials' },
    });
    expectRefusal(old, 401, 2001, 'device token with the secret of a reset device');
    // Documented: after a reset the charger registers again, keeps its device_id and gets a new secret.
    const again = await tp.http.post('/v1/device/register', {
      json: {
        sn: (await tp.store.getDevice(d.deviceId))!.sn,
        model: 'M',
        manufacturer: 'A',
        firmware_version: '1',
      },
    });
    expect(again.status, again.text).toBe(200);
    expect(again.body.data.device_id).toBe(d.deviceId);
    keep(again.body.data.device_secret);
    expectRefusal(await call(heartbeat, `Bearer ${d.token}`), 401, 2001, 'old token after re-registration');
  });

  it('the stream refuses the same credentials at the upgrade', async () => {
    const cases: Array<[string, Record<string, string>, string, number, number]> = [
      ['no token', {}, '', 401, 2001],
      ['malformed', { authorization: 'Bearer op..' }, '', 401, 2001],
      ['device token', { authorization: `Bearer ${devA.token}` }, '', 401, 2001],
      ['device token in the query', {}, `?access_token=${encodeURIComponent(devA.token)}`, 401, 2001],
      ['write-only token', { authorization: `Bearer ${writeOnly.token}` }, '', 403, 2003],
      [
        'write-only token in the query',
        {},
        `?access_token=${encodeURIComponent(writeOnly.token)}`,
        403,
        2003,
      ],
      [
        'Basic credentials',
        {
          authorization: `Basic ${Buffer.from(`${alpha.clientId}:${alpha.clientSecret}`).toString('base64')}`,
        },
        '',
        401,
        2001,
      ],
    ];
    for (const [label, headers, query, status, code] of cases) {
      const res = await upgrade(headers, query);
      expect({ label, status: res.status, code: res.body?.code }).toEqual({ label, status, code });
    }
    // The right token passes (and its access_token query form is redacted from the logs, checked below).
    expect((await upgrade({}, `?access_token=${encodeURIComponent(alpha.token)}`)).status).toBe(101);
  });

  it('another tenant’s token on list endpoints sees none of this tenant’s data', async () => {
    const b = await newClient(bravo, ['read']);
    for (const route of operatorRoutes().filter((r) => r.method === 'GET' && !r.url.includes(':'))) {
      if (queryOf(route, own)) continue; // these name an id: compared with missing ids below
      const res = await tp.http.get(route.url, { token: b.token });
      expect(res.status, `${key(route)} ${res.text}`).toBe(200);
      for (const id of [
        own.device_id,
        own.site_id,
        own.operator_id,
        own.command_id,
        own.control_id,
        own.webhook_id,
        own.delivery_id,
        own.artifact_id,
        own.update_id,
      ]) {
        expect(res.text, `${key(route)} leaks ${id}`).not.toContain(id);
      }
    }
  });
});

describe('positive control and logs', () => {
  it('every endpoint with the right credentials passes authentication', async () => {
    const a = await newClient(alpha, ['read', 'write']);
    const d = await newDevice(alpha, 'POS');
    const ids: Ids = { ...(await resourcesOf(alpha, d)) };
    for (const route of routes) {
      if (route.auth.kind === 'none') continue;
      const token = route.auth.kind === 'device' ? d.token : a.token;
      const res = await call(route, `Bearer ${token}`, ids);
      if (route.url === '/v1/device/secret/rotate') keep(res.body?.data?.device_secret);
      expect([401, 403, 429, 500], `${key(route)} ${res.status} ${res.text}`).not.toContain(res.status);
    }
  });

  it('no token, secret, MAC or signature used in this file appears in the debug logs', () => {
    expect(tp.logs.length).toBeGreaterThan(500);
    expect(tp.logs.some((l) => l.includes('[redacted]'))).toBe(true);
    expect(secrets.size).toBeGreaterThan(40);
    const text = tp.logs.join('\n');
    const found = [...secrets].filter((s) => s.length >= 16 && text.includes(s));
    expect(found).toEqual([]);
    // Nor a header that carries them.
    expect(text).not.toMatch(/authorization|x-signature|bearer /i);
  });
});
