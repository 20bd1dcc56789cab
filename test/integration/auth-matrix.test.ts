import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import type { AnyRoute } from '../../platform/http/route-spec.js';
import { signRequest } from '../../shared/index.js';
import {
  createTenant,
  type HttpResult,
  operatorToken,
  type RegisteredDevice,
  registerDevice,
  startTestPlatform,
  type TestPlatform,
} from '../helpers/platform.js';
import { createClientOf } from '../helpers/sealed-writes.js';
import { streamUpgrade } from '../helpers/stream-upgrade.js';

/**
 * Authentication and tenancy, as a matrix over the route table (`platform.routes`: a new endpoint joins every
 * column without touching this file) × every kind of wrong credential, each answered with exactly the documented
 * refusal (DESIGN.md §2, §4, §8; docs/api.md). Another tenant's resources answer byte for byte like missing
 * ones. Tokens and request signatures are tampered with character by character. The platform logs at debug
 * level throughout, and no token, secret or signature used here may appear in what it logged.
 */

// biome-ignore lint/suspicious/noExplicitAny: response bodies are inspected field by field
type Json = any;
type Tenant = Awaited<ReturnType<typeof createTenant>>;

let tp: TestPlatform;
const upgrade = (headers: Record<string, string>, query: string) => streamUpgrade(tp, headers, query);
let routes: readonly AnyRoute[];
let alpha: Tenant;
let bravo: Tenant;
let readOnly: { clientId: string; secret: string; token: string };
let writeOnly: { clientId: string; secret: string; token: string };
let devA: RegisteredDevice;
let devB: RegisteredDevice;
/** Alpha's and Bravo's resources of every kind an endpoint can name. */
let own: Ids;
let foreign: Ids;
/** Bravo's resources, made by an aggregator's client of Alpha and Bravo (DESIGN.md §18). */
let aggregated: Ids;
/** Everything secret that went over the wire; none of it may be logged. */
const secrets = new Set<string>();

interface Ids {
  device_id: string;
  site_id: string;
  operator_id: string;
  command_id: string;
  control_id: string;
  schedule_id: string;
  /** A command of the device (for the charger's status report). */
  device_command_id: string;
  webhook_id: string;
  delivery_id: string;
  artifact_id: string;
  update_id: string;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
/** How far the fake clock was moved (the signatures' timestamps follow the platform's clock). */
let advanced = 0;
const iso = (ms: number) => new Date(ms).toISOString();
let serial = 0;
const sn = (tag: string) => `SN-AUTH-${tag}-${process.pid}-${++serial}`;

function keep(...values: Array<string | undefined>): void {
  for (const v of values) if (v) secrets.add(v);
}
function keepToken(token: string): void {
  keep(token, token.slice(token.lastIndexOf('.') + 1));
}

async function newClient(tenant: Tenant, scopes: Array<'read' | 'write'>) {
  const { client, secret } = await createClientOf(tp, { operator_ids: [tenant.operatorId], scopes });
  const token = await operatorToken(tp.http, client.client_id, secret);
  keep(secret);
  keepToken(token);
  return { clientId: client.client_id, secret, token };
}

async function newDevice(tenant: Tenant, tag: string): Promise<RegisteredDevice> {
  const d = await registerDevice(tp, sn(tag), tenant.siteId);
  keep(d.secret);
  keepToken(d.token);
  return d;
}

/**
 * A stop command, a flexibility control and a schedule of the tenant's device (the client spends little), sent
 * by a client of the tenant or by `by`, an aggregator's client that holds other operators too.
 */
async function resourcesOf(tenant: Tenant, device: RegisteredDevice, by?: { token: string }): Promise<Ids> {
  const c = by ?? (await newClient(tenant, ['read', 'write']));
  const stop = await tp.http.post(`/v1/operator/devices/${device.deviceId}/connectors/1/stop`, {
    token: c.token,
    json: {},
  });
  expect(stop.status, stop.text).toBe(200);
  const control = await tp.http.post('/v1/operator/control/flexibility', {
    token: c.token,
    json: {
      target_type: 'site',
      target_ids: [tenant.siteId],
      command: 'pause_charging',
      params: { duration: 7 * 86_400 },
    },
  });
  expect(control.status, control.text).toBe(200);
  const schedule = await tp.http.post(`/v1/operator/devices/${device.deviceId}/connectors/1/schedule`, {
    token: c.token,
    json: {
      schedule_id: 'sch-auth',
      type: 'daily',
      time_slots: [{ start: '22:00', end: '06:00' }],
      timezone: 'Europe/Berlin',
    },
  });
  expect(schedule.status, schedule.text).toBe(200);
  const webhook = await tp.http.post('/v1/operator/webhooks', {
    token: c.token,
    json: { url: 'https://hooks.example.com/charger', events: ['*'] },
  });
  expect(webhook.status, webhook.text).toBe(200);
  keep(webhook.body.data.secret);
  const test = await tp.http.post(`/v1/operator/webhooks/${webhook.body.data.webhook_id}/test`, {
    token: c.token,
  });
  expect(test.status, test.text).toBe(200);
  const artifact = await tp.http.post(
    `/v1/operator/artifacts?kind=agent&version=auth-${++serial}&operator_id=${tenant.operatorId}`,
    {
      token: c.token,
      raw: Buffer.from('an agent bundle'),
      contentType: 'application/octet-stream',
      headers: { 'x-artifact-signature': `${'A'.repeat(86)}==` },
    },
  );
  expect(artifact.status, artifact.text).toBe(200);
  const update = await tp.http.post('/v1/operator/updates', {
    token: c.token,
    json: {
      artifact_id: artifact.body.data.artifact_id,
      target_type: 'device',
      target_ids: [device.deviceId],
    },
  });
  expect(update.status, update.text).toBe(200);
  return {
    device_id: device.deviceId,
    site_id: tenant.siteId,
    operator_id: tenant.operatorId,
    command_id: stop.body.data.command_id,
    control_id: control.body.data.control_id,
    schedule_id: 'sch-auth',
    device_command_id: schedule.body.data.command_id,
    webhook_id: webhook.body.data.webhook_id,
    delivery_id: test.body.data.delivery_id,
    artifact_id: artifact.body.data.artifact_id,
    update_id: update.body.data.update_id,
  };
}

beforeAll(async () => {
  tp = await startTestPlatform({ logLevel: 'debug' });
  routes = tp.platform.routes;
  alpha = await createTenant(tp, 'Alpha');
  bravo = await createTenant(tp, 'Bravo');
  keep(alpha.clientSecret, bravo.clientSecret);
  keepToken(alpha.token);
  keepToken(bravo.token);
  readOnly = await newClient(alpha, ['read']);
  writeOnly = await newClient(alpha, ['write']);
  devA = await newDevice(alpha, 'A');
  devB = await newDevice(bravo, 'B');
  own = await resourcesOf(alpha, devA);
  foreign = await resourcesOf(bravo, devB);
  const { client, secret } = await createClientOf(tp, {
    operator_ids: [alpha.operatorId, bravo.operatorId],
    scopes: ['read', 'write'],
  });
  keep(secret);
  const aggregator = { token: await operatorToken(tp.http, client.client_id, secret) };
  keepToken(aggregator.token);
  aggregated = await resourcesOf(bravo, await newDevice(bravo, 'AGG'), aggregator);
});
afterAll(async () => {
  await tp?.stop();
});

// ---------------------------------------------------------------------------------------------------------
// A valid request to every endpoint, so that the only thing wrong in a matrix cell is the credential

const key = (r: AnyRoute) => `${r.method} ${r.url}`;

function pathOf(route: AnyRoute, ids: Ids): string {
  const values: Record<string, string> = {
    device_id: ids.device_id,
    site_id: ids.site_id,
    connector_id: '1',
    command_id: route.auth.kind === 'device' ? ids.device_command_id : ids.command_id,
    control_id: ids.control_id,
    schedule_id: ids.schedule_id,
    webhook_id: ids.webhook_id,
    delivery_id: ids.delivery_id,
    artifact_id: ids.artifact_id,
    update_id: ids.update_id,
  };
  return route.url.replace(/:([A-Za-z_]+)/g, (_m, name: string) => {
    const v = values[name];
    if (v === undefined) throw new Error(`${key(route)}: no value for :${name}`);
    return v;
  });
}

function queryOf(route: AnyRoute, ids: Ids): string {
  const t = Date.now();
  const queries: Record<string, Record<string, string>> = {
    'GET /v1/operator/energy': {
      device_id: ids.device_id,
      start_time: iso(t - 86_400_000),
      end_time: iso(t),
      interval: '1h',
    },
    'GET /v1/operator/charging-records': { device_id: ids.device_id },
    'GET /v1/operator/devices': { site_id: ids.site_id },
  };
  const q = queries[key(route)];
  return q ? `?${new URLSearchParams(q)}` : '';
}

function bodyOf(route: AnyRoute, ids: Ids): unknown {
  const t = Date.now();
  const bodies: Record<string, unknown> = {
    'POST /v1/operator/devices/:device_id/connectors/:connector_id/stop': { reason: 'matrix' },
    'POST /v1/operator/devices/:device_id/connectors/:connector_id/start': { target_soc: 80 },
    'POST /v1/operator/devices/:device_id/connectors/:connector_id/discharge': {
      discharge_power: 7,
      duration: 600,
    },
    'POST /v1/operator/devices/:device_id/connectors/:connector_id/schedule': {
      schedule_id: 'sch-matrix',
      type: 'daily',
      time_slots: [{ start: '01:00', end: '02:00' }],
      timezone: 'UTC',
    },
    'POST /v1/operator/control/flexibility': {
      target_type: 'site',
      target_ids: [ids.site_id],
      command: 'set_power_limit',
      params: { power_limit_percent: 50, duration: 60 },
    },
    'POST /v1/operator/webhooks': { url: 'https://hooks.example.com/matrix', events: ['device.online'] },
    // The device is in an update already: a valid request, answered 409.
    'POST /v1/operator/updates': {
      artifact_id: ids.artifact_id,
      target_type: 'device',
      target_ids: [ids.device_id],
    },
    'PATCH /v1/operator/webhooks/:webhook_id': { description: 'matrix' },
    'POST /v1/device/heartbeat': { timestamp: iso(t), status: 'online', fault_code: 0 },
    'POST /v1/device/commands/:command_id/status': { status: 'accepted' },
    'POST /v1/device/telemetry': { timestamp: iso(t), connector_id: 1, state: 'idle' },
    'POST /v1/device/telemetry/batch': { records: [{ timestamp: iso(t), connector_id: 1, state: 'idle' }] },
    'POST /v1/device/events': { events: [{ event_id: `ev-${t}`, kind: 'boot', timestamp: iso(t) }] },
    'POST /v1/device/charging-records': {
      records: [
        { record_id: `rec-${t}`, connector_id: 1, start_time: iso(t - 60_000), end_time: iso(t), energy: 1 },
      ],
    },
    'POST /v1/device/firmware/status': { status: 'idle', timestamp: iso(t) },
  };
  if (key(route) in bodies) return bodies[key(route)];
  return route.method === 'POST' && route.body && !route.bodyOptional ? 'missing' : undefined;
}

/** Sends the route's valid request with the given Authorization header (or none). */
async function call(route: AnyRoute, authorization: string | undefined, ids: Ids = own): Promise<HttpResult> {
  const body = bodyOf(route, ids);
  return tp.http.call(route.method, pathOf(route, ids) + queryOf(route, ids), {
    ...(authorization !== undefined ? { headers: { authorization } } : {}),
    ...(body !== undefined ? { json: body } : {}),
  });
}

/** Exactly the documented refusal: status, code, a message, nothing else in the body. */
/** `oauth`: the operator token endpoint's refusals also carry RFC 6749's `error` (DESIGN.md §15). */
function expectRefusal(res: HttpResult, status: number, code: number, label: string, oauth?: string): void {
  expect({ label, status: res.status, code: res.body?.code }, res.text).toEqual({ label, status, code });
  expect(typeof res.body.message, label).toBe('string');
  const keys = oauth
    ? ['code', 'message', 'details', 'error', 'error_description']
    : ['code', 'message', 'details'];
  for (const k of Object.keys(res.body)) expect(keys, label).toContain(k);
  if (oauth) expect(res.body.error, label).toBe(oauth);
  expect(res.headers['x-api-version'], label).toBe('1.3.0');
}

const authed = () => routes.filter((r) => r.auth.kind !== 'none');
const operatorRoutes = () => routes.filter((r) => r.auth.kind === 'operator');
const deviceRoutes = () => routes.filter((r) => r.auth.kind === 'device');
const scopeOf = (r: AnyRoute) => (r.auth.kind === 'operator' ? r.auth.scope : undefined);

// ---------------------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------------------

describe('another tenant’s resources answer exactly as missing ones', () => {
  /** Same shape as the real id, but nobody's. */
  const missing = (id: string) => id.replace(/(?<=_)[0-9a-f]+$/i, (hex) => '0'.repeat(hex.length));
  const ID_PARAMS = [
    'device_id',
    'site_id',
    'command_id',
    'control_id',
    'webhook_id',
    'delivery_id',
    'artifact_id',
    'update_id',
  ] as const;

  /** The body of an answer with the id replaced, so two answers compare on everything else. */
  const normalised = (res: HttpResult, id: string) => ({
    status: res.status,
    body: res.text.split(id).join('<id>'),
  });

  it('for every endpoint that takes a device_id, site_id, command_id or control_id (path or query)', async () => {
    const a = await newClient(alpha, ['read', 'write']);
    const d = await newDevice(alpha, 'FVM');
    let compared = 0;
    for (const route of authed()) {
      const token = route.auth.kind === 'device' ? d.token : a.token;
      const named = ID_PARAMS.filter(
        (p) => route.url.includes(`:${p}`) || queryOf(route, own).includes(`${p}=`),
      );
      for (const param of named) {
        const idKey = route.auth.kind === 'device' && param === 'command_id' ? 'device_command_id' : param;
        const foreignIds: Ids = { ...own, [idKey]: foreign[idKey] };
        const missingIds: Ids = { ...own, [idKey]: missing(foreign[idKey]) };
        expect(missingIds[idKey]).not.toBe(foreignIds[idKey]);
        const f = await call(route, `Bearer ${token}`, foreignIds);
        const m = await call(route, `Bearer ${token}`, missingIds);
        const label = `${key(route)} ${param}`;
        expect([401, 403, 429, 500], `${label}: ${f.text}`).not.toContain(f.status);
        expect({ label, ...normalised(f, foreignIds[idKey]) }).toEqual({
          label,
          ...normalised(m, missingIds[idKey]),
        });
        if (f.status !== 200) expect(f.body.code, label).toBe(3001);
        compared++;
      }
    }
    // devices/:device_id ×8 (firmware history included), sites/:site_id, devices?site_id, energy, records,
    // commands ×2, control ×2, status.
    expect(compared).toBeGreaterThanOrEqual(17);
  });

  it('and so do the resources an aggregator made for the other tenant (commands, controls, schedules)', async () => {
    const a = await newClient(alpha, ['read', 'write']);
    let compared = 0;
    for (const route of operatorRoutes()) {
      const named = ID_PARAMS.filter(
        (p) => route.url.includes(`:${p}`) || queryOf(route, own).includes(`${p}=`),
      );
      for (const param of named) {
        // Webhooks and deliveries belong to the client that made them: the aggregator's are not Alpha's either.
        const foreignIds: Ids = { ...own, [param]: aggregated[param] };
        const missingIds: Ids = { ...own, [param]: missing(aggregated[param]) };
        const f = await call(route, `Bearer ${a.token}`, foreignIds);
        const m = await call(route, `Bearer ${a.token}`, missingIds);
        const label = `${key(route)} ${param} (aggregator's)`;
        expect({ label, ...normalised(f, aggregated[param]) }).toEqual({
          label,
          ...normalised(m, missingIds[param]),
        });
        if (f.status !== 200) expect(f.body.code, label).toBe(3001);
        compared++;
      }
    }
    expect(compared).toBeGreaterThanOrEqual(14);
  });

  it('flexibility targets of another tenant (site or operator ids) answer as missing ones', async () => {
    const a = await newClient(alpha, ['write']);
    for (const [type, id] of [
      ['site', foreign.site_id],
      ['operator', foreign.operator_id],
    ] as const) {
      const body = (target: string) => ({
        target_type: type,
        target_ids: [target],
        command: 'pause_charging',
        params: { duration: 60 },
      });
      const f = await tp.http.post('/v1/operator/control/flexibility', { token: a.token, json: body(id) });
      const m = await tp.http.post('/v1/operator/control/flexibility', {
        token: a.token,
        json: body(missing(id)),
      });
      expectRefusal(f, 404, 3001, `flexibility ${type}`);
      expect(normalised(f, id)).toEqual(normalised(m, missing(id)));
    }
  });

  it('stream subscriptions to another tenant’s devices or sites answer as missing ones', async () => {
    const deadline = Date.now() + 3_000;
    while (tp.platform.context.directory.device(foreign.device_id)?.site_id !== foreign.site_id) {
      expect(Date.now()).toBeLessThan(deadline);
      await sleep(50);
    }
    const ws = new WebSocket(`wss://127.0.0.1:${tp.port}/v1/operator/stream`, {
      ca: tp.ca,
      headers: { authorization: `Bearer ${alpha.token}` },
    });
    const inbox: string[] = [];
    const waiters: Array<(m: string) => void> = [];
    ws.on('message', (raw) => {
      const w = waiters.shift();
      if (w) w(raw.toString());
      else inbox.push(raw.toString());
    });
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    const ask = (message: unknown) => {
      ws.send(JSON.stringify(message));
      const queued = inbox.shift();
      return queued !== undefined ? Promise.resolve(queued) : new Promise<string>((r) => waiters.push(r));
    };
    for (const field of ['device_ids', 'site_ids'] as const) {
      const id = field === 'device_ids' ? foreign.device_id : foreign.site_id;
      const f = await ask({ type: 'subscribe', [field]: [id] });
      const m = await ask({ type: 'subscribe', [field]: [missing(id)] });
      expect(JSON.parse(f)).toMatchObject({ type: 'error', code: 3001 });
      expect(f.split(id).join('<id>')).toBe(m.split(missing(id)).join('<id>'));
    }
    ws.close();
  });

  it('and the other tenant’s resources were not touched', async () => {
    const b = await newClient(bravo, ['read']);
    for (const artifactId of [foreign.artifact_id, aggregated.artifact_id]) {
      const artifact = await tp.http.get(`/v1/operator/artifacts/${artifactId}`, { token: b.token });
      expect(artifact.status, artifact.text).toBe(200);
    }
    for (const updateId of [foreign.update_id, aggregated.update_id]) {
      const update = await tp.http.get(`/v1/operator/updates/${updateId}`, { token: b.token });
      expect(update.body.data.status, update.text).toBe('running');
    }
    const cmd = await tp.http.get(`/v1/operator/commands/${foreign.command_id}`, { token: b.token });
    expect(cmd.body.data.status).toBe('queued');
    for (const controlId of [foreign.control_id, aggregated.control_id]) {
      const ctl = await tp.http.get(`/v1/operator/control/${controlId}`, { token: b.token });
      expect(ctl.body.data.status).toBe('executing');
    }
    const aggregatedCmd = await tp.http.get(`/v1/operator/commands/${aggregated.command_id}`, {
      token: b.token,
    });
    expect(aggregatedCmd.body.data.status).toBe('queued');
    const schedules = await tp.http.get(`/v1/operator/devices/${foreign.device_id}/connectors/1/schedules`, {
      token: b.token,
    });
    expect(schedules.body.data.items.map((s: Json) => s.schedule_id)).toEqual(['sch-auth']);
    const status = await tp.http.get(`/v1/operator/commands/${foreign.device_command_id}`, {
      token: b.token,
    });
    expect(status.body.data.status).toBe('queued');
  });
});

// ---------------------------------------------------------------------------------------------------------

describe('token and signature tampering: 401/2001', () => {
  const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  /** The next character of the token's alphabet (a one-bit change for most of them). */
  const flip = (c: string) =>
    c === '.' ? '_' : (ALPHABET[(ALPHABET.indexOf(c) + 1) % ALPHABET.length] ?? 'A');

  function variants(token: string): Array<[string, string]> {
    const [kind, claims, mac] = token.split('.') as [string, string, string];
    const out: Array<[string, string]> = [];
    // Every single character changed, one at a time: kind prefix, claims and MAC alike.
    for (let i = 0; i < token.length; i++) {
      out.push([`char ${i} ('${token[i]}')`, token.slice(0, i) + flip(token[i]!) + token.slice(i + 1)]);
    }
    const other = kind === 'op' ? 'dv' : 'op';
    out.push(
      ['other kind', `${other}.${claims}.${mac}`],
      ['upper-case kind', `${kind.toUpperCase()}.${claims}.${mac}`],
      ['no kind', `.${claims}.${mac}`],
      ['longer kind', `${kind}x.${claims}.${mac}`],
      ['empty MAC', `${kind}.${claims}.`],
      ['truncated MAC', `${kind}.${claims}.${mac.slice(0, -1)}`],
      ['MAC plus a character', `${kind}.${claims}.${mac}A`],
      ['MAC plus a non-alphabet character', `${kind}.${claims}.${mac}~`],
      ['MAC plus padding', `${kind}.${claims}.${mac}=`],
      ['MAC with a character inserted', `${kind}.${claims}.${mac.slice(0, 10)}!${mac.slice(10)}`],
      ['MAC in standard base64', `${kind}.${claims}.${mac.replace(/-/g, '+').replace(/_/g, '/')}`],
      [
        'MAC of another token',
        `${kind}.${claims}.${(kind === 'op' ? devA.token : alpha.token).split('.')[2]}`,
      ],
      ['claims plus padding', `${kind}.${claims}=.${mac}`],
      ['extra segment', `${kind}.${claims}.${mac}.${mac}`],
    );
    // The last MAC character carries spare bits: every other character there must be refused as well.
    for (const c of ALPHABET)
      if (c !== mac.at(-1)) out.push([`last MAC char ${c}`, `${kind}.${claims}.${mac.slice(0, -1)}${c}`]);
    // Claims re-encoded with another subject, expiry, tenants, scopes or generation, keeping the MAC.
    const decoded = JSON.parse(Buffer.from(claims, 'base64url').toString('utf8')) as Record<string, unknown>;
    const reencode = (patch: Record<string, unknown>) =>
      `${kind}.${Buffer.from(JSON.stringify({ ...decoded, ...patch })).toString('base64url')}.${mac}`;
    out.push(
      ['same claims re-encoded', reencode({})],
      ['claims with another sub', reencode({ sub: kind === 'op' ? bravo.clientId : devB.deviceId })],
      ['claims with a later exp', reencode({ exp: (decoded.exp as number) + 365 * 86_400 })],
      ['claims with an earlier exp', reencode({ exp: (decoded.exp as number) - 1 })],
      ['claims with another tenant', reencode({ ops: [bravo.operatorId, alpha.operatorId] })],
      ['claims with more scopes', reencode({ scp: ['read', 'write', 'admin'] })],
      ['claims with another generation', reencode({ gen: ((decoded.gen as number) ?? 1) + 1 })],
      ['claims without exp', reencode({ exp: undefined })],
    );
    return out.filter(([, t]) => t !== token);
  }

  it('every single-character change and every re-encoding of an operator token is refused', async () => {
    const route = operatorRoutes().find((r) => r.url === '/v1/operator/devices/:device_id')!;
    // The untampered token works (and is cached as verified: tampering must not ride on that cache).
    expect((await call(route, `Bearer ${readOnly.token}`)).status).toBe(200);
    const all = variants(readOnly.token);
    expect(all.length).toBeGreaterThan(150);
    for (const [label, token] of all)
      expectRefusal(await call(route, `Bearer ${token}`), 401, 2001, `op ${label}`);
    expect((await call(route, `Bearer ${readOnly.token}`)).status).toBe(200);
  });

  it('every single-character change and every re-encoding of a device token is refused', async () => {
    const route = deviceRoutes().find((r) => r.url === '/v1/device/telemetry')!;
    const d = await newDevice(alpha, 'TAMPER');
    const all = variants(d.token);
    for (const [label, token] of all)
      expectRefusal(await call(route, `Bearer ${token}`), 401, 2001, `dv ${label}`);
    expect((await call(route, `Bearer ${d.token}`)).status).toBe(200);
  });

  it('regression: a MAC with characters the base64url decoder would skip or ignore is refused', async () => {
    // platform/auth/access-tokens.ts compared decoded bytes: '~', '=', '!' and '+' were skipped by the decoder,
    // and the spare low bits of the last character ignored, so altered tokens authenticated.
    const route = operatorRoutes().find((r) => r.url === '/v1/operator/sites')!;
    const [kind, claims, mac] = alpha.token.split('.') as [string, string, string];
    const last = mac.at(-1)!;
    const sameBits = ALPHABET[ALPHABET.indexOf(last) ^ 1]!; // differs only in a bit the decoder drops
    for (const token of [
      `${kind}.${claims}.${mac}~`,
      `${kind}.${claims}.${mac}=`,
      `${kind}.${claims}.${mac.slice(0, 5)}!${mac.slice(5)}`,
      `${kind}.${claims}.${mac.slice(0, -1)}${sameBits}`,
    ]) {
      expect(Buffer.from(token.split('.')[2]!, 'base64url')).toEqual(Buffer.from(mac, 'base64url'));
      expectRefusal(await call(route, `Bearer ${token}`), 401, 2001, token.slice(-50));
    }
    expect((await call(route, `Bearer ${alpha.token}`)).status).toBe(200);
  });

  it('request signatures: tampered, replayed, stale, for another request or another key: 401/2001', async () => {
    const c = await newClient(alpha, ['read', 'write']);
    const path = `/v1/operator/devices/${own.device_id}`;
    const now = () => Math.floor((Date.now() + advanced) / 1000);
    const signed = (sig: string, ts: number | string, p = path) =>
      tp.http.get(p, { token: c.token, headers: { 'x-signature': sig, 'x-timestamp': String(ts) } });
    const sign = (ts: number, p = path, secret = c.secret) => {
      const s = signRequest(secret, 'GET', p, ts, '');
      keep(s);
      return s;
    };
    const ts = now();
    const good = sign(ts);
    expect((await signed(good, ts)).status).toBe(200);
    expectRefusal(await signed(good, ts), 401, 2001, 'replayed signature');
    expectRefusal(await signed(good.toUpperCase(), ts), 401, 2001, 'replayed in upper case');
    const fresh = sign(ts + 1);
    for (const i of [0, 31, 63]) {
      const tampered = fresh.slice(0, i) + (fresh[i] === '0' ? '1' : '0') + fresh.slice(i + 1);
      expectRefusal(await signed(tampered, ts + 1), 401, 2001, `signature char ${i}`);
    }
    expectRefusal(await signed(fresh, ts + 2), 401, 2001, 'signature with another timestamp');
    expectRefusal(await signed(sign(ts - 301), ts - 301), 401, 2001, 'stale timestamp');
    // Taken now, not from `ts`: under load the requests above can take more than the second of margin.
    const future = now() + 302;
    expectRefusal(await signed(sign(future), future), 401, 2001, 'future timestamp');
    expectRefusal(await signed(sign(ts, `${path}?x=1`), ts), 401, 2001, 'signature for another path');
    expectRefusal(await signed(sign(ts, path, bravo.clientSecret), ts), 401, 2001, 'signed with another key');
    expectRefusal(await signed(fresh.slice(0, 63), ts + 1), 401, 2001, 'short signature');
    expectRefusal(await signed('z'.repeat(64), ts + 1), 401, 2001, 'not hex');
    expectRefusal(await signed(fresh, 'soon'), 401, 2001, 'timestamp not a number');
    // The untampered one still goes through once.
    expect((await signed(fresh, ts + 1)).status).toBe(200);
    // Device side: the same rules with the device secret.
    const d = await newDevice(alpha, 'SIG');
    const body = JSON.stringify(bodyOf(deviceRoutes().find((r) => r.url === '/v1/device/heartbeat')!, own));
    const dsig = signRequest(d.secret, 'POST', '/v1/device/heartbeat', ts, body);
    keep(dsig);
    const hb = (sig: string, raw = body) =>
      tp.http.post('/v1/device/heartbeat', {
        token: d.token,
        raw,
        contentType: 'application/json',
        headers: { 'x-signature': sig, 'x-timestamp': String(ts) },
      });
    expectRefusal(await hb(dsig, body.replace('online', 'fault')), 401, 2001, 'device: body changed');
    expect((await hb(dsig)).status).toBe(200);
    expectRefusal(await hb(dsig), 401, 2001, 'device: replayed');
  });
});

// ---------------------------------------------------------------------------------------------------------

describe('credential checks answer alike, whatever was wrong', () => {
  /**
   * Status, body and which headers came: everything a caller can compare. (The values of the RateLimit headers
   * count the requests made for the client_id or device_id asked, whether it exists or not.)
   */
  function comparable(res: HttpResult) {
    return { status: res.status, body: res.body, headers: Object.keys(res.headers).sort() };
  }
  const zeroed = (id: string) => id.replace(/[0-9a-f]+$/, (hex) => '0'.repeat(hex.length));

  it('operator token endpoint: an unknown client_id and a wrong secret for a known one answer identically', async () => {
    const c = await newClient(alpha, ['read']);
    const unknown = zeroed(c.clientId);
    const ask = (client_id: string, client_secret: string) =>
      tp.http.post('/v1/operator/oauth/token', {
        json: { client_id, client_secret, grant_type: 'client_credentials' },
      });
    const wrong = await ask(c.clientId, `${c.secret.slice(0, -1)}x`);
    const none = await ask(unknown, c.secret);
    expectRefusal(wrong, 401, 2001, 'wrong secret', 'invalid_client');
    expect(comparable(none)).toEqual(comparable(wrong));
    // Another client's secret, an empty-looking one and a huge one: the same again.
    expect(comparable(await ask(c.clientId, bravo.clientSecret)).body).toEqual(comparable(wrong).body);
    expect(comparable(await ask(c.clientId, 'x')).body).toEqual(comparable(wrong).body);
    // Through HTTP Basic as well.
    const basic = async (id: string, secret: string) => {
      const header = `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;
      keep(header.slice(6));
      return tp.http.post('/v1/operator/oauth/token', {
        raw: 'grant_type=client_credentials',
        contentType: 'application/x-www-form-urlencoded',
        headers: { authorization: header },
      });
    };
    const basicWrong = await basic(c.clientId, 'nope');
    expectRefusal(basicWrong, 401, 2001, 'basic wrong secret', 'invalid_client');
    expect(comparable(await basic(`${unknown.slice(0, -1)}1`, 'nope'))).toEqual(comparable(basicWrong));
    expect(comparable(await basic(unknown, c.secret))).toEqual(comparable(basicWrong));
    // A secret in the query string is redacted from the logs too (checked at the end).
    const inQuery = await tp.http.post(
      `/v1/operator/oauth/token?client_secret=${encodeURIComponent(c.secret)}`,
      { json: { client_id: c.clientId, client_secret: c.secret, grant_type: 'client_credentials' } },
    );
    expect(inQuery.status).toBe(200);
    keepToken(inQuery.body.access_token);
  });

  it('device token endpoint: unknown device, wrong secret, reset device and rotated secret answer identically', async () => {
    const d = await newDevice(alpha, 'CT');
    const reset = await newDevice(alpha, 'CT-RESET');
    await tp.store.resetDevice(reset.deviceId);
    const ask = (device_id: string, device_secret: string) =>
      tp.http.post('/v1/device/token', {
        json: { device_id, device_secret, grant_type: 'client_credentials' },
      });
    const wrong = await ask(d.deviceId, `${d.secret.slice(0, -1)}x`);
    expectRefusal(wrong, 401, 2001, 'wrong device secret');
    const unknownId = zeroed(d.deviceId);
    for (const [label, res] of [
      ['unknown device', await ask(unknownId, d.secret)],
      ['reset device with its old secret', await ask(reset.deviceId, reset.secret)],
      ['another device’s secret', await ask(d.deviceId, devB.secret)],
    ] as const) {
      expect({ label, ...comparable(res) }).toEqual({ label, ...comparable(wrong) });
    }
  });
});

// ---------------------------------------------------------------------------------------------------------

describe('expired tokens: 401/2002 on every endpoint (runs last: the clock moves a day on)', () => {
  it('operator and device tokens past their lifetime', async () => {
    const d = await newDevice(alpha, 'EXP');
    const tokens = { operator: alpha.token, device: d.token };
    tp.advance(86_400_000 + 2_000);
    advanced += 86_400_000 + 2_000;
    for (const route of authed()) {
      const token = route.auth.kind === 'device' ? tokens.device : tokens.operator;
      expectRefusal(await call(route, `Bearer ${token}`), 401, 2002, `${key(route)} expired`);
    }
    // The read-only and write-only tokens too: expiry is answered before the scope is looked at.
    for (const route of operatorRoutes()) {
      const token = scopeOf(route) === 'write' ? readOnly.token : writeOnly.token;
      expectRefusal(await call(route, `Bearer ${token}`), 401, 2002, `${key(route)} expired, wrong scope`);
    }
    const stream = await upgrade({ authorization: `Bearer ${alpha.token}` }, '');
    expect({ status: stream.status, code: stream.body?.code }).toEqual({ status: 401, code: 2002 });
    // A tampered expired token is still a bad signature, not "expired": nothing is read from unverified claims.
    const [kind, claims] = alpha.token.split('.') as [string, string];
    expectRefusal(
      await call(operatorRoutes()[1]!, `Bearer ${kind}.${claims}.${'A'.repeat(43)}`),
      401,
      2001,
      'expired claims, forged MAC',
    );
    // New tokens work again.
    const fresh = await operatorToken(tp.http, alpha.clientId, alpha.clientSecret);
    keepToken(fresh);
    expect((await tp.http.get('/v1/operator/sites', { token: fresh })).status).toBe(200);
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
