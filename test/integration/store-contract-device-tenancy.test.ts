import { describe, expect, it } from 'vitest';
import { rotateDeviceSecret } from '../../platform/services/device-secret-service.js';
import { loadOrCreatePlatformKeys } from '../../platform/storage/platform-keys.js';
import { BACKENDS } from '../helpers/backends.js';
import { charger, chargersOnStore, T0 } from '../helpers/chargers-on-store.js';
import { registerOnStore } from '../helpers/sealed-writes.js';

/**
 * The repository contract of a device's tenancy (its site and operators) and of its two-phase secret
 * rotation: the same cases on every backend, so that PostgreSQL behaves exactly as SQLite does.
 */

describe.each(BACKENDS)('store contract: directory, devices, telemetry (%s)', (backend) => {
  const ctx = chargersOnStore(backend);
  const { tick, operatorWithSite, registered } = ctx;

  describe('tenancy, sites and secrets', () => {
    it('shows a device only to the operators of its site', async () => {
      const a = await operatorWithSite('A');
      const b = await operatorWithSite('B');
      const dev = await registered('SN-1', a.site.site_id);
      const homeless = await registered('SN-2');
      const id = dev.device.device_id;
      expect(await ctx.store.getDeviceForOperators(id, [b.op.operator_id, a.op.operator_id])).toMatchObject({
        device_id: id,
        site_id: a.site.site_id,
      });
      expect(await ctx.store.getDeviceForOperators(id, [b.op.operator_id])).toBeUndefined();
      expect(await ctx.store.getDeviceForOperators(id, [])).toBeUndefined();
      expect(
        await ctx.store.getDeviceForOperators(homeless.device.device_id, [
          a.op.operator_id,
          b.op.operator_id,
        ]),
      ).toBeUndefined();
    });

    it('lists the registered devices of targets within the caller’s operators', async () => {
      const a = await operatorWithSite('A');
      const a2 = await ctx.store.createSite({ operator_id: a.op.operator_id, name: 'a2', timezone: 'UTC' });
      const b = await operatorWithSite('B');
      const ids = {
        a1: (await registered('SN-1', a.site.site_id)).device.device_id,
        a1b: (await registered('SN-2', a.site.site_id)).device.device_id,
        a2: (await registered('SN-3', a2.site_id)).device.device_id,
        b: (await registered('SN-4', b.site.site_id)).device.device_id,
        reset: (await registered('SN-5', a.site.site_id)).device.device_id,
      };
      await ctx.store.resetDevice(ids.reset);
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
      expect(await ctx.store.listDevicesForTargets(opsA, { type: 'all', ids: [] })).toEqual(
        reached([ids.a1, A], [ids.a1b, A], [ids.a2, A]),
      );
      expect(await ctx.store.listDevicesForTargets(opsA, { type: 'site', ids: [a.site.site_id] })).toEqual(
        reached([ids.a1, A], [ids.a1b, A]),
      );
      // Another operator's site is not the caller's to target.
      expect(
        await ctx.store.listDevicesForTargets(opsA, { type: 'site', ids: [a2.site_id, b.site.site_id] }),
      ).toEqual(reached([ids.a2, A]));
      expect(await ctx.store.listDevicesForTargets(opsA, { type: 'operator', ids: [A, B] })).toEqual(
        reached([ids.a1, A], [ids.a1b, A], [ids.a2, A]),
      );
      expect(await ctx.store.listDevicesForTargets([A, B], { type: 'operator', ids: [B] })).toEqual(
        reached([ids.b, B]),
      );
      // An aggregator's `all` reaches both tenants' chargers, each named with its own operator.
      expect(await ctx.store.listDevicesForTargets([A, B], { type: 'all', ids: [] })).toEqual(
        reached([ids.a1, A], [ids.a1b, A], [ids.a2, A], [ids.b, B]),
      );
      expect(await ctx.store.listDevicesForTargets([], { type: 'all', ids: [] })).toEqual([]);
    });

    it('moves a device to another site, with its tenancy', async () => {
      const a = await operatorWithSite('A');
      const b = await operatorWithSite('B');
      const dev = await registered('SN-1', a.site.site_id);
      const id = dev.device.device_id;
      expect(await ctx.store.assignDevice(id, b.site.site_id)).toBe(true);
      expect((await ctx.store.getDevice(id))?.site_id).toBe(b.site.site_id);
      expect(await ctx.store.loadDeviceEntry(id)).toMatchObject({
        site_id: b.site.site_id,
        operator_id: b.op.operator_id,
      });
      expect(await ctx.store.getDeviceForOperators(id, [a.op.operator_id])).toBeUndefined();
      expect(await ctx.store.getDeviceForOperators(id, [b.op.operator_id])).toBeDefined();
      expect(await ctx.store.countDevicesInSite(a.site.site_id)).toBe(0);
      expect(await ctx.store.countDevicesInSite(b.site.site_id)).toBe(1);
      expect(await ctx.store.deviceIdsInSite(b.site.site_id)).toEqual([id]);
      expect(await ctx.store.assignDevice('dev_missing', b.site.site_id)).toBe(false);
    });

    it('counts and lists the devices of a site in id order', async () => {
      const { site } = await operatorWithSite();
      const ids = [];
      for (const sn of ['SN-1', 'SN-2', 'SN-3'])
        ids.push((await registered(sn, site.site_id)).device.device_id);
      await registered('SN-4');
      expect(await ctx.store.countDevicesInSite(site.site_id)).toBe(3);
      expect(await ctx.store.deviceIdsInSite(site.site_id)).toEqual(ids.sort());
      expect(await ctx.store.countDevicesInSite('site_missing')).toBe(0);
    });

    describe('two-phase secret rotation', () => {
      const GRACE = 24 * 3_600_000;
      const rotate = (id: string) =>
        rotateDeviceSecret(
          { store: ctx.store, keys: loadOrCreatePlatformKeys(ctx.dataDir) },
          id,
          ctx.now(),
          GRACE,
        );
      const pendingOf = async (id: string) => {
        const row = await ctx.store.getDevice(id);
        return { sealed: row?.pending_secret_sealed ?? null, since: row?.pending_since_ms ?? null };
      };

      it('creates a pending secret beside the current one and answers the same one again', async () => {
        const { site } = await operatorWithSite();
        const keys = loadOrCreatePlatformKeys(ctx.dataDir);
        const dev = await registered('SN-1', site.site_id);
        const id = dev.device.device_id;
        const first = await rotate(id);
        expect(first).toEqual({
          kind: 'pending',
          secret: expect.any(String),
          pending_since_ms: ctx.now(),
          created: true,
        });
        if (first?.kind !== 'pending') throw new Error('no pending secret');
        expect(first.secret).not.toBe(dev.secret);
        // The current secret and generation are untouched; the pending one is sealed beside them.
        const row = await ctx.store.getDevice(id);
        expect(row).toMatchObject({
          secret_sealed: dev.device.secret_sealed,
          secret_gen: 1,
          pending_since_ms: ctx.now(),
        });
        expect(keys.openSecret(row?.pending_secret_sealed ?? '')).toBe(first.secret);
        expect(await ctx.store.loadDeviceEntry(id)).toMatchObject({
          secret_gen: 1,
          pending_since_ms: ctx.now(),
        });
        const created = ctx.now();
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
        await ctx.store.resetDevice(id);
        expect(await rotate(id)).toBeUndefined();
      });

      it('promotes the pending secret once, into the next generation; a second promotion answers the same', async () => {
        const dev = await registered('SN-1');
        const id = dev.device.device_id;
        await rotate(id);
        const { sealed } = await pendingOf(id);
        expect(await ctx.store.promotePendingSecret(id, sealed ?? '')).toBe(2);
        expect(await ctx.store.getDevice(id)).toMatchObject({
          secret_sealed: sealed,
          secret_gen: 2,
          pending_secret_sealed: null,
          pending_since_ms: null,
        });
        expect(await ctx.store.loadDeviceEntry(id)).toMatchObject({ secret_gen: 2, pending_since_ms: null });
        // A request that raced the first one finds its secret current.
        expect(await ctx.store.promotePendingSecret(id, sealed ?? '')).toBe(2);
        expect((await ctx.store.getDevice(id))?.secret_gen).toBe(2);
        // Something else is neither pending nor current.
        expect(await ctx.store.promotePendingSecret(id, dev.device.secret_sealed ?? '')).toBeUndefined();
        expect(await ctx.store.promotePendingSecret('dev_missing', sealed ?? '')).toBeUndefined();
        // The next rotation starts afresh.
        const next = await rotate(id);
        expect(next).toMatchObject({ kind: 'pending', created: true });
      });

      it('a reset drops the pending secret, and a pending secret does not outlive it', async () => {
        const dev = await registered('SN-1');
        const id = dev.device.device_id;
        await rotate(id);
        const { sealed } = await pendingOf(id);
        expect(await ctx.store.resetDevice(id)).toBe(true);
        expect(await pendingOf(id)).toEqual({ sealed: null, since: null });
        expect(await ctx.store.promotePendingSecret(id, sealed ?? '')).toBeUndefined();
        const again = await registerOnStore(ctx.store, charger('SN-1'), { registration: 'open' });
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
        expect(await ctx.store.promoteExpiredSecrets(T0 - 1)).toEqual([]);
        expect(await ctx.store.promoteExpiredSecrets(T0)).toEqual([a]);
        expect(await ctx.store.getDevice(a)).toMatchObject({
          secret_sealed: aPending.sealed,
          secret_gen: 2,
          pending_secret_sealed: null,
          pending_since_ms: null,
        });
        expect(await ctx.store.getDevice(b)).toMatchObject({ secret_gen: 1, pending_since_ms: T0 + 1000 });
        expect(await ctx.store.promoteExpiredSecrets(T0)).toEqual([]);
        expect(await ctx.store.promoteExpiredSecrets(T0 + 5000)).toEqual([b]);
        expect(await ctx.store.getDevice(c)).toMatchObject({ secret_gen: 1, pending_secret_sealed: null });
      });
    });
  });
});
