import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isOnline, seenStateOfRow } from '../../platform/domain/liveness-rule.js';
import { rotateDeviceSecret } from '../../platform/services/device-secret-service.js';
import { createPostgresStore } from '../../platform/storage/backends.js';
import { loadOrCreatePlatformKeys } from '../../platform/storage/platform-keys.js';
import type { DeviceRow, RegisterInput, Store } from '../../platform/storage/store.js';
import type { TelemetryRecord } from '../../shared/index.js';
import { BACKENDS, openTestStore, type TestStore } from '../helpers/backends.js';
import { createClientOf, registerOnStore } from '../helpers/sealed-writes.js';

/**
 * The repository contract of operators, sites, clients, the principal directory, devices and telemetry: the
 * same cases on every backend, so that PostgreSQL behaves exactly as SQLite does.
 */
const T0 = Date.UTC(2030, 0, 15, 12);
const WINDOW_MS = 60_000;

function charger(sn: string, extra: Partial<RegisterInput> = {}): RegisterInput {
  return { sn, model: 'M1', manufacturer: 'Acme', firmware_version: '1.0.0', ...extra };
}

function record(connectorId: number, tsMs: number, extra: Partial<TelemetryRecord> = {}): TelemetryRecord {
  return {
    timestamp: new Date(tsMs).toISOString(),
    connector_id: connectorId,
    state: 'charging',
    power: 7,
    ...extra,
  };
}

describe.each(BACKENDS)('store contract: directory, devices, telemetry (%s)', (backend) => {
  let clock = T0;
  let ts: TestStore;
  let store: Store;
  beforeEach(async () => {
    clock = T0;
    ts = await openTestStore(backend, { now: () => clock });
    store = ts.store;
  });
  afterEach(async () => {
    await ts.close();
  });
  const tick = (ms = 1) => {
    clock += ms;
  };

  /** An operator with one site. */
  async function operatorWithSite(name = 'A') {
    const op = await store.createOperator(name);
    tick();
    const site = await store.createSite({
      operator_id: op.operator_id,
      name: `${name}-site`,
      timezone: 'UTC',
    });
    tick();
    return { op, site };
  }

  async function registered(sn: string, siteId?: string, extra: Partial<RegisterInput> = {}) {
    const out = await registerOnStore(store, charger(sn, extra), {
      registration: 'open',
      defaultSiteId: siteId,
    });
    if (out.kind !== 'registered') throw new Error(`${sn}: ${out.kind}`);
    return out;
  }

  describe('operators, sites, clients, settings', () => {
    it('creates, gets and lists operators in creation order', async () => {
      const b = await store.createOperator('B');
      tick();
      const a = await store.createOperator('A');
      expect(b).toEqual({ operator_id: expect.stringMatching(/^op_/), name: 'B' });
      expect(await store.getOperator(a.operator_id)).toEqual(a);
      expect(await store.getOperator('op_missing')).toBeUndefined();
      expect(await store.listOperators()).toEqual([b, a]);
    });

    it('creates, gets and lists sites, all or of one operator, in creation order', async () => {
      const a = await store.createOperator('A');
      const b = await store.createOperator('B');
      const s1 = await store.createSite({ operator_id: a.operator_id, name: 'one', timezone: 'Europe/Oslo' });
      tick();
      const s2 = await store.createSite({ operator_id: b.operator_id, name: 'two', timezone: 'UTC' });
      tick();
      const s3 = await store.createSite({
        operator_id: a.operator_id,
        name: 'three',
        timezone: 'UTC',
        site_id: 'site_given',
      });
      expect(s1).toEqual({
        site_id: expect.stringMatching(/^site_/),
        operator_id: a.operator_id,
        name: 'one',
        timezone: 'Europe/Oslo',
      });
      expect(s3.site_id).toBe('site_given');
      expect(await store.getSite('site_given')).toEqual(s3);
      expect(await store.getSite('site_missing')).toBeUndefined();
      expect(await store.listSites()).toEqual([s1, s2, s3]);
      expect(await store.listSites(a.operator_id)).toEqual([s1, s3]);
      expect(await store.listSites(b.operator_id)).toEqual([s2]);
    });

    it('pages the sites of several operators with their device counts', async () => {
      const a = await store.createOperator('A');
      const b = await store.createOperator('B');
      const c = await store.createOperator('C');
      const sites = [];
      for (const [i, op] of [a, b, a, c, a].entries()) {
        sites.push(await store.createSite({ operator_id: op.operator_id, name: `s${i}`, timezone: 'UTC' }));
        tick();
      }
      await registered('SN-1', sites[0]!.site_id);
      await registered('SN-2', sites[0]!.site_id);
      await registered('SN-3', sites[2]!.site_id);
      await registered('SN-4', sites[3]!.site_id);
      const ops = [a.operator_id, b.operator_id];
      const p1 = await store.listSitesFor(ops, 1, 3);
      expect(p1).toEqual({
        total: 4,
        page: 1,
        size: 3,
        items: [
          { ...sites[0], device_count: 2 },
          { ...sites[1], device_count: 0 },
          { ...sites[2], device_count: 1 },
        ],
      });
      expect(await store.listSitesFor(ops, 2, 3)).toEqual({
        total: 4,
        page: 2,
        size: 3,
        items: [{ ...sites[4], device_count: 0 }],
      });
      expect(await store.listSitesFor(ops, 5, 3)).toEqual({ total: 4, page: 5, size: 3, items: [] });
      expect(await store.listSitesFor([], 1, 3)).toEqual({ total: 0, page: 1, size: 3, items: [] });
      expect((await store.listSitesFor([c.operator_id], 1, 10)).items).toEqual([
        { ...sites[3], device_count: 1 },
      ]);
    });

    it('creates clients with a sealed secret, distinct operators and their scopes', async () => {
      const a = await store.createOperator('A');
      const b = await store.createOperator('B');
      const keys = loadOrCreatePlatformKeys(ts.dataDir);
      const { client, secret } = await createClientOf(ts, {
        operator_ids: [b.operator_id, a.operator_id, b.operator_id],
        scopes: ['read', 'write'],
      });
      expect(client.client_id).toMatch(/^cli_/);
      expect(client.secret_sealed).not.toContain(secret);
      expect(keys.openSecret(client.secret_sealed)).toBe(secret);
      expect(client.operator_ids.sort()).toEqual([a.operator_id, b.operator_id].sort());
      expect(await store.getClient(client.client_id)).toEqual({
        client_id: client.client_id,
        secret_sealed: client.secret_sealed,
        scopes: ['read', 'write'],
        operator_ids: [a.operator_id, b.operator_id].sort(),
        status: 'active',
        secret_gen: 1,
        previous_secret_sealed: null,
        previous_secret_until_ms: null,
      });
      expect(await store.getClient('cli_missing')).toBeUndefined();
    });

    it('keeps settings, the last value winning', async () => {
      expect(await store.getSetting('k')).toBeUndefined();
      await store.setSetting('k', 'one');
      await store.setSetting('other', 'x');
      await store.setSetting('k', 'two');
      expect(await store.getSetting('k')).toBe('two');
      expect(await store.getSetting('other')).toBe('x');
    });
  });

  describe('principal directory', () => {
    it('loads every device and client, and one of each, with tenancy and signing', async () => {
      const { op, site } = await operatorWithSite();
      const other = await store.createOperator('B');
      const inSite = await registered('SN-1', site.site_id);
      const homeless = await registered('SN-2');
      const { client } = await createClientOf(ts, {
        operator_ids: [other.operator_id, op.operator_id],
        scopes: ['read'],
      });
      const { client: lonely } = await createClientOf(ts, { operator_ids: [], scopes: ['read'] });
      const deviceEntry = {
        device_id: inSite.device.device_id,
        secret_gen: 1,
        secret_sealed: inSite.device.secret_sealed,
        pending_since_ms: null,
        require_signature: false,
        site_id: site.site_id,
        operator_id: op.operator_id,
      };
      const homelessEntry = {
        device_id: homeless.device.device_id,
        secret_gen: 1,
        secret_sealed: homeless.device.secret_sealed,
        pending_since_ms: null,
        require_signature: false,
        site_id: null,
        operator_id: null,
      };
      const clientEntry = {
        client_id: client.client_id,
        secret_sealed: client.secret_sealed,
        require_signature: false,
        status: 'active',
        secret_gen: 1,
        previous_secret_until_ms: null,
        operator_ids: [other.operator_id, op.operator_id].sort(),
      };
      const lonelyEntry = {
        client_id: lonely.client_id,
        secret_sealed: lonely.secret_sealed,
        require_signature: false,
        status: 'active',
        secret_gen: 1,
        previous_secret_until_ms: null,
        operator_ids: [],
      };
      const all = await store.loadDirectory();
      const byId = <T extends { device_id?: string; client_id?: string }>(x: T, y: T) =>
        (x.device_id ?? x.client_id ?? '') < (y.device_id ?? y.client_id ?? '') ? -1 : 1;
      expect(all.devices.sort(byId)).toEqual([deviceEntry, homelessEntry].sort(byId));
      expect(all.clients.map((c) => ({ ...c, operator_ids: [...c.operator_ids].sort() })).sort(byId)).toEqual(
        [clientEntry, lonelyEntry].sort(byId),
      );
      expect(await store.loadDeviceEntry(inSite.device.device_id)).toEqual(deviceEntry);
      expect(await store.loadDeviceEntry('dev_missing')).toBeUndefined();
      expect(await store.loadClientEntry(client.client_id)).toEqual(clientEntry);
      expect(await store.loadClientEntry('cli_missing')).toBeUndefined();
    });

    it('sets and clears required signatures of clients and devices', async () => {
      const { op, site } = await operatorWithSite();
      const dev = await registered('SN-1', site.site_id);
      const { client } = await createClientOf(ts, { operator_ids: [op.operator_id], scopes: ['read'] });
      expect(await store.setRequireSignature('client', client.client_id, true)).toBe(true);
      expect(await store.setRequireSignature('device', dev.device.device_id, true)).toBe(true);
      expect((await store.loadClientEntry(client.client_id))?.require_signature).toBe(true);
      expect((await store.loadDeviceEntry(dev.device.device_id))?.require_signature).toBe(true);
      const all = await store.loadDirectory();
      expect(all.clients.find((c) => c.client_id === client.client_id)?.require_signature).toBe(true);
      expect(all.devices.find((d) => d.device_id === dev.device.device_id)?.require_signature).toBe(true);
      expect(await store.setRequireSignature('device', dev.device.device_id, false)).toBe(true);
      expect((await store.loadDeviceEntry(dev.device.device_id))?.require_signature).toBe(false);
      expect((await store.loadClientEntry(client.client_id))?.require_signature).toBe(true);
      expect(await store.setRequireSignature('client', 'cli_missing', true)).toBe(false);
      expect(await store.setRequireSignature('device', 'dev_missing', true)).toBe(false);
    });
  });

  describe('registration', () => {
    it('registers any serial when open, with its site, secret and declared connectors', async () => {
      const { site } = await operatorWithSite();
      const keys = loadOrCreatePlatformKeys(ts.dataDir);
      const out = await registerOnStore(
        store,
        charger('SN-1', {
          mac: 'AA:BB:CC:DD:EE:FF',
          connectors: [
            { connector_id: 2, max_power_kw: 22, v2g_capable: false },
            { connector_id: 1, max_power_kw: 11.5, v2g_capable: true },
          ],
        }),
        { registration: 'open', defaultSiteId: site.site_id },
        keys,
      );
      if (out.kind !== 'registered') throw new Error(out.kind);
      const expected: DeviceRow = {
        device_id: expect.stringMatching(/^dev_/) as unknown as string,
        sn: 'SN-1',
        model: 'M1',
        manufacturer: 'Acme',
        firmware_version: '1.0.0',
        agent_version: null,
        mac: 'AA:BB:CC:DD:EE:FF',
        site_id: site.site_id,
        registered: true,
        secret_sealed: expect.any(String) as unknown as string,
        secret_gen: 1,
        pending_secret_sealed: null,
        pending_since_ms: null,
        last_seen_ms: null,
        last_heartbeat_ms: null,
        reported_status: null,
        fault_code: null,
      };
      expect(out.device).toMatchObject(expected);
      expect(keys.openSecret(out.device.secret_sealed ?? '')).toBe(out.secret);
      expect(await store.getDevice(out.device.device_id)).toMatchObject({
        ...expected,
        device_id: out.device.device_id,
      });
      expect(await store.getDevice('dev_missing')).toBeUndefined();
      const connectors = await store.listConnectors(out.device.device_id);
      expect(connectors.map((c) => [c.connector_id, c.max_power_kw, c.v2g_capable, c.state])).toEqual([
        [1, 11.5, true, null],
        [2, 22, false, null],
      ]);
    });

    it('refuses serials off the allowlist, and a serial that is registered', async () => {
      const policy = { registration: 'allowlist' as const };
      expect(await registerOnStore(store, charger('SN-1'), policy)).toEqual({ kind: 'not_allowed' });
      await store.allowSerial('SN-1');
      await store.allowSerial('SN-1');
      const first = await registerOnStore(store, charger('SN-1'), policy);
      expect(first.kind).toBe('registered');
      expect(await registerOnStore(store, charger('SN-1'), policy)).toEqual({ kind: 'already_registered' });
      expect(await registerOnStore(store, charger('SN-1'), { registration: 'open' })).toEqual({
        kind: 'already_registered',
      });
      expect(await registerOnStore(store, charger('SN-2'), policy)).toEqual({ kind: 'not_allowed' });
    });

    it('registers a reset charger again under its id, with a new generation and secret', async () => {
      const { site } = await operatorWithSite();
      const other = await store.createSite({ operator_id: site.operator_id, name: 'other', timezone: 'UTC' });
      const first = await registered('SN-1', undefined, {
        connectors: [{ connector_id: 1, max_power_kw: 11, v2g_capable: false }],
      });
      const id = first.device.device_id;
      expect(await store.resetDevice(id)).toBe(true);
      expect(await store.getDevice(id)).toMatchObject({
        registered: false,
        secret_sealed: null,
        secret_gen: 2,
      });
      expect(await store.resetDevice('dev_missing')).toBe(false);
      const again = await registerOnStore(
        store,
        charger('SN-1', {
          firmware_version: '2.0.0',
          connectors: [{ connector_id: 1, max_power_kw: 22, v2g_capable: true }],
        }),
        { registration: 'open', defaultSiteId: site.site_id },
      );
      if (again.kind !== 'registered') throw new Error(again.kind);
      expect(again.device).toMatchObject({
        device_id: id,
        registered: true,
        secret_gen: 3,
        firmware_version: '2.0.0',
        // It had no site: the default site now.
        site_id: site.site_id,
      });
      expect(again.secret).not.toBe(first.secret);
      expect(again.device.secret_sealed).not.toBe(first.device.secret_sealed);
      expect(await store.listConnectors(id)).toMatchObject([
        { connector_id: 1, max_power_kw: 22, v2g_capable: true },
      ]);
      // A charger that has a site keeps it when it registers again.
      await store.resetDevice(id);
      const third = await registerOnStore(store, charger('SN-1'), {
        registration: 'open',
        defaultSiteId: other.site_id,
      });
      expect(third).toMatchObject({ kind: 'registered', device: { site_id: site.site_id, secret_gen: 5 } });
      expect(await store.loadDeviceEntry(id)).toMatchObject({ secret_gen: 5, operator_id: site.operator_id });
    });

    it('registers one serial once when registrations race', async () => {
      const outcomes = await Promise.all(
        [1, 2, 3, 4].map(() => registerOnStore(store, charger('SN-RACE'), { registration: 'open' })),
      );
      expect(outcomes.filter((o) => o.kind === 'registered')).toHaveLength(1);
      expect(outcomes.filter((o) => o.kind === 'already_registered')).toHaveLength(3);
      // And once again after a reset: one new generation, not several.
      const device = outcomes.find((o) => o.kind === 'registered')?.device;
      await store.resetDevice(device?.device_id ?? '');
      const again = await Promise.all(
        [1, 2, 3, 4].map(() => registerOnStore(store, charger('SN-RACE'), { registration: 'open' })),
      );
      expect(again.map((o) => o.kind).sort()).toEqual([
        'already_registered',
        'already_registered',
        'already_registered',
        'registered',
      ]);
      expect((await store.getDevice(device?.device_id ?? ''))?.secret_gen).toBe(3);
    });
  });

  describe('tenancy, sites and secrets', () => {
    it('shows a device only to the operators of its site', async () => {
      const a = await operatorWithSite('A');
      const b = await operatorWithSite('B');
      const dev = await registered('SN-1', a.site.site_id);
      const homeless = await registered('SN-2');
      const id = dev.device.device_id;
      expect(await store.getDeviceForOperators(id, [b.op.operator_id, a.op.operator_id])).toMatchObject({
        device_id: id,
        site_id: a.site.site_id,
      });
      expect(await store.getDeviceForOperators(id, [b.op.operator_id])).toBeUndefined();
      expect(await store.getDeviceForOperators(id, [])).toBeUndefined();
      expect(
        await store.getDeviceForOperators(homeless.device.device_id, [a.op.operator_id, b.op.operator_id]),
      ).toBeUndefined();
    });

    it('lists the registered devices of targets within the caller’s operators', async () => {
      const a = await operatorWithSite('A');
      const a2 = await store.createSite({ operator_id: a.op.operator_id, name: 'a2', timezone: 'UTC' });
      const b = await operatorWithSite('B');
      const ids = {
        a1: (await registered('SN-1', a.site.site_id)).device.device_id,
        a1b: (await registered('SN-2', a.site.site_id)).device.device_id,
        a2: (await registered('SN-3', a2.site_id)).device.device_id,
        b: (await registered('SN-4', b.site.site_id)).device.device_id,
        reset: (await registered('SN-5', a.site.site_id)).device.device_id,
      };
      await store.resetDevice(ids.reset);
      const sorted = (xs: string[]) => [...xs].sort();
      const opsA = [a.op.operator_id];
      const A = a.op.operator_id;
      const B = b.op.operator_id;
      /** Each reached device with the operator whose site holds it, in device id order. */
      const reached = (...pairs: Array<[string, string]>) =>
        sorted(pairs.map(([id]) => id)).map((id) => ({
          device_id: id,
          operator_id: pairs.find(([d]) => d === id)![1],
        }));
      expect(await store.listDevicesForTargets(opsA, { type: 'all', ids: [] })).toEqual(
        reached([ids.a1, A], [ids.a1b, A], [ids.a2, A]),
      );
      expect(await store.listDevicesForTargets(opsA, { type: 'site', ids: [a.site.site_id] })).toEqual(
        reached([ids.a1, A], [ids.a1b, A]),
      );
      // Another operator's site is not the caller's to target.
      expect(
        await store.listDevicesForTargets(opsA, { type: 'site', ids: [a2.site_id, b.site.site_id] }),
      ).toEqual(reached([ids.a2, A]));
      expect(await store.listDevicesForTargets(opsA, { type: 'operator', ids: [A, B] })).toEqual(
        reached([ids.a1, A], [ids.a1b, A], [ids.a2, A]),
      );
      expect(await store.listDevicesForTargets([A, B], { type: 'operator', ids: [B] })).toEqual(
        reached([ids.b, B]),
      );
      // An aggregator's `all` reaches both tenants' chargers, each named with its own operator.
      expect(await store.listDevicesForTargets([A, B], { type: 'all', ids: [] })).toEqual(
        reached([ids.a1, A], [ids.a1b, A], [ids.a2, A], [ids.b, B]),
      );
      expect(await store.listDevicesForTargets([], { type: 'all', ids: [] })).toEqual([]);
    });

    it('moves a device to another site, with its tenancy', async () => {
      const a = await operatorWithSite('A');
      const b = await operatorWithSite('B');
      const dev = await registered('SN-1', a.site.site_id);
      const id = dev.device.device_id;
      expect(await store.assignDevice(id, b.site.site_id)).toBe(true);
      expect((await store.getDevice(id))?.site_id).toBe(b.site.site_id);
      expect(await store.loadDeviceEntry(id)).toMatchObject({
        site_id: b.site.site_id,
        operator_id: b.op.operator_id,
      });
      expect(await store.getDeviceForOperators(id, [a.op.operator_id])).toBeUndefined();
      expect(await store.getDeviceForOperators(id, [b.op.operator_id])).toBeDefined();
      expect(await store.countDevicesInSite(a.site.site_id)).toBe(0);
      expect(await store.countDevicesInSite(b.site.site_id)).toBe(1);
      expect(await store.deviceIdsInSite(b.site.site_id)).toEqual([id]);
      expect(await store.assignDevice('dev_missing', b.site.site_id)).toBe(false);
    });

    it('counts and lists the devices of a site in id order', async () => {
      const { site } = await operatorWithSite();
      const ids = [];
      for (const sn of ['SN-1', 'SN-2', 'SN-3'])
        ids.push((await registered(sn, site.site_id)).device.device_id);
      await registered('SN-4');
      expect(await store.countDevicesInSite(site.site_id)).toBe(3);
      expect(await store.deviceIdsInSite(site.site_id)).toEqual(ids.sort());
      expect(await store.countDevicesInSite('site_missing')).toBe(0);
    });

    describe('two-phase secret rotation', () => {
      const GRACE = 24 * 3_600_000;
      const rotate = (id: string) =>
        rotateDeviceSecret({ store, keys: loadOrCreatePlatformKeys(ts.dataDir) }, id, clock, GRACE);
      const pendingOf = async (id: string) => {
        const row = await store.getDevice(id);
        return { sealed: row?.pending_secret_sealed ?? null, since: row?.pending_since_ms ?? null };
      };

      it('creates a pending secret beside the current one and answers the same one again', async () => {
        const { site } = await operatorWithSite();
        const keys = loadOrCreatePlatformKeys(ts.dataDir);
        const dev = await registered('SN-1', site.site_id);
        const id = dev.device.device_id;
        const first = await rotate(id);
        expect(first).toEqual({
          kind: 'pending',
          secret: expect.any(String),
          pending_since_ms: clock,
          created: true,
        });
        if (first?.kind !== 'pending') throw new Error('no pending secret');
        expect(first.secret).not.toBe(dev.secret);
        // The current secret and generation are untouched; the pending one is sealed beside them.
        const row = await store.getDevice(id);
        expect(row).toMatchObject({
          secret_sealed: dev.device.secret_sealed,
          secret_gen: 1,
          pending_since_ms: clock,
        });
        expect(keys.openSecret(row?.pending_secret_sealed ?? '')).toBe(first.secret);
        expect(await store.loadDeviceEntry(id)).toMatchObject({ secret_gen: 1, pending_since_ms: clock });
        const created = clock;
        tick(GRACE - 1);
        expect(await rotate(id)).toEqual({
          kind: 'pending',
          secret: first.secret,
          pending_since_ms: created,
          created: false,
        });
        // Its grace over, a rotation request carries a token of the ended generation.
        tick(1);
        expect(await rotate(id)).toEqual({ kind: 'expired' });
        expect(await rotate('dev_missing')).toBeUndefined();
        await store.resetDevice(id);
        expect(await rotate(id)).toBeUndefined();
      });

      it('promotes the pending secret once, into the next generation; a second promotion answers the same', async () => {
        const dev = await registered('SN-1');
        const id = dev.device.device_id;
        await rotate(id);
        const { sealed } = await pendingOf(id);
        expect(await store.promotePendingSecret(id, sealed ?? '')).toBe(2);
        expect(await store.getDevice(id)).toMatchObject({
          secret_sealed: sealed,
          secret_gen: 2,
          pending_secret_sealed: null,
          pending_since_ms: null,
        });
        expect(await store.loadDeviceEntry(id)).toMatchObject({ secret_gen: 2, pending_since_ms: null });
        // A request that raced the first one finds its secret current.
        expect(await store.promotePendingSecret(id, sealed ?? '')).toBe(2);
        expect((await store.getDevice(id))?.secret_gen).toBe(2);
        // Something else is neither pending nor current.
        expect(await store.promotePendingSecret(id, dev.device.secret_sealed ?? '')).toBeUndefined();
        expect(await store.promotePendingSecret('dev_missing', sealed ?? '')).toBeUndefined();
        // The next rotation starts afresh.
        const next = await rotate(id);
        expect(next).toMatchObject({ kind: 'pending', created: true });
      });

      it('a reset drops the pending secret, and a pending secret does not outlive it', async () => {
        const dev = await registered('SN-1');
        const id = dev.device.device_id;
        await rotate(id);
        const { sealed } = await pendingOf(id);
        expect(await store.resetDevice(id)).toBe(true);
        expect(await pendingOf(id)).toEqual({ sealed: null, since: null });
        expect(await store.promotePendingSecret(id, sealed ?? '')).toBeUndefined();
        const again = await registerOnStore(store, charger('SN-1'), { registration: 'open' });
        expect(again).toMatchObject({
          kind: 'registered',
          device: { pending_secret_sealed: null, pending_since_ms: null, secret_gen: 3 },
        });
      });

      it('promotes exactly the pending secrets created at or before the given time', async () => {
        const a = (await registered('SN-A')).device.device_id;
        const b = (await registered('SN-B')).device.device_id;
        const c = (await registered('SN-C')).device.device_id;
        await rotate(a);
        const aPending = await pendingOf(a);
        tick(1000);
        await rotate(b);
        tick(1000);
        expect(await store.promoteExpiredSecrets(T0 - 1)).toEqual([]);
        expect(await store.promoteExpiredSecrets(T0)).toEqual([a]);
        expect(await store.getDevice(a)).toMatchObject({
          secret_sealed: aPending.sealed,
          secret_gen: 2,
          pending_secret_sealed: null,
          pending_since_ms: null,
        });
        expect(await store.getDevice(b)).toMatchObject({ secret_gen: 1, pending_since_ms: T0 + 1000 });
        expect(await store.promoteExpiredSecrets(T0)).toEqual([]);
        expect(await store.promoteExpiredSecrets(T0 + 5000)).toEqual([b]);
        expect(await store.getDevice(c)).toMatchObject({ secret_gen: 1, pending_secret_sealed: null });
      });
    });
  });

  describe('listing devices', () => {
    /** Six chargers, three online and three offline at `clock`, the online window being WINDOW_MS. */
    async function fleet() {
      const a = await operatorWithSite('A');
      const a2 = await store.createSite({ operator_id: a.op.operator_id, name: 'a2', timezone: 'UTC' });
      const b = await operatorWithSite('B');
      const id = async (sn: string, siteId: string) => (await registered(sn, siteId)).device.device_id;
      const d = {
        seen: await id('SN-seen', a.site.site_id),
        never: await id('SN-never', a.site.site_id),
        stale: await id('SN-stale', a2.site_id),
        goodbye: await id('SN-goodbye', a.site.site_id),
        back: await id('SN-back', a2.site_id),
        beating: await id('SN-beating', a.site.site_id),
        otherOperator: await id('SN-other', b.site.site_id),
      };
      clock = T0 + 3_600_000;
      await store.touchDevices(
        new Map([
          [d.seen, clock - 1_000],
          [d.stale, clock - WINDOW_MS - 1],
          [d.otherOperator, clock],
        ]),
      );
      // Said goodbye and made no request since: offline though seen within the window.
      await store.recordHeartbeat(d.goodbye, { status: 'offline', fault_code: 0, atMs: clock - 2_000 });
      // Said goodbye, then came back with a request: online.
      await store.recordHeartbeat(d.back, { status: 'offline', fault_code: 0, atMs: clock - 5_000 });
      await store.touchDevices(new Map([[d.back, clock - 4_000]]));
      await store.recordHeartbeat(d.beating, { status: 'online', fault_code: 0, atMs: clock - 3_000 });
      return { a, a2, b, d };
    }

    it('filters by the online rule, as the liveness rule decides', async () => {
      const { a, d } = await fleet();
      const since = clock - WINDOW_MS;
      const ops = [a.op.operator_id];
      const ids = async (status?: 'online' | 'offline') =>
        (await store.listDevices(ops, { status, page: 1, size: 100 }, since)).items.map((x) => x.device_id);
      expect(await ids('online')).toEqual([d.seen, d.back, d.beating].sort());
      expect(await ids('offline')).toEqual([d.never, d.stale, d.goodbye].sort());
      const all = (await store.listDevices(ops, { page: 1, size: 100 }, since)).items;
      expect(all.map((x) => x.device_id)).toEqual(Object.values(d).slice(0, 6).sort());
      // The same answer as the rule itself.
      for (const row of all) {
        const online = isOnline(seenStateOfRow(row), clock, WINDOW_MS);
        expect(online, row.sn).toBe([d.seen, d.back, d.beating].includes(row.device_id));
      }
    });

    it('filters by site, pages in id order and counts the total', async () => {
      const { a, a2, b, d } = await fleet();
      const since = clock - WINDOW_MS;
      const ops = [a.op.operator_id, b.op.operator_id];
      const everything = Object.values(d).sort();
      const pages = [];
      for (const page of [1, 2, 3]) pages.push(await store.listDevices(ops, { page, size: 3 }, since));
      expect(pages.map((p) => p.total)).toEqual([7, 7, 7]);
      expect(pages.map((p) => [p.page, p.size])).toEqual([
        [1, 3],
        [2, 3],
        [3, 3],
      ]);
      expect(pages.flatMap((p) => p.items.map((x) => x.device_id))).toEqual(everything);
      expect(await store.listDevices(ops, { page: 9, size: 3 }, since)).toEqual({
        total: 7,
        page: 9,
        size: 3,
        items: [],
      });
      const inA2 = await store.listDevices(ops, { site_id: a2.site_id, page: 1, size: 10 }, since);
      expect(inA2.total).toBe(2);
      expect(inA2.items.map((x) => x.device_id)).toEqual([d.stale, d.back].sort());
      const onlineInA2 = await store.listDevices(
        ops,
        { site_id: a2.site_id, status: 'online', page: 1, size: 10 },
        since,
      );
      expect(onlineInA2.items.map((x) => x.device_id)).toEqual([d.back]);
      expect(onlineInA2.total).toBe(1);
      // Another operator's site filtered by a caller without that operator: nothing.
      expect(
        (await store.listDevices([a.op.operator_id], { site_id: b.site.site_id, page: 1, size: 10 }, since))
          .total,
      ).toBe(0);
      expect(await store.listDevices([], { page: 1, size: 10 }, since)).toEqual({
        total: 0,
        page: 1,
        size: 10,
        items: [],
      });
    });
  });

  describe('telemetry, heartbeats, last seen', () => {
    it('counts new records and ignores exact repeats', async () => {
      const { site } = await operatorWithSite();
      const id = (await registered('SN-1', site.site_id)).device.device_id;
      const batch = [record(1, T0 - 3_000), record(2, T0 - 3_000), record(1, T0 - 2_000)];
      expect(await store.recordTelemetry(id, batch, T0)).toBe(3);
      expect(await store.recordTelemetry(id, batch, T0 + 1)).toBe(0);
      // One new among repeats; a record repeated within a batch is new once.
      const later = record(1, T0 - 1_000);
      expect(await store.recordTelemetry(id, [batch[0]!, later, later, batch[2]!], T0 + 2)).toBe(1);
      // Records of another day (another partition) and far in the past (the default partition).
      expect(
        await store.recordTelemetry(
          id,
          [record(1, T0 - 86_400_000), record(1, Date.UTC(2001, 0, 1))],
          T0 + 3,
        ),
      ).toBe(2);
      expect(await store.recordTelemetry(id, [], T0 + 4)).toBe(0);
    });

    it('stores concurrent uploads of several chargers exactly: each counts what it stored first', async () => {
      const { site } = await operatorWithSite();
      const a = (await registered('SN-A', site.site_id)).device.device_id;
      const b = (await registered('SN-B', site.site_id)).device.device_id;
      const shared = [record(1, T0 - 5_000), record(2, T0 - 5_000)];
      const onlyA = [record(1, T0 - 4_000)];
      const onlyB = [record(1, T0 - 4_500), record(2, T0 - 4_500)];
      // Sent together (on PostgreSQL they go as one statement): A's repeat of its own upload stores nothing.
      const counts = await Promise.all([
        store.recordTelemetry(a, [...shared, ...onlyA], T0),
        store.recordTelemetry(b, [...shared, ...onlyB], T0),
        store.recordTelemetry(a, shared, T0),
        store.recordTelemetry(b, [], T0),
      ]);
      expect(counts).toEqual([3, 4, 0, 0]);
      // Each charger's live state is its own newest record.
      const live = await store.listConnectorsOf([a, b]);
      const at = (d: string, c: number) => live.find((x) => x.device_id === d && x.connector_id === c);
      expect(at(a, 1)?.last_telemetry_ms).toBe(T0 - 4_000);
      expect(at(a, 2)?.last_telemetry_ms).toBe(T0 - 5_000);
      expect(at(b, 1)?.last_telemetry_ms).toBe(T0 - 4_500);
      expect(at(b, 2)?.last_telemetry_ms).toBe(T0 - 4_500);
    });

    it('keeps each connector’s newest record as its live state, even when an older one arrives late', async () => {
      const { site } = await operatorWithSite();
      const id = (
        await registered('SN-1', site.site_id, {
          connectors: [{ connector_id: 1, max_power_kw: 11, v2g_capable: true }],
        })
      ).device.device_id;
      const newest = record(1, T0, {
        state: 'charging',
        power: 9.5,
        voltage: 230,
        current: 41.3,
        energy_delivered: 12.25,
        soc: 64,
        temperature: 31.5,
        phase_details: { l1: { voltage: 230, current: 13.8 } } as TelemetryRecord['phase_details'],
      });
      const expected1 = {
        device_id: id,
        connector_id: 1,
        max_power_kw: 11,
        v2g_capable: true,
        state: 'charging',
        power: 9.5,
        voltage: 230,
        current: 41.3,
        energy_delivered: 12.25,
        soc: 64,
        temperature: 31.5,
        last_telemetry_ms: T0,
      };
      // Within one batch, the newest wins whatever the order.
      expect(
        await store.recordTelemetry(id, [newest, record(1, T0 - 5_000, { state: 'idle', power: 0 })], T0),
      ).toBe(2);
      expect(await store.getConnector(id, 1)).toEqual(expected1);
      // Late: stored, but not the live state.
      expect(
        await store.recordTelemetry(id, [record(1, T0 - 1_000, { state: 'idle', power: 0 })], T0 + 1),
      ).toBe(1);
      expect(await store.getConnector(id, 1)).toEqual(expected1);
      // Newer: the live state moves; a value the record leaves out is null.
      expect(
        await store.recordTelemetry(id, [record(1, T0 + 1_000, { state: 'idle', power: 0 })], T0 + 2),
      ).toBe(1);
      expect(await store.getConnector(id, 1)).toEqual({
        ...expected1,
        state: 'idle',
        power: 0,
        voltage: null,
        current: null,
        energy_delivered: null,
        soc: null,
        temperature: null,
        last_telemetry_ms: T0 + 1_000,
      });
    });

    it('learns connectors from telemetry and lists the connectors of several devices', async () => {
      const { site } = await operatorWithSite();
      const a = (await registered('SN-1', site.site_id)).device.device_id;
      const b = (
        await registered('SN-2', site.site_id, {
          connectors: [{ connector_id: 2, max_power_kw: 50, v2g_capable: false }],
        })
      ).device.device_id;
      await store.recordTelemetry(a, [record(3, T0, { state: 'idle', power: 0 }), record(1, T0)], T0);
      await store.recordTelemetry(b, [record(1, T0 - 10)], T0);
      expect(await store.getConnector(a, 3)).toEqual({
        device_id: a,
        connector_id: 3,
        max_power_kw: null,
        v2g_capable: false,
        state: 'idle',
        power: 0,
        voltage: null,
        current: null,
        energy_delivered: null,
        soc: null,
        temperature: null,
        last_telemetry_ms: T0,
      });
      expect(await store.getConnector(a, 2)).toBeUndefined();
      expect((await store.listConnectors(a)).map((c) => c.connector_id)).toEqual([1, 3]);
      const both = await store.listConnectorsOf([b, a]);
      const key = (x: string, n: number) => `${x}/${n}`;
      const expectedKeys = [key(a, 1), key(a, 3), key(b, 1), key(b, 2)].sort((x, y) => {
        const [dx, cx] = x.split('/');
        const [dy, cy] = y.split('/');
        return dx === dy ? Number(cx) - Number(cy) : (dx ?? '') < (dy ?? '') ? -1 : 1;
      });
      expect(both.map((c) => key(c.device_id, c.connector_id))).toEqual(expectedKeys);
      expect(both.find((c) => c.device_id === b && c.connector_id === 2)).toMatchObject({
        max_power_kw: 50,
        state: null,
        last_telemetry_ms: null,
      });
      expect(await store.listConnectorsOf([])).toEqual([]);
    });

    it('records heartbeats; last seen only moves forward', async () => {
      const { site } = await operatorWithSite();
      const id = (await registered('SN-1', site.site_id)).device.device_id;
      await store.recordHeartbeat(id, { status: 'fault', fault_code: 42, atMs: T0 });
      expect(await store.getDevice(id)).toMatchObject({
        last_heartbeat_ms: T0,
        last_seen_ms: T0,
        reported_status: 'fault',
        fault_code: 42,
      });
      await store.touchDevices(new Map([[id, T0 + 5_000]]));
      // An older heartbeat (handled late) is the last heartbeat, but does not move last seen back.
      await store.recordHeartbeat(id, { status: 'online', fault_code: 0, atMs: T0 + 1_000 });
      expect(await store.getDevice(id)).toMatchObject({
        last_heartbeat_ms: T0 + 1_000,
        last_seen_ms: T0 + 5_000,
        reported_status: 'online',
        fault_code: 0,
      });
    });

    it('touches many devices at once, never moving last seen back', async () => {
      const { site } = await operatorWithSite();
      const a = (await registered('SN-1', site.site_id)).device.device_id;
      const b = (await registered('SN-2', site.site_id)).device.device_id;
      const c = (await registered('SN-3', site.site_id)).device.device_id;
      await store.touchDevices(
        new Map([
          [a, T0 + 10],
          [b, T0 + 20],
          ['dev_missing', T0],
        ]),
      );
      await store.touchDevices(
        new Map([
          [a, T0 + 5],
          [b, T0 + 30],
        ]),
      );
      await store.touchDevices(new Map());
      const seen = async (x: string) => (await store.getDevice(x))?.last_seen_ms;
      expect([await seen(a), await seen(b), await seen(c)]).toEqual([T0 + 10, T0 + 30, null]);
    });
  });
});

describe('PostgreSQL only', () => {
  let ts: TestStore | undefined;
  afterEach(async () => {
    await ts?.close();
    ts = undefined;
  });

  it('stores phase details as JSON', async () => {
    ts = await openTestStore('postgres', { now: () => T0 });
    const op = await ts.store.createOperator('A');
    const site = await ts.store.createSite({ operator_id: op.operator_id, name: 's', timezone: 'UTC' });
    const reg = await registerOnStore(ts.store, charger('SN-1'), {
      registration: 'open',
      defaultSiteId: site.site_id,
    });
    if (reg.kind !== 'registered') throw new Error(reg.kind);
    const phases = { l1: { voltage: 230, current: 10 } } as TelemetryRecord['phase_details'];
    await ts.store.recordTelemetry(
      reg.device.device_id,
      [record(1, T0, { phase_details: phases }), record(1, T0 + 1)],
      T0,
    );
    const client = new pg.Client({ connectionString: ts.databaseUrl });
    await client.connect();
    try {
      const { rows } = await client.query(
        `SELECT ts_ms::float8 AS ts_ms, jsonb_typeof(phase_details) AS kind, phase_details, received_ms::float8 AS received_ms
         FROM telemetry ORDER BY ts_ms`,
      );
      expect(rows).toEqual([
        { ts_ms: T0, kind: 'object', phase_details: phases, received_ms: T0 },
        { ts_ms: T0 + 1, kind: null, phase_details: null, received_ms: T0 },
      ]);
    } finally {
      await client.end();
    }
  });

  it('an admin change made through another store bumps a server store’s external change version', async () => {
    ts = await openTestStore('postgres', { server: true });
    const server = ts.store;
    const admin = await createPostgresStore(ts.databaseUrl ?? '');
    try {
      const op = await admin.createOperator('A');
      const bumped = async (change: () => Promise<unknown>) => {
        const before = server.externalChangeVersion();
        await change();
        await expect
          .poll(() => server.externalChangeVersion(), { timeout: 5_000, interval: 20 })
          .toBeGreaterThan(before);
      };
      await bumped(() =>
        createClientOf(
          { store: admin, dataDir: ts!.dataDir },
          { operator_ids: [op.operator_id], scopes: ['read'] },
        ),
      );
      let deviceId = '';
      await bumped(async () => {
        const reg = await registerOnStore(admin, charger('SN-1'), { registration: 'open' });
        if (reg.kind !== 'registered') throw new Error(reg.kind);
        deviceId = reg.device.device_id;
      });
      await bumped(() => admin.setRequireSignature('device', deviceId, true));
      await bumped(() =>
        rotateDeviceSecret(
          { store: admin, keys: loadOrCreatePlatformKeys(ts!.dataDir) },
          deviceId,
          Date.now(),
          86_400_000,
        ),
      );
      await bumped(() => admin.resetDevice(deviceId));
      // The admin store itself does not listen.
      expect(admin.externalChangeVersion()).toBe(0);
    } finally {
      await admin.close();
    }
  });
});
