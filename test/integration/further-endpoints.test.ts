import { beforeAll, describe, expect, it } from 'vitest';
import { expectValidation } from '../helpers/device-calls.js';
import { byId, furtherCalls, okData, type Tenant } from '../helpers/further-calls.js';
import { expectError, type RegisteredDevice, registerDevice } from '../helpers/platform.js';
import { platformPerFile } from '../helpers/platform-per-file.js';

/**
 * The further endpoints of DESIGN.md §9, success and failure paths, over real HTTPS and SQLite: listing devices
 * and sites. Commands are in further-endpoints-commands, energy in -energy, events and charging records in
 * -records, telemetry batches and firmware reports in -telemetry-and-firmware. One platform for the file; every
 * test has its own tenant and chargers. The fake clock only moves forward.
 */

const tp = platformPerFile();

const { advance, isoNow, sn, tenant, get, heartbeat, batch, deviceView } = furtherCalls(() => tp);

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
