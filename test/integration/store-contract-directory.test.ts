import { afterEach, describe, expect, it } from 'vitest';
import { rotateDeviceSecret } from '../../platform/services/device-secret-service.js';
import { createPostgresStore } from '../../platform/storage/backends.js';
import { loadOrCreatePlatformKeys } from '../../platform/storage/platform-keys.js';
import { BACKENDS, openTestStore, type TestStore } from '../helpers/backends.js';
import { charger, chargersOnStore } from '../helpers/chargers-on-store.js';
import { createClientOf, registerOnStore } from '../helpers/sealed-writes.js';

/**
 * The repository contract of operators, sites, clients, settings and the principal directory: the same
 * cases on every backend, so that PostgreSQL behaves exactly as SQLite does. Devices are in
 * store-contract-devices and -device-tenancy, telemetry in store-contract-telemetry.
 */

describe.each(BACKENDS)('store contract: directory, devices, telemetry (%s)', (backend) => {
  const ctx = chargersOnStore(backend);
  const { tick, operatorWithSite, registered } = ctx;

  describe('operators, sites, clients, settings', () => {
    it('creates, gets and lists operators in creation order', async () => {
      const b = await ctx.store.createOperator('B');
      tick();
      const a = await ctx.store.createOperator('A');
      expect(b).toEqual({ operator_id: expect.stringMatching(/^op_/), name: 'B' });
      expect(await ctx.store.getOperator(a.operator_id)).toEqual(a);
      expect(await ctx.store.getOperator('op_missing')).toBeUndefined();
      expect(await ctx.store.listOperators()).toEqual([b, a]);
    });

    it('creates, gets and lists sites, all or of one operator, in creation order', async () => {
      const a = await ctx.store.createOperator('A');
      const b = await ctx.store.createOperator('B');
      const s1 = await ctx.store.createSite({
        operator_id: a.operator_id,
        name: 'one',
        timezone: 'Europe/Oslo',
      });
      tick();
      const s2 = await ctx.store.createSite({ operator_id: b.operator_id, name: 'two', timezone: 'UTC' });
      tick();
      const s3 = await ctx.store.createSite({
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
      expect(await ctx.store.getSite('site_given')).toEqual(s3);
      expect(await ctx.store.getSite('site_missing')).toBeUndefined();
      expect(await ctx.store.listSites()).toEqual([s1, s2, s3]);
      expect(await ctx.store.listSites(a.operator_id)).toEqual([s1, s3]);
      expect(await ctx.store.listSites(b.operator_id)).toEqual([s2]);
    });

    it('pages the sites of several operators with their device counts', async () => {
      const a = await ctx.store.createOperator('A');
      const b = await ctx.store.createOperator('B');
      const c = await ctx.store.createOperator('C');
      const sites = [];
      for (const [i, op] of [a, b, a, c, a].entries()) {
        sites.push(
          await ctx.store.createSite({ operator_id: op.operator_id, name: `s${i}`, timezone: 'UTC' }),
        );
        tick();
      }
      await registered('SN-1', sites[0]!.site_id);
      await registered('SN-2', sites[0]!.site_id);
      await registered('SN-3', sites[2]!.site_id);
      await registered('SN-4', sites[3]!.site_id);
      const ops = [a.operator_id, b.operator_id];
      const p1 = await ctx.store.listSitesFor(ops, 1, 3);
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
      expect(await ctx.store.listSitesFor(ops, 2, 3)).toEqual({
        total: 4,
        page: 2,
        size: 3,
        items: [{ ...sites[4], device_count: 0 }],
      });
      expect(await ctx.store.listSitesFor(ops, 5, 3)).toEqual({ total: 4, page: 5, size: 3, items: [] });
      expect(await ctx.store.listSitesFor([], 1, 3)).toEqual({ total: 0, page: 1, size: 3, items: [] });
      expect((await ctx.store.listSitesFor([c.operator_id], 1, 10)).items).toEqual([
        { ...sites[3], device_count: 1 },
      ]);
    });

    it('creates clients with a sealed secret, distinct operators and their scopes', async () => {
      const a = await ctx.store.createOperator('A');
      const b = await ctx.store.createOperator('B');
      const keys = loadOrCreatePlatformKeys(ctx.dataDir);
      const { client, secret } = await createClientOf(ctx, {
        operator_ids: [b.operator_id, a.operator_id, b.operator_id],
        scopes: ['read', 'write'],
      });
      expect(client.client_id).toMatch(/^cli_/);
      expect(client.secret_sealed).not.toContain(secret);
      expect(keys.openSecret(client.secret_sealed)).toBe(secret);
      expect(client.operator_ids.sort()).toEqual([a.operator_id, b.operator_id].sort());
      expect(await ctx.store.getClient(client.client_id)).toEqual({
        client_id: client.client_id,
        secret_sealed: client.secret_sealed,
        scopes: ['read', 'write'],
        operator_ids: [a.operator_id, b.operator_id].sort(),
        status: 'active',
        secret_gen: 1,
        previous_secret_sealed: null,
        previous_secret_until_ms: null,
      });
      expect(await ctx.store.getClient('cli_missing')).toBeUndefined();
    });

    it('keeps settings, the last value winning', async () => {
      expect(await ctx.store.getSetting('k')).toBeUndefined();
      await ctx.store.setSetting('k', 'one');
      await ctx.store.setSetting('other', 'x');
      await ctx.store.setSetting('k', 'two');
      expect(await ctx.store.getSetting('k')).toBe('two');
      expect(await ctx.store.getSetting('other')).toBe('x');
    });
  });

  describe('principal directory', () => {
    it('loads every device and client, and one of each, with tenancy and signing', async () => {
      const { op, site } = await operatorWithSite();
      const other = await ctx.store.createOperator('B');
      const inSite = await registered('SN-1', site.site_id);
      const homeless = await registered('SN-2');
      const { client } = await createClientOf(ctx, {
        operator_ids: [other.operator_id, op.operator_id],
        scopes: ['read'],
      });
      const { client: lonely } = await createClientOf(ctx, { operator_ids: [], scopes: ['read'] });
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
      const all = await ctx.store.loadDirectory();
      const byId = <T extends { device_id?: string; client_id?: string }>(x: T, y: T) =>
        (x.device_id ?? x.client_id ?? '') < (y.device_id ?? y.client_id ?? '') ? -1 : 1;
      expect(all.devices.sort(byId)).toEqual([deviceEntry, homelessEntry].sort(byId));
      expect(all.clients.map((c) => ({ ...c, operator_ids: [...c.operator_ids].sort() })).sort(byId)).toEqual(
        [clientEntry, lonelyEntry].sort(byId),
      );
      expect(await ctx.store.loadDeviceEntry(inSite.device.device_id)).toEqual(deviceEntry);
      expect(await ctx.store.loadDeviceEntry('dev_missing')).toBeUndefined();
      expect(await ctx.store.loadClientEntry(client.client_id)).toEqual(clientEntry);
      expect(await ctx.store.loadClientEntry('cli_missing')).toBeUndefined();
    });

    it('sets and clears required signatures of clients and devices', async () => {
      const { op, site } = await operatorWithSite();
      const dev = await registered('SN-1', site.site_id);
      const { client } = await createClientOf(ctx, { operator_ids: [op.operator_id], scopes: ['read'] });
      expect(await ctx.store.setRequireSignature('client', client.client_id, true)).toBe(true);
      expect(await ctx.store.setRequireSignature('device', dev.device.device_id, true)).toBe(true);
      expect((await ctx.store.loadClientEntry(client.client_id))?.require_signature).toBe(true);
      expect((await ctx.store.loadDeviceEntry(dev.device.device_id))?.require_signature).toBe(true);
      const all = await ctx.store.loadDirectory();
      expect(all.clients.find((c) => c.client_id === client.client_id)?.require_signature).toBe(true);
      expect(all.devices.find((d) => d.device_id === dev.device.device_id)?.require_signature).toBe(true);
      expect(await ctx.store.setRequireSignature('device', dev.device.device_id, false)).toBe(true);
      expect((await ctx.store.loadDeviceEntry(dev.device.device_id))?.require_signature).toBe(false);
      expect((await ctx.store.loadClientEntry(client.client_id))?.require_signature).toBe(true);
      expect(await ctx.store.setRequireSignature('client', 'cli_missing', true)).toBe(false);
      expect(await ctx.store.setRequireSignature('device', 'dev_missing', true)).toBe(false);
    });
  });
});

describe('PostgreSQL only', () => {
  let ts: TestStore | undefined;
  afterEach(async () => {
    await ts?.close();
    ts = undefined;
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
