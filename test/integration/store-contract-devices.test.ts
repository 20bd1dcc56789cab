import { describe, expect, it } from 'vitest';
import { isOnline, seenStateOfRow } from '../../platform/domain/liveness-rule.js';
import { loadOrCreatePlatformKeys } from '../../platform/storage/platform-keys.js';
import type { DeviceRow } from '../../platform/storage/store.js';
import { BACKENDS } from '../helpers/backends.js';
import { charger, chargersOnStore, T0, WINDOW_MS } from '../helpers/chargers-on-store.js';
import { registerOnStore } from '../helpers/sealed-writes.js';

/**
 * The repository contract of devices, their registration and their listing: the same cases on every
 * backend, so that PostgreSQL behaves exactly as SQLite does. Operators, sites, clients and the principal
 * directory are in store-contract-directory, tenancy and secrets in store-contract-device-tenancy, telemetry in
 * store-contract-telemetry.
 */

describe.each(BACKENDS)('store contract: directory, devices, telemetry (%s)', (backend) => {
  const ctx = chargersOnStore(backend);
  const { operatorWithSite, registered } = ctx;

  describe('registration', () => {
    it('registers any serial when open, with its site, secret and declared connectors', async () => {
      const { site } = await operatorWithSite();
      const keys = loadOrCreatePlatformKeys(ctx.dataDir);
      const out = await registerOnStore(
        ctx.store,
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
      expect(await ctx.store.getDevice(out.device.device_id)).toMatchObject({
        ...expected,
        device_id: out.device.device_id,
      });
      expect(await ctx.store.getDevice('dev_missing')).toBeUndefined();
      const connectors = await ctx.store.listConnectors(out.device.device_id);
      expect(connectors.map((c) => [c.connector_id, c.max_power_kw, c.v2g_capable, c.state])).toEqual([
        [1, 11.5, true, null],
        [2, 22, false, null],
      ]);
    });

    it('refuses serials off the allowlist, and a serial that is registered', async () => {
      const policy = { registration: 'allowlist' as const };
      expect(await registerOnStore(ctx.store, charger('SN-1'), policy)).toEqual({ kind: 'not_allowed' });
      await ctx.store.allowSerial('SN-1');
      await ctx.store.allowSerial('SN-1');
      const first = await registerOnStore(ctx.store, charger('SN-1'), policy);
      expect(first.kind).toBe('registered');
      expect(await registerOnStore(ctx.store, charger('SN-1'), policy)).toEqual({
        kind: 'already_registered',
      });
      expect(await registerOnStore(ctx.store, charger('SN-1'), { registration: 'open' })).toEqual({
        kind: 'already_registered',
      });
      expect(await registerOnStore(ctx.store, charger('SN-2'), policy)).toEqual({ kind: 'not_allowed' });
    });

    it('registers a reset charger again under its id, with a new generation and secret', async () => {
      const { site } = await operatorWithSite();
      const other = await ctx.store.createSite({
        operator_id: site.operator_id,
        name: 'other',
        timezone: 'UTC',
      });
      const first = await registered('SN-1', undefined, {
        connectors: [{ connector_id: 1, max_power_kw: 11, v2g_capable: false }],
      });
      const id = first.device.device_id;
      expect(await ctx.store.resetDevice(id)).toBe(true);
      expect(await ctx.store.getDevice(id)).toMatchObject({
        registered: false,
        secret_sealed: null,
        secret_gen: 2,
      });
      expect(await ctx.store.resetDevice('dev_missing')).toBe(false);
      const again = await registerOnStore(
        ctx.store,
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
      expect(await ctx.store.listConnectors(id)).toMatchObject([
        { connector_id: 1, max_power_kw: 22, v2g_capable: true },
      ]);
      // A charger that has a site keeps it when it registers again.
      await ctx.store.resetDevice(id);
      const third = await registerOnStore(ctx.store, charger('SN-1'), {
        registration: 'open',
        defaultSiteId: other.site_id,
      });
      expect(third).toMatchObject({ kind: 'registered', device: { site_id: site.site_id, secret_gen: 5 } });
      expect(await ctx.store.loadDeviceEntry(id)).toMatchObject({
        secret_gen: 5,
        operator_id: site.operator_id,
      });
    });

    it('registers one serial once when registrations race', async () => {
      const outcomes = await Promise.all(
        [1, 2, 3, 4].map(() => registerOnStore(ctx.store, charger('SN-RACE'), { registration: 'open' })),
      );
      expect(outcomes.filter((o) => o.kind === 'registered')).toHaveLength(1);
      expect(outcomes.filter((o) => o.kind === 'already_registered')).toHaveLength(3);
      // And once again after a reset: one new generation, not several.
      const device = outcomes.find((o) => o.kind === 'registered')?.device;
      await ctx.store.resetDevice(device?.device_id ?? '');
      const again = await Promise.all(
        [1, 2, 3, 4].map(() => registerOnStore(ctx.store, charger('SN-RACE'), { registration: 'open' })),
      );
      expect(again.map((o) => o.kind).sort()).toEqual([
        'already_registered',
        'already_registered',
        'already_registered',
        'registered',
      ]);
      expect((await ctx.store.getDevice(device?.device_id ?? ''))?.secret_gen).toBe(3);
    });
  });

  describe('listing devices', () => {
    /** Six chargers, three online and three offline at `ctx.now()`, the online window being WINDOW_MS. */
    async function fleet() {
      const a = await operatorWithSite('A');
      const a2 = await ctx.store.createSite({ operator_id: a.op.operator_id, name: 'a2', timezone: 'UTC' });
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
      ctx.tick(T0 + 3_600_000 - ctx.now());
      await ctx.store.touchDevices(
        new Map([
          [d.seen, ctx.now() - 1_000],
          [d.stale, ctx.now() - WINDOW_MS - 1],
          [d.otherOperator, ctx.now()],
        ]),
      );
      // Said goodbye and made no request since: offline though seen within the window.
      await ctx.store.recordHeartbeat(d.goodbye, {
        status: 'offline',
        fault_code: 0,
        atMs: ctx.now() - 2_000,
      });
      // Said goodbye, then came back with a request: online.
      await ctx.store.recordHeartbeat(d.back, { status: 'offline', fault_code: 0, atMs: ctx.now() - 5_000 });
      await ctx.store.touchDevices(new Map([[d.back, ctx.now() - 4_000]]));
      await ctx.store.recordHeartbeat(d.beating, {
        status: 'online',
        fault_code: 0,
        atMs: ctx.now() - 3_000,
      });
      return { a, a2, b, d };
    }

    it('filters by the online rule, as the liveness rule decides', async () => {
      const { a, d } = await fleet();
      const since = ctx.now() - WINDOW_MS;
      const ops = [a.op.operator_id];
      const ids = async (status?: 'online' | 'offline') =>
        (await ctx.store.listDevices(ops, { status, page: 1, size: 100 }, since)).items.map(
          (x) => x.device_id,
        );
      expect(await ids('online')).toEqual([d.seen, d.back, d.beating].sort());
      expect(await ids('offline')).toEqual([d.never, d.stale, d.goodbye].sort());
      const all = (await ctx.store.listDevices(ops, { page: 1, size: 100 }, since)).items;
      expect(all.map((x) => x.device_id)).toEqual(Object.values(d).slice(0, 6).sort());
      // The same answer as the rule itself.
      for (const row of all) {
        const online = isOnline(seenStateOfRow(row), ctx.now(), WINDOW_MS);
        expect(online, row.sn).toBe([d.seen, d.back, d.beating].includes(row.device_id));
      }
    });

    it('filters by site, pages in id order and counts the total', async () => {
      const { a, a2, b, d } = await fleet();
      const since = ctx.now() - WINDOW_MS;
      const ops = [a.op.operator_id, b.op.operator_id];
      const everything = Object.values(d).sort();
      const pages = [];
      for (const page of [1, 2, 3]) pages.push(await ctx.store.listDevices(ops, { page, size: 3 }, since));
      expect(pages.map((p) => p.total)).toEqual([7, 7, 7]);
      expect(pages.map((p) => [p.page, p.size])).toEqual([
        [1, 3],
        [2, 3],
        [3, 3],
      ]);
      expect(pages.flatMap((p) => p.items.map((x) => x.device_id))).toEqual(everything);
      expect(await ctx.store.listDevices(ops, { page: 9, size: 3 }, since)).toEqual({
        total: 7,
        page: 9,
        size: 3,
        items: [],
      });
      const inA2 = await ctx.store.listDevices(ops, { site_id: a2.site_id, page: 1, size: 10 }, since);
      expect(inA2.total).toBe(2);
      expect(inA2.items.map((x) => x.device_id)).toEqual([d.stale, d.back].sort());
      const onlineInA2 = await ctx.store.listDevices(
        ops,
        { site_id: a2.site_id, status: 'online', page: 1, size: 10 },
        since,
      );
      expect(onlineInA2.items.map((x) => x.device_id)).toEqual([d.back]);
      expect(onlineInA2.total).toBe(1);
      // Another operator's site filtered by a caller without that operator: nothing.
      expect(
        (
          await ctx.store.listDevices(
            [a.op.operator_id],
            { site_id: b.site.site_id, page: 1, size: 10 },
            since,
          )
        ).total,
      ).toBe(0);
      expect(await ctx.store.listDevices([], { page: 1, size: 10 }, since)).toEqual({
        total: 0,
        page: 1,
        size: 10,
        items: [],
      });
    });
  });
});
