import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTenant,
  expectError,
  type HttpResult,
  type RegisteredDevice,
  registerDevice,
  startTestPlatform,
  type TestPlatform,
} from '../helpers/platform.js';

/**
 * The further endpoints of DESIGN.md §9, success and failure paths, over real HTTPS and SQLite.
 * One platform for the file; every test has its own tenant and chargers. The fake clock only moves forward.
 */

let tp: TestPlatform;

beforeAll(async () => {
  tp = await startTestPlatform();
});
afterAll(async () => {
  await tp?.stop();
});

const advance = (ms: number): void => tp.advance(ms);
const platformNow = (): number => tp.now();
const isoAt = (ms: number) => new Date(ms).toISOString();
const isoNow = () => isoAt(platformNow());

let counter = 0;
function sn(): string {
  counter += 1;
  return `FE-${process.pid}-${counter}-${Math.random().toString(36).slice(2, 8)}`;
}
async function tenant() {
  counter += 1;
  return createTenant(tp, `further-${counter}`);
}
type Tenant = Awaited<ReturnType<typeof tenant>>;

function expectValidation(res: HttpResult, field: string, value: unknown): void {
  const body = expectError(res, 400, 1001);
  expect(body.details).toEqual({ field, value });
}
// biome-ignore lint/suspicious/noExplicitAny: response bodies are inspected field by field
async function okData(res: Promise<HttpResult>): Promise<any> {
  const r = await res;
  if (r.status !== 200) throw new Error(`expected 200, got ${r.status} ${r.text}`);
  expect(r.body.code).toBe(0);
  expect(r.body.message).toBe('success');
  return r.body.data;
}
const get = (t: Tenant, path: string) => tp.http.get(path, { token: t.token });
const heartbeat = (d: RegisteredDevice, status = 'online') =>
  tp.http.post('/v1/device/heartbeat', {
    token: d.token,
    json: { timestamp: isoNow(), status, fault_code: 0 },
  });
const batch = (d: RegisteredDevice, records: unknown[]) =>
  tp.http.post('/v1/device/telemetry/batch', { token: d.token, json: { records } });
// biome-ignore lint/suspicious/noExplicitAny: response bodies are inspected field by field
const deviceView = async (t: Tenant, d: RegisteredDevice): Promise<any> =>
  okData(get(t, `/v1/operator/devices/${d.deviceId}`));
const byId = (a: RegisteredDevice, b: RegisteredDevice) => (a.deviceId < b.deviceId ? -1 : 1);

describe('GET /v1/operator/devices', () => {
  let t: Tenant;
  let other: Tenant;
  let site2: string;
  let inSite1: RegisteredDevice[];
  let inSite2: RegisteredDevice;
  let unassigned: RegisteredDevice;

  beforeAll(async () => {
    t = await tenant();
    other = await tenant();
    site2 = (await tp.store.createSite({ operator_id: t.operatorId, name: 'Second', timezone: 'UTC' }))
      .site_id;
    inSite1 = [await registerDevice(tp, sn(), t.siteId), await registerDevice(tp, sn(), t.siteId)].sort(byId);
    inSite2 = await registerDevice(tp, sn(), site2);
    unassigned = await registerDevice(tp, sn(), undefined);
    await registerDevice(tp, sn(), other.siteId);
  });
  const all = () => [...inSite1, inSite2].sort(byId).map((d) => d.deviceId);
  const list = (t0: Tenant, query: string) => okData(get(t0, `/v1/operator/devices${query}`));

  it('lists the client’s chargers (all sites, none unassigned or foreign) with connectors, by device_id', async () => {
    const page = await list(t, '');
    expect(page).toMatchObject({ total: 3, page: 1, size: 20 });
    expect(page.items.map((d: { device_id: string }) => d.device_id)).toEqual(all());
    expect(page.items.map((d: { device_id: string }) => d.device_id)).not.toContain(unassigned.deviceId);
    const one = page.items.find((d: { device_id: string }) => d.device_id === inSite2.deviceId);
    expect(one).toEqual(await deviceView(t, inSite2));
    expect(one).toMatchObject({
      site_id: site2,
      model: 'Test AC',
      manufacturer: 'Acme',
      firmware_version: '1.0.0',
      connectors: [
        { connector_id: 1, status: expect.any(String), max_power_kw: 22, v2g_capable: false },
        { connector_id: 2, status: expect.any(String), max_power_kw: 50, v2g_capable: true },
      ],
    });
  });

  it('pages', async () => {
    const p1 = await list(t, '?size=2');
    const p2 = await list(t, '?size=2&page=2');
    const p3 = await list(t, '?size=2&page=3');
    expect(p1).toMatchObject({ total: 3, page: 1, size: 2 });
    expect(p2).toMatchObject({ total: 3, page: 2, size: 2 });
    expect(p3).toEqual({ total: 3, page: 3, size: 2, items: [] });
    expect([...p1.items, ...p2.items].map((d: { device_id: string }) => d.device_id)).toEqual(all());
  });

  it('filters by site_id', async () => {
    const s1 = await list(t, `?site_id=${t.siteId}`);
    expect(s1.total).toBe(2);
    expect(s1.items.map((d: { device_id: string }) => d.device_id)).toEqual(inSite1.map((d) => d.deviceId));
    const s2 = await list(t, `?site_id=${site2}&size=1`);
    expect(s2).toMatchObject({ total: 1, size: 1 });
    expect(s2.items.map((d: { device_id: string }) => d.device_id)).toEqual([inSite2.deviceId]);
  });

  it('answers 404/3001 for another tenant’s site_id and an unknown one', async () => {
    expectError(await get(t, `/v1/operator/devices?site_id=${other.siteId}`), 404, 3001);
    expectError(await get(t, '/v1/operator/devices?site_id=site_00000000000000000000'), 404, 3001);
  });

  it.each([
    ['?page=0', 'page', '0'],
    ['?size=0', 'size', '0'],
    ['?size=101', 'size', '101'],
    ['?status=away', 'status', 'away'],
    ['?site_id=a/b', 'site_id', 'a/b'],
    ['?colour=red', 'colour', 'red'],
  ])('refuses %s: 400/1001', async (query, field, value) => {
    expectValidation(await get(t, `/v1/operator/devices${query}`), field, value);
  });

  it('filters by status: online and offline agree with each device’s own status, at once', async () => {
    const tt = await tenant();
    const [hb, tel, silent, off, back] = (
      await Promise.all([0, 1, 2, 3, 4].map(() => registerDevice(tp, sn(), tt.siteId)))
    ).sort(byId) as [
      RegisteredDevice,
      RegisteredDevice,
      RegisteredDevice,
      RegisteredDevice,
      RegisteredDevice,
    ];
    expect((await heartbeat(hb)).status).toBe(200);
    // Telemetry alone (no heartbeat yet) is an authenticated request: the charger is online.
    expect(
      (await batch(tel, [{ timestamp: isoNow(), connector_id: 1, state: 'charging', power: 7 }])).status,
    ).toBe(200);
    expect((await heartbeat(off, 'offline')).status).toBe(200);
    // Offline by heartbeat, then a request after it: online again.
    expect((await heartbeat(back, 'offline')).status).toBe(200);
    advance(1_000);
    expect(
      (await batch(back, [{ timestamp: isoNow(), connector_id: 1, state: 'idle', power: 0 }])).status,
    ).toBe(200);

    const everyone = await list(tt, '');
    const statusOf = new Map(
      everyone.items.map((d: { device_id: string; status: string }) => [d.device_id, d.status]),
    );
    expect(statusOf).toEqual(
      new Map([
        [hb.deviceId, 'online'],
        [tel.deviceId, 'online'],
        [silent.deviceId, 'offline'],
        [off.deviceId, 'offline'],
        [back.deviceId, 'online'],
      ]),
    );
    const online = await list(tt, '?status=online');
    expect(online.total).toBe(3);
    expect(online.items.map((d: { device_id: string }) => d.device_id)).toEqual([
      hb.deviceId,
      tel.deviceId,
      back.deviceId,
    ]);
    for (const d of online.items) expect(d.status).toBe('online');
    const offline = await list(tt, '?status=offline');
    expect(offline.total).toBe(2);
    expect(offline.items.map((d: { device_id: string }) => d.device_id)).toEqual([
      silent.deviceId,
      off.deviceId,
    ]);
    for (const d of offline.items) expect(d.status).toBe('offline');
    expect((await list(tt, `?status=online&site_id=${tt.siteId}&size=1&page=2`)).items).toHaveLength(1);

    // 90 s without a request: everyone is offline, in the filter as in the items.
    advance(91_000);
    expect((await list(tt, '?status=online')).total).toBe(0);
    const later = await list(tt, '?status=offline');
    expect(later.total).toBe(5);
    for (const d of later.items) expect(d.status).toBe('offline');
  });
});

describe('GET /v1/operator/sites and /sites/{site_id}', () => {
  it('lists the client’s sites in creation order with device_count, paged', async () => {
    const t = await tenant();
    const other = await tenant();
    const second = await tp.store.createSite({ operator_id: t.operatorId, name: 'Depot B', timezone: 'UTC' });
    await registerDevice(tp, sn(), t.siteId);
    await registerDevice(tp, sn(), t.siteId);
    await registerDevice(tp, sn(), second.site_id);
    await registerDevice(tp, sn(), other.siteId);

    const sites = await okData(get(t, '/v1/operator/sites'));
    expect(sites).toEqual({
      total: 2,
      page: 1,
      size: 20,
      items: [
        {
          site_id: t.siteId,
          operator_id: t.operatorId,
          name: expect.stringMatching(/ site$/),
          timezone: 'Europe/Berlin',
          device_count: 2,
        },
        {
          site_id: second.site_id,
          operator_id: t.operatorId,
          name: 'Depot B',
          timezone: 'UTC',
          device_count: 1,
        },
      ],
    });
    const p2 = await okData(get(t, '/v1/operator/sites?size=1&page=2'));
    expect(p2).toEqual({ total: 2, page: 2, size: 1, items: [sites.items[1]] });
    expectValidation(await get(t, '/v1/operator/sites?page=0'), 'page', '0');
    expectValidation(await get(t, '/v1/operator/sites?site_id=x'), 'site_id', 'x');

    expect(await okData(get(t, `/v1/operator/sites/${second.site_id}`))).toEqual(sites.items[1]);
    expect(await okData(get(t, `/v1/operator/sites/${t.siteId}`))).toEqual(sites.items[0]);
  });

  it('answers 404/3001 for another tenant’s site and an unknown one, identically', async () => {
    const t = await tenant();
    const other = await tenant();
    const foreign = expectError(await get(t, `/v1/operator/sites/${other.siteId}`), 404, 3001);
    const unknown = expectError(await get(t, '/v1/operator/sites/site_00000000000000000000'), 404, 3001);
    expect(foreign).toEqual(unknown);
    const list = await okData(get(t, '/v1/operator/sites'));
    expect(list.items.map((s: { site_id: string }) => s.site_id)).toEqual([t.siteId]);
  });
});

describe('POST .../connectors/{connector_id}/start', () => {
  const start = (t: Tenant, deviceId: string, connector: number | string, json?: unknown) =>
    tp.http.post(`/v1/operator/devices/${deviceId}/connectors/${connector}/start`, {
      token: t.token,
      ...(json === undefined ? {} : { json }),
    });

  it('queues a start with or without a body and delivers it on the heartbeat', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const before = platformNow();
    const withBody = await okData(start(t, d.deviceId, 1, { target_soc: 80, power_limit: 7.4 }));
    const bare = await okData(start(t, d.deviceId, 2));
    const after = platformNow();
    expect(withBody).toEqual({ command_id: expect.stringMatching(/^cmd_/), status: 'queued' });
    expect(bare).toEqual({ command_id: expect.stringMatching(/^cmd_/), status: 'queued' });

    const hb = await heartbeat(d);
    const cmds = hb.body.data.commands;
    expect(cmds.map((c: { command_id: string }) => c.command_id)).toEqual([
      withBody.command_id,
      bare.command_id,
    ]);
    expect(cmds[0]).toMatchObject({
      command: 'start',
      params: { connector_id: 1, target_soc: 80, power_limit: 7.4 },
    });
    expect(cmds[1]).toMatchObject({ command: 'start', params: { connector_id: 2 } });
    const expiry = Date.parse(cmds[0].expiry);
    expect(expiry).toBeGreaterThanOrEqual(before + 15 * 60_000);
    expect(expiry).toBeLessThanOrEqual(after + 15 * 60_000);
  });

  it('refuses bad bodies (400/1001), unknown connectors and foreign devices (404/3001)', async () => {
    const t = await tenant();
    const other = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const foreign = await registerDevice(tp, sn(), other.siteId);
    expectValidation(await start(t, d.deviceId, 1, { target_soc: 101 }), 'target_soc', 101);
    expectValidation(await start(t, d.deviceId, 1, { target_soc: 50.5 }), 'target_soc', 50.5);
    expectValidation(await start(t, d.deviceId, 1, { power_limit: -1 }), 'power_limit', -1);
    expectValidation(await start(t, d.deviceId, 1, { soc: 50 }), 'soc', 50);
    expectValidation(await start(t, d.deviceId, 0), 'connector_id', '0');
    expectError(await start(t, d.deviceId, 9), 404, 3001);
    expectError(await start(t, foreign.deviceId, 1), 404, 3001);
    expectError(await start(t, 'dev_00000000000000000000', 1), 404, 3001);
    // Nothing was queued by any of these.
    expect((await heartbeat(d)).body.data.commands).toEqual([]);
    expect((await heartbeat(foreign)).body.data.commands).toEqual([]);
  });
});

describe('schedules: GET .../schedules and DELETE .../schedules/{schedule_id}', () => {
  const schedule = (id: string, start: string) => ({
    schedule_id: id,
    type: 'daily',
    time_slots: [{ start, end: '06:00', power_limit: 11 }],
    timezone: 'Europe/Berlin',
  });
  const stored = (id: string, start: string) => ({
    schedule_id: id,
    enabled: true,
    type: 'daily',
    time_slots: [{ start, end: '06:00', power_limit: 11, action: 'charge' }],
    timezone: 'Europe/Berlin',
  });
  const base = (d: RegisteredDevice, connector = 1) =>
    `/v1/operator/devices/${d.deviceId}/connectors/${connector}`;

  it('lists what POST .../schedule stored, by schedule_id, paged; a repeat id replaces', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    for (const [id, start] of [
      ['night', '22:00'],
      ['evening', '19:00'],
      ['weekend', '00:00'],
      ['night', '23:00'],
    ] as const) {
      await okData(tp.http.post(`${base(d)}/schedule`, { token: t.token, json: schedule(id, start) }));
    }
    const list = await okData(get(t, `${base(d)}/schedules`));
    expect(list).toEqual({
      total: 3,
      page: 1,
      size: 20,
      items: [stored('evening', '19:00'), stored('night', '23:00'), stored('weekend', '00:00')],
    });
    expect(await okData(get(t, `${base(d)}/schedules?size=2&page=2`))).toEqual({
      total: 3,
      page: 2,
      size: 2,
      items: [stored('weekend', '00:00')],
    });
    expect(await okData(get(t, `${base(d, 2)}/schedules`))).toEqual({
      total: 0,
      page: 1,
      size: 20,
      items: [],
    });
    expectValidation(await get(t, `${base(d)}/schedules?size=0`), 'size', '0');
    expectError(await get(t, `${base(d, 7)}/schedules`), 404, 3001);
  });

  it('DELETE queues delete_schedule for the charger and removes it from the list; unknown → 404/3001', async () => {
    const t = await tenant();
    const other = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    await okData(tp.http.post(`${base(d)}/schedule`, { token: t.token, json: schedule('a', '20:00') }));
    await okData(tp.http.post(`${base(d)}/schedule`, { token: t.token, json: schedule('b', '21:00') }));
    // The set_schedule commands are delivered and done.
    const hb = await heartbeat(d);
    for (const c of hb.body.data.commands) {
      await okData(
        tp.http.post(`/v1/device/commands/${c.command_id}/status`, {
          token: d.token,
          json: { status: 'succeeded' },
        }),
      );
    }

    const deleted = await okData(tp.http.delete(`${base(d)}/schedules/a`, { token: t.token }));
    expect(deleted).toEqual({
      schedule_id: 'a',
      command_id: expect.stringMatching(/^cmd_/),
      status: 'queued',
    });
    const next = await heartbeat(d);
    expect(next.body.data.commands).toEqual([
      {
        command_id: deleted.command_id,
        command: 'delete_schedule',
        params: { connector_id: 1, schedule_id: 'a' },
        expiry: expect.any(String),
      },
    ]);
    const cmd = await okData(get(t, `/v1/operator/commands/${deleted.command_id}`));
    expect(cmd).toMatchObject({ command: 'delete_schedule', status: 'delivered', device_id: d.deviceId });
    expect(Date.parse(cmd.expiry) - Date.parse(cmd.created_at)).toBe(7 * 86_400_000);

    expect(await okData(get(t, `${base(d)}/schedules`))).toEqual({
      total: 1,
      page: 1,
      size: 20,
      items: [stored('b', '21:00')],
    });
    expectError(await tp.http.delete(`${base(d)}/schedules/a`, { token: t.token }), 404, 3001);
    expectError(await tp.http.delete(`${base(d)}/schedules/never`, { token: t.token }), 404, 3001);
    // The schedule lives on connector 1 only.
    expectError(await tp.http.delete(`${base(d, 2)}/schedules/b`, { token: t.token }), 404, 3001);
    // Another tenant can neither see nor delete it.
    expectError(await tp.http.delete(`${base(d)}/schedules/b`, { token: other.token }), 404, 3001);
    expectError(await get(other, `${base(d)}/schedules`), 404, 3001);
    expectValidation(
      await tp.http.delete(`${base(d)}/schedules/a%20b`, { token: t.token }),
      'schedule_id',
      'a b',
    );
    // None of the refusals queued anything.
    expect((await heartbeat(d)).body.data.commands.map((c: { command_id: string }) => c.command_id)).toEqual([
      deleted.command_id,
    ]);
    expect((await okData(get(t, `${base(d)}/schedules`))).total).toBe(1);
  });
});

describe('GET /v1/operator/energy', () => {
  const DAY = '2024-03-04';
  const at = (hms: string) => Date.parse(`${DAY}T${hms}Z`);
  /** Telemetry every `stepS` seconds from `from` to `to` inclusive. */
  function series(connector: number, fromMs: number, toMs: number, power: number, stepS = 5) {
    const out: Array<Record<string, unknown>> = [];
    for (let ms = fromMs; ms <= toMs; ms += stepS * 1000) {
      out.push({
        timestamp: isoAt(ms),
        connector_id: connector,
        state: power < 0 ? 'discharging' : power > 0 ? 'charging' : 'idle',
        power,
      });
    }
    return out;
  }
  async function upload(d: RegisteredDevice, records: Array<Record<string, unknown>>) {
    for (let i = 0; i < records.length; i += 500) {
      const res = await batch(d, records.slice(i, i + 500));
      expect(res.status).toBe(200);
      expect(res.body.data).toEqual({ accepted: Math.min(500, records.length - i), duplicates: 0 });
    }
  }
  let t: Tenant;
  let other: Tenant;
  let dev: RegisteredDevice;
  let second: RegisteredDevice;
  let foreign: RegisteredDevice;

  beforeAll(async () => {
    t = await tenant();
    other = await tenant();
    dev = await registerDevice(tp, sn(), t.siteId);
    second = await registerDevice(tp, sn(), t.siteId);
    foreign = await registerDevice(tp, sn(), other.siteId);
    await upload(dev, [
      // 10:10-10:20: 11 kW every 5 s, aligned on the 15-minute boundary → 1.8333 kWh.
      ...series(1, at('10:10:00'), at('10:20:00'), 11),
      // 12:00-12:06: V2G discharging at 5 kW → 0.5 kWh exported.
      ...series(2, at('12:00:00'), at('12:06:00'), -5),
      // 13:00 one sample at 22 kW, then 10 minutes of silence (not integrated), then 11 kW for 10 minutes.
      ...series(1, at('13:00:00'), at('13:00:00'), 22),
      ...series(1, at('13:10:00'), at('13:20:00'), 11),
      // 15:10:02-15:20:02: 11 kW every 5 s, not aligned on bucket boundaries.
      ...series(1, at('15:10:02'), at('15:20:02'), 11),
      // 16:00 and 16:05: exactly 5 minutes apart (integrated); 16:30 and 16:35:01: 301 s apart (not).
      ...series(1, at('16:00:00'), at('16:05:00'), 11, 300),
      ...series(1, at('16:30:00'), at('16:30:00'), 11),
      ...series(1, at('16:35:01'), at('16:35:01'), 11),
    ]);
    // The second charger of the site: 7 kW from 10:00 to 10:30 → 3.5 kWh.
    await upload(second, series(1, at('10:00:00'), at('10:30:00'), 7));
    await upload(foreign, series(1, at('10:00:00'), at('10:30:00'), 7));
  });
  const energy = (t0: Tenant, query: string) =>
    tp.http.get(`/v1/operator/energy?${query}`, { token: t0.token });
  const q = (from: string, to: string, interval: string, who = `device_id=${dev.deviceId}`) =>
    `${who}&start_time=${DAY}T${from}Z&end_time=${DAY}T${to}Z&interval=${interval}`;
  type Bucket = {
    start_time: string;
    end_time: string;
    energy_imported: number;
    energy_exported: number;
    avg_power: number;
    max_power: number;
    samples: number;
  };
  const empty = (from: string, to: string): Bucket => ({
    start_time: `${DAY}T${from}.000Z`,
    end_time: `${DAY}T${to}.000Z`,
    energy_imported: 0,
    energy_exported: 0,
    avg_power: 0,
    max_power: 0,
    samples: 0,
  });

  it('15m buckets: boundaries from start_time, energy integrated from power (11 kW × 5 min = 0.917 kWh)', async () => {
    const data = await okData(energy(t, q('10:00:00', '11:00:00', '15m')));
    expect(data).toEqual({
      device_id: dev.deviceId,
      interval: '15m',
      start_time: `${DAY}T10:00:00.000Z`,
      end_time: `${DAY}T11:00:00.000Z`,
      items: [
        {
          ...empty('10:00:00', '10:15:00'),
          energy_imported: 0.917,
          avg_power: 11,
          max_power: 11,
          samples: 60,
        },
        {
          ...empty('10:15:00', '10:30:00'),
          energy_imported: 0.917,
          avg_power: 11,
          max_power: 11,
          samples: 61,
        },
        empty('10:30:00', '10:45:00'),
        empty('10:45:00', '11:00:00'),
      ],
    });
  });

  it('1h buckets: exports from negative power, a gap over 5 minutes not integrated, exactly 5 minutes integrated', async () => {
    const data = await okData(energy(t, q('10:00:00', '17:00:00', '1h')));
    expect(data.items.map((b: Bucket) => [b.start_time.slice(11, 16), b.end_time.slice(11, 16)])).toEqual([
      ['10:00', '11:00'],
      ['11:00', '12:00'],
      ['12:00', '13:00'],
      ['13:00', '14:00'],
      ['14:00', '15:00'],
      ['15:00', '16:00'],
      ['16:00', '17:00'],
    ]);
    const [b10, b11, b12, b13, b14, b15, b16] = data.items as Bucket[];
    expect(b10).toMatchObject({ energy_imported: 1.833, energy_exported: 0, samples: 121, avg_power: 11 });
    expect(b11).toEqual(empty('11:00:00', '12:00:00'));
    expect(b12).toMatchObject({ energy_imported: 0, energy_exported: 0.5, samples: 73, avg_power: -5 });
    // 22 kW at 13:00 then 10 minutes without data: only the 10 minutes at 11 kW count.
    expect(b13).toMatchObject({ energy_imported: 1.833, energy_exported: 0, samples: 122, max_power: 22 });
    expect(b13!.avg_power).toBe(Math.round(((22 + 121 * 11) / 122) * 1000) / 1000);
    expect(b14).toEqual(empty('14:00:00', '15:00:00'));
    expect(b15).toMatchObject({ energy_imported: 1.833, samples: 121 });
    expect(b16).toMatchObject({ energy_imported: 0.917, samples: 4 });
  });

  it('splits an interval between two samples across the buckets it spans', async () => {
    // Samples at 15:10:02, 15:10:07, ... 15:20:02: 298 s before 15:15 and 302 s after it.
    const data = await okData(energy(t, q('15:00:00', '16:00:00', '15m')));
    expect(data.items.map((b: Bucket) => b.energy_imported)).toEqual([
      Math.round((11 * 298 * 1000) / 3600) / 1000,
      Math.round((11 * 302 * 1000) / 3600) / 1000,
      0,
      0,
    ]);
    expect(data.items.map((b: Bucket) => b.energy_imported)).toEqual([0.911, 0.923, 0, 0]);
    expect(data.items.map((b: Bucket) => b.samples)).toEqual([60, 61, 0, 0]);
  });

  it('widens a range that starts or ends inside 15 minutes to whole 15-minute buckets, and says so', async () => {
    // Asked 10:12-10:18: answered 10:00-10:30, the whole of 10:10-10:20 at 11 kW.
    const one = await okData(energy(t, q('10:12:00', '10:18:00', '1h')));
    expect(one.start_time).toBe(`${DAY}T10:00:00.000Z`);
    expect(one.end_time).toBe(`${DAY}T10:30:00.000Z`);
    expect(one.items).toEqual([
      {
        ...empty('10:00:00', '10:30:00'),
        energy_imported: 1.833,
        avg_power: 11,
        max_power: 11,
        samples: 121,
      },
    ]);
    // 15m buckets still start at the (widened) start: 10:45 → 10:45-11:00, 11:00-11:15.
    const later = await okData(energy(t, q('10:50:00', '11:05:00', '15m')));
    expect(later.items.map((b: Bucket) => [b.start_time.slice(11, 16), b.end_time.slice(11, 16)])).toEqual([
      ['10:45', '11:00'],
      ['11:00', '11:15'],
    ]);
  });

  it('clips the last bucket at end_time', async () => {
    const data = await okData(energy(t, q('10:00:00', '11:30:00', '1h')));
    expect(data.items.map((b: Bucket) => [b.start_time.slice(11, 19), b.end_time.slice(11, 19)])).toEqual([
      ['10:00:00', '11:00:00'],
      ['11:00:00', '11:30:00'],
    ]);
    expect(data.items.map((b: Bucket) => b.energy_imported)).toEqual([1.833, 0]);
  });

  it('1d buckets: a day’s total, and an empty next day', async () => {
    const data = await okData(
      energy(
        t,
        `device_id=${dev.deviceId}&start_time=2024-03-04T00:00:00Z&end_time=2024-03-06T00:00:00Z&interval=1d`,
      ),
    );
    expect(data.interval).toBe('1d');
    expect(data.items).toHaveLength(2);
    expect(data.items[0]).toMatchObject({
      start_time: '2024-03-04T00:00:00.000Z',
      end_time: '2024-03-05T00:00:00.000Z',
      // 600 s + 600 s + 600 s + 300 s at 11 kW.
      energy_imported: Math.round((11 * 2100 * 1000) / 3600) / 1000,
      energy_exported: 0.5,
      max_power: 22,
    });
    expect(data.items[0].energy_imported).toBe(6.417);
    expect(data.items[1]).toEqual({
      start_time: '2024-03-05T00:00:00.000Z',
      end_time: '2024-03-06T00:00:00.000Z',
      energy_imported: 0,
      energy_exported: 0,
      avg_power: 0,
      max_power: 0,
      samples: 0,
    });
  });

  it('site_id sums the site’s chargers and no one else’s', async () => {
    const data = await okData(energy(t, q('10:00:00', '11:00:00', '1h', `site_id=${t.siteId}`)));
    expect(data.site_id).toBe(t.siteId);
    expect(data.device_id).toBeUndefined();
    expect(data.items).toHaveLength(1);
    // 1.8333 + 3.5 kWh.
    expect(data.items[0]).toMatchObject({ energy_imported: 5.333, samples: 121 + 361, max_power: 11 });
  });

  it('refuses missing or both selectors, end before start and too many buckets: 400/1001', async () => {
    const range = `start_time=${DAY}T10:00:00Z&end_time=${DAY}T11:00:00Z`;
    expectValidation(await energy(t, range), 'device_id', null);
    expectValidation(
      await energy(t, `device_id=${dev.deviceId}&site_id=${t.siteId}&${range}`),
      'device_id',
      dev.deviceId,
    );
    expectValidation(
      await energy(t, `device_id=${dev.deviceId}&start_time=${DAY}T11:00:00Z&end_time=${DAY}T10:00:00Z`),
      'end_time',
      `${DAY}T10:00:00Z`,
    );
    expectValidation(
      await energy(t, `device_id=${dev.deviceId}&start_time=${DAY}T10:00:00Z&end_time=${DAY}T10:00:00Z`),
      'end_time',
      `${DAY}T10:00:00Z`,
    );
    // 32 days of 15-minute buckets: 3072 > 3000.
    expectValidation(
      await energy(
        t,
        `device_id=${dev.deviceId}&start_time=2024-01-01T00:00:00Z&end_time=2024-02-02T00:00:00Z&interval=15m`,
      ),
      'interval',
      '15m',
    );
    expectValidation(await energy(t, `device_id=${dev.deviceId}&${range}&interval=5m`), 'interval', '5m');
    expectValidation(
      await energy(t, `device_id=${dev.deviceId}&end_time=${DAY}T10:00:00Z`),
      'start_time',
      null,
    );
    expectValidation(
      await energy(t, `device_id=${dev.deviceId}&${range}&start_time=x`),
      'start_time',
      '[array of 2]',
    );
  });

  it('answers 404/3001 for another tenant’s device or site and for unknown ones', async () => {
    const range = `start_time=${DAY}T10:00:00Z&end_time=${DAY}T11:00:00Z`;
    expectError(await energy(t, `device_id=${foreign.deviceId}&${range}`), 404, 3001);
    expectError(await energy(t, `site_id=${other.siteId}&${range}`), 404, 3001);
    expectError(await energy(t, `device_id=dev_00000000000000000000&${range}`), 404, 3001);
    // The owner sees it.
    const own = await okData(energy(other, `device_id=${foreign.deviceId}&${range}`));
    expect(own.items[0].energy_imported).toBe(3.5);
  });
});

describe('POST /v1/device/events and GET /v1/operator/devices/{device_id}/events', () => {
  const post = (d: RegisteredDevice, events: unknown[]) =>
    tp.http.post('/v1/device/events', { token: d.token, json: { events } });

  it('stores events, lists them newest first by timestamp, ignores repeated event_ids', async () => {
    const t = await tenant();
    const other = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const base = platformNow() - 60_000;
    const received = { before: platformNow(), after: 0 };
    const first = await okData(
      post(d, [
        { event_id: 'e1', kind: 'boot', timestamp: isoAt(base) },
        {
          event_id: 'e3',
          kind: 'fault_raised',
          severity: 'error',
          timestamp: isoAt(base + 20_000),
          connector_id: 2,
          message: 'ground fault',
          data: { code: 17, latched: true, note: null },
        },
        {
          event_id: 'e2',
          kind: 'vehicle_plugged',
          severity: 'info',
          connector_id: 1,
          timestamp: isoAt(base + 10_000),
        },
      ]),
    );
    received.after = platformNow();
    expect(first).toEqual({ accepted: 3, duplicates: 0 });

    const page = await okData(get(t, `/v1/operator/devices/${d.deviceId}/events`));
    expect(page).toMatchObject({ total: 3, page: 1, size: 20 });
    expect(page.items.map((e: { event_id: string }) => e.event_id)).toEqual(['e3', 'e2', 'e1']);
    expect(page.items[0]).toEqual({
      device_id: d.deviceId,
      event_id: 'e3',
      kind: 'fault_raised',
      severity: 'error',
      timestamp: isoAt(base + 20_000),
      received_at: expect.any(String),
      connector_id: 2,
      message: 'ground fault',
      data: { code: 17, latched: true, note: null },
    });
    // Severity defaults to info; optional fields are left out, not null.
    expect(page.items[2]).toEqual({
      device_id: d.deviceId,
      event_id: 'e1',
      kind: 'boot',
      severity: 'info',
      timestamp: isoAt(base),
      received_at: expect.any(String),
    });
    const rx = Date.parse(page.items[2].received_at);
    expect(rx).toBeGreaterThanOrEqual(received.before);
    expect(rx).toBeLessThanOrEqual(received.after);

    // A replay (the agent's outbox) with one new event.
    expect(
      await okData(
        post(d, [
          { event_id: 'e2', kind: 'vehicle_unplugged', timestamp: isoAt(base + 50_000) },
          { event_id: 'e4', kind: 'session_started', timestamp: isoAt(base + 30_000) },
        ]),
      ),
    ).toEqual({ accepted: 1, duplicates: 1 });
    const after = await okData(get(t, `/v1/operator/devices/${d.deviceId}/events?size=2`));
    expect(after).toMatchObject({ total: 4, size: 2 });
    expect(after.items.map((e: { event_id: string }) => e.event_id)).toEqual(['e4', 'e3']);
    const p2 = await okData(get(t, `/v1/operator/devices/${d.deviceId}/events?size=2&page=2`));
    expect(p2.items.map((e: { event_id: string; kind: string }) => [e.event_id, e.kind])).toEqual([
      ['e2', 'vehicle_plugged'],
      ['e1', 'boot'],
    ]);

    // Another tenant cannot read them.
    expectError(await get(other, `/v1/operator/devices/${d.deviceId}/events`), 404, 3001);
    expectValidation(await get(t, `/v1/operator/devices/${d.deviceId}/events?page=0`), 'page', '0');
  });

  it('keeps event ids per charger: another charger may use the same id', async () => {
    const t = await tenant();
    const a = await registerDevice(tp, sn(), t.siteId);
    const b = await registerDevice(tp, sn(), t.siteId);
    expect(await okData(post(a, [{ event_id: 'boot-1', kind: 'boot', timestamp: isoNow() }]))).toEqual({
      accepted: 1,
      duplicates: 0,
    });
    expect(await okData(post(b, [{ event_id: 'boot-1', kind: 'boot', timestamp: isoNow() }]))).toEqual({
      accepted: 1,
      duplicates: 0,
    });
  });

  it.each([
    [[{ event_id: 'x', kind: 'Bad Kind', timestamp: '2024-01-01T00:00:00Z' }], 'events.0.kind', 'Bad Kind'],
    [
      [{ event_id: 'x', kind: 'boot', severity: 'fatal', timestamp: '2024-01-01T00:00:00Z' }],
      'events.0.severity',
      'fatal',
    ],
    [[{ event_id: 'x', kind: 'boot' }], 'events.0.timestamp', null],
    [[{ event_id: 'a b', kind: 'boot', timestamp: '2024-01-01T00:00:00Z' }], 'events.0.event_id', 'a b'],
    [[], 'events', '[array of 0]'],
  ])('refuses %j: 400/1001 and stores nothing', async (events, field, value) => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const mixed = [{ event_id: 'good', kind: 'boot', timestamp: isoNow() }, ...events];
    const res = await post(d, events.length === 0 ? [] : mixed);
    expectValidation(res, events.length === 0 ? field : field.replace('events.0', 'events.1'), value);
    expect((await okData(get(t, `/v1/operator/devices/${d.deviceId}/events`))).total).toBe(0);
  });
});

describe('POST /v1/device/charging-records', () => {
  const record = (id: string, startMs: number, overrides: Record<string, unknown> = {}) => ({
    record_id: id,
    connector_id: 1,
    start_time: isoAt(startMs),
    end_time: isoAt(startMs + 3_600_000),
    energy: 18.25,
    max_power: 11,
    avg_power: 10.2,
    cost: 6.4,
    meter_start: 1200.5,
    meter_end: 1218.75,
    vehicle_info: { vin: 'WVWZZZ1JZXW000001', soc_start: 20, soc_end: 80 },
    ...overrides,
  });
  const upload = (d: RegisteredDevice, records: unknown[]) =>
    tp.http.post('/v1/device/charging-records', { token: d.token, json: { records } });

  it('is idempotent on record_id, and what was uploaded is exactly what the operator reads', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const t0 = Date.parse('2025-02-01T08:00:00.000Z');
    const r1 = record('rec-1', t0);
    const r2 = record('rec-2', t0 + 4 * 3_600_000, {
      connector_id: 2,
      vehicle_info: undefined,
      cost: undefined,
    });
    const minimal = {
      record_id: 'rec-3',
      connector_id: 1,
      start_time: '2025-02-01T12:30:00+01:00',
      end_time: '2025-02-01T12:45:00+01:00',
      energy: 0,
    };
    expect(await okData(upload(d, [r1, r2, minimal]))).toEqual({ accepted: 3, duplicates: 0 });
    expect(await okData(upload(d, [r1, r2]))).toEqual({ accepted: 0, duplicates: 2 });
    // The first upload wins: a changed replay of a stored record_id is ignored.
    expect(await okData(upload(d, [{ ...r1, energy: 99 }]))).toEqual({ accepted: 0, duplicates: 1 });

    const page = await okData(get(t, `/v1/operator/charging-records?device_id=${d.deviceId}`));
    const { vehicle_info: _v, cost: _c, ...r2Stored } = r2;
    expect(page).toEqual({
      total: 3,
      page: 1,
      size: 20,
      items: [
        { ...r2Stored, device_id: d.deviceId },
        {
          record_id: 'rec-3',
          device_id: d.deviceId,
          connector_id: 1,
          start_time: '2025-02-01T11:30:00.000Z',
          end_time: '2025-02-01T11:45:00.000Z',
          energy: 0,
        },
        { ...r1, device_id: d.deviceId },
      ],
    });
  });

  it('keeps record ids per charger: another charger’s same id is a new record', async () => {
    const t = await tenant();
    const a = await registerDevice(tp, sn(), t.siteId);
    const b = await registerDevice(tp, sn(), t.siteId);
    const t0 = Date.parse('2025-03-01T08:00:00.000Z');
    expect(await okData(upload(a, [record('same', t0)]))).toEqual({ accepted: 1, duplicates: 0 });
    expect(await okData(upload(b, [record('same', t0)]))).toEqual({ accepted: 1, duplicates: 0 });
    const page = await okData(get(t, '/v1/operator/charging-records'));
    expect(page.items.map((r: { device_id: string }) => r.device_id).sort()).toEqual(
      [a.deviceId, b.deviceId].sort(),
    );
  });

  it.each([
    [
      'end before start',
      { end_time: '2025-01-01T07:00:00.000Z' },
      'records.0.end_time',
      '2025-01-01T07:00:00.000Z',
    ],
    ['meter_end below meter_start', { meter_end: 1000 }, 'records.0.meter_end', 1000],
    ['negative energy', { energy: -1 }, 'records.0.energy', -1],
    ['soc over 100', { vehicle_info: { soc_end: 101 } }, 'records.0.vehicle_info.soc_end', 101],
    ['connector 0', { connector_id: 0 }, 'records.0.connector_id', 0],
  ])('refuses %s: 400/1001, nothing stored', async (_name, overrides, field, value) => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const bad = record('bad', Date.parse('2025-01-01T08:00:00.000Z'), overrides);
    expectValidation(await upload(d, [bad]), field, value);
    expect((await okData(get(t, `/v1/operator/charging-records?device_id=${d.deviceId}`))).total).toBe(0);
  });
});

describe('POST /v1/device/telemetry/batch', () => {
  const rec = (ms: number, overrides: Record<string, unknown> = {}) => ({
    timestamp: isoAt(ms),
    connector_id: 1,
    state: 'charging',
    voltage: 230,
    current: 16,
    power: 11,
    energy_delivered: 5,
    soc: 50,
    ...overrides,
  });

  it('refuses 501 records: 400/1001; accepts 500', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const base = platformNow() - 3_600_000;
    const records = Array.from({ length: 501 }, (_, i) => rec(base + i * 5_000));
    expectValidation(await batch(d, records), 'records', '[array of 501]');
    expect(await okData(batch(d, records.slice(0, 500)))).toEqual({ accepted: 500, duplicates: 0 });
    expectValidation(await batch(d, []), 'records', '[array of 0]');
    expectValidation(await batch(d, [rec(base, { state: 'discharging', power: 3 })]), 'records.0.power', 3);
  });

  it('counts replayed records as duplicates', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const base = platformNow() - 60_000;
    const three = [rec(base), rec(base + 5_000), rec(base + 10_000)];
    expect(await okData(batch(d, three))).toEqual({ accepted: 3, duplicates: 0 });
    expect(await okData(batch(d, three))).toEqual({ accepted: 0, duplicates: 3 });
    expect(await okData(batch(d, [...three.slice(1), rec(base + 15_000)]))).toEqual({
      accepted: 1,
      duplicates: 2,
    });
    // Same timestamp on another connector is a different record.
    expect(await okData(batch(d, [rec(base, { connector_id: 2 })]))).toEqual({ accepted: 1, duplicates: 0 });
  });

  it('the connector live state reflects the newest record, even when an older batch arrives later', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const now = platformNow();
    // Newest first inside the batch: the order within a batch does not matter either.
    expect(
      await okData(
        batch(d, [
          rec(now - 10_000, { soc: 80, power: 11.5, energy_delivered: 9.5 }),
          rec(now - 20_000, { soc: 78, power: 11 }),
        ]),
      ),
    ).toEqual({ accepted: 2, duplicates: 0 });
    // The backlog of an outage, older than what is already known.
    expect(
      await okData(
        batch(d, [
          rec(now - 300_000, { state: 'idle', power: 0, soc: 40, energy_delivered: 0 }),
          rec(now - 200_000, { state: 'fault', power: 0, soc: 41 }),
        ]),
      ),
    ).toEqual({ accepted: 2, duplicates: 0 });
    const view = await deviceView(t, d);
    expect(view.connectors[0]).toEqual({
      connector_id: 1,
      status: 'charging',
      power: 11.5,
      voltage: 230,
      current: 16,
      energy_delivered: 9.5,
      soc: 80,
      last_telemetry_time: isoAt(now - 10_000),
      max_power_kw: 22,
      v2g_capable: false,
    });
    // A newer record does move it.
    expect(await okData(batch(d, [rec(now - 1_000, { state: 'idle', power: 0, soc: 81 })]))).toEqual({
      accepted: 1,
      duplicates: 0,
    });
    expect((await deviceView(t, d)).connectors[0]).toMatchObject({
      status: 'idle',
      soc: 81,
      last_telemetry_time: isoAt(now - 1_000),
    });
  });
});

describe('POST /v1/device/firmware/status', () => {
  const report = (d: RegisteredDevice, body: unknown) =>
    tp.http.post('/v1/device/firmware/status', { token: d.token, json: body });

  it('installed with a version updates the device’s firmware_version; other states do not', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    expect((await deviceView(t, d)).firmware_version).toBe('1.0.0');
    expect(
      await okData(report(d, { status: 'downloading', version: '2.0.0', progress: 40, timestamp: isoNow() })),
    ).toEqual({ status: 'downloading' });
    expect(await okData(report(d, { status: 'installing', version: '2.0.0', timestamp: isoNow() }))).toEqual({
      status: 'installing',
    });
    expect((await deviceView(t, d)).firmware_version).toBe('1.0.0');
    expect(await okData(report(d, { status: 'installed', version: '2.0.0', timestamp: isoNow() }))).toEqual({
      status: 'installed',
    });
    expect((await deviceView(t, d)).firmware_version).toBe('2.0.0');
    // Installed without a version, or a failed upgrade to another version: unchanged.
    expect(await okData(report(d, { status: 'installed', timestamp: isoNow() }))).toEqual({
      status: 'installed',
    });
    expect(
      await okData(
        report(d, { status: 'failed', version: '3.0.0', message: 'bad image', timestamp: isoNow() }),
      ),
    ).toEqual({ status: 'failed' });
    expect((await deviceView(t, d)).firmware_version).toBe('2.0.0');
  });

  it('accepts every detailed state of DESIGN.md §19 beside the six, and answers each with its status', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    for (const status of [
      'idle',
      'failed',
      'download_scheduled',
      'downloading',
      'downloaded',
      'download_failed',
      'signature_verified',
      'invalid_signature',
      'install_scheduled',
      'installing',
      'install_rebooting',
      'install_failed',
      'install_verification_failed',
      'rolled_back',
    ]) {
      expect(
        await okData(report(d, { status, version: '2.0.0', update_id: 'upd_1', timestamp: isoNow() })),
      ).toEqual({ status });
    }
    expect((await deviceView(t, d)).firmware_version).toBe('1.0.0');
  });

  it('installed with an update_id leaves the versions (the update says agent or firmware); without, firmware', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const at = isoNow();
    expect(
      await okData(report(d, { status: 'installed', version: '2.0.0', update_id: 'upd_2', timestamp: at })),
    ).toEqual({ status: 'installed' });
    // Both as registered.
    expect(await deviceView(t, d)).toMatchObject({ firmware_version: '1.0.0', agent_version: '1.0.0' });
    expect(
      await okData(report(d, { status: 'installed', version: '2.0.1', report_id: 'r1', timestamp: at })),
    ).toEqual({ status: 'installed' });
    expect((await deviceView(t, d)).firmware_version).toBe('2.0.1');
  });

  it.each([
    [{ status: 'done', timestamp: '2025-01-01T00:00:00Z' }, 'status', 'done'],
    [{ timestamp: '2025-01-01T00:00:00Z' }, 'status', null],
    [{ status: 'installed', version: '9.9.9' }, 'timestamp', null],
    [{ status: 'downloading', progress: 101, timestamp: '2025-01-01T00:00:00Z' }, 'progress', 101],
    [{ status: 'installed', version: '', timestamp: '2025-01-01T00:00:00Z' }, 'version', ''],
    [
      { status: 'installed', version: '9', report_id: '', timestamp: '2025-01-01T00:00:00Z' },
      'report_id',
      '',
    ],
    [
      { status: 'installed', version: '9', update_id: 'a b', timestamp: '2025-01-01T00:00:00Z' },
      'update_id',
      'a b',
    ],
    [{ status: 'rolled_back ', timestamp: '2025-01-01T00:00:00Z' }, 'status', 'rolled_back '],
  ])('refuses %j: 400/1001, firmware_version unchanged', async (body, field, value) => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    expectValidation(await report(d, body), field, value);
    expect((await deviceView(t, d)).firmware_version).toBe('1.0.0');
  });
});

// POST /v1/device/secret/rotate (two-phase, DESIGN.md §17): device-secret-rotation.test.ts.
