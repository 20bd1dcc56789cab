import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import type { TelemetryRecord } from '../../shared/index.js';
import { BACKENDS, openTestStore, type TestStore } from '../helpers/backends.js';
import { charger, chargersOnStore, record, T0 } from '../helpers/chargers-on-store.js';
import { registerOnStore } from '../helpers/sealed-writes.js';

/**
 * The repository contract of telemetry, heartbeats and last seen: the same cases on every backend, so that
 * PostgreSQL behaves exactly as SQLite does.
 */

describe.each(BACKENDS)('store contract: directory, devices, telemetry (%s)', (backend) => {
  const ctx = chargersOnStore(backend);
  const { operatorWithSite, registered } = ctx;

  describe('telemetry, heartbeats, last seen', () => {
    it('counts new records and ignores exact repeats', async () => {
      const { site } = await operatorWithSite();
      const id = (await registered('SN-1', site.site_id)).device.device_id;
      const batch = [record(1, T0 - 3_000), record(2, T0 - 3_000), record(1, T0 - 2_000)];
      expect(await ctx.store.recordTelemetry(id, batch, T0)).toBe(3);
      expect(await ctx.store.recordTelemetry(id, batch, T0 + 1)).toBe(0);
      // One new among repeats; a record repeated within a batch is new once.
      const later = record(1, T0 - 1_000);
      expect(await ctx.store.recordTelemetry(id, [batch[0]!, later, later, batch[2]!], T0 + 2)).toBe(1);
      // Records of another day (another partition) and far in the past (the default partition).
      expect(
        await ctx.store.recordTelemetry(
          id,
          [record(1, T0 - 86_400_000), record(1, Date.UTC(2001, 0, 1))],
          T0 + 3,
        ),
      ).toBe(2);
      expect(await ctx.store.recordTelemetry(id, [], T0 + 4)).toBe(0);
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
        ctx.store.recordTelemetry(a, [...shared, ...onlyA], T0),
        ctx.store.recordTelemetry(b, [...shared, ...onlyB], T0),
        ctx.store.recordTelemetry(a, shared, T0),
        ctx.store.recordTelemetry(b, [], T0),
      ]);
      expect(counts).toEqual([3, 4, 0, 0]);
      // Each charger's live state is its own newest record.
      const live = await ctx.store.listConnectorsOf([a, b]);
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
        available: true,
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
        await ctx.store.recordTelemetry(id, [newest, record(1, T0 - 5_000, { state: 'idle', power: 0 })], T0),
      ).toBe(2);
      expect(await ctx.store.getConnector(id, 1)).toEqual(expected1);
      // Late: stored, but not the live state.
      expect(
        await ctx.store.recordTelemetry(id, [record(1, T0 - 1_000, { state: 'idle', power: 0 })], T0 + 1),
      ).toBe(1);
      expect(await ctx.store.getConnector(id, 1)).toEqual(expected1);
      // Newer: the live state moves; a value the record leaves out is null.
      expect(
        await ctx.store.recordTelemetry(id, [record(1, T0 + 1_000, { state: 'idle', power: 0 })], T0 + 2),
      ).toBe(1);
      expect(await ctx.store.getConnector(id, 1)).toEqual({
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
      await ctx.store.recordTelemetry(a, [record(3, T0, { state: 'idle', power: 0 }), record(1, T0)], T0);
      await ctx.store.recordTelemetry(b, [record(1, T0 - 10)], T0);
      expect(await ctx.store.getConnector(a, 3)).toEqual({
        device_id: a,
        connector_id: 3,
        max_power_kw: null,
        v2g_capable: false,
        available: true,
        state: 'idle',
        power: 0,
        voltage: null,
        current: null,
        energy_delivered: null,
        soc: null,
        temperature: null,
        last_telemetry_ms: T0,
      });
      expect(await ctx.store.getConnector(a, 2)).toBeUndefined();
      expect((await ctx.store.listConnectors(a)).map((c) => c.connector_id)).toEqual([1, 3]);
      const both = await ctx.store.listConnectorsOf([b, a]);
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
      expect(await ctx.store.listConnectorsOf([])).toEqual([]);
    });

    it('records heartbeats; last seen only moves forward', async () => {
      const { site } = await operatorWithSite();
      const id = (await registered('SN-1', site.site_id)).device.device_id;
      await ctx.store.recordHeartbeat(id, { status: 'fault', fault_code: 42, atMs: T0 });
      expect(await ctx.store.getDevice(id)).toMatchObject({
        last_heartbeat_ms: T0,
        last_seen_ms: T0,
        reported_status: 'fault',
        fault_code: 42,
      });
      await ctx.store.touchDevices(new Map([[id, T0 + 5_000]]));
      // An older heartbeat (handled late) is the last heartbeat, but does not move last seen back.
      await ctx.store.recordHeartbeat(id, { status: 'online', fault_code: 0, atMs: T0 + 1_000 });
      expect(await ctx.store.getDevice(id)).toMatchObject({
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
      await ctx.store.touchDevices(
        new Map([
          [a, T0 + 10],
          [b, T0 + 20],
          ['dev_missing', T0],
        ]),
      );
      await ctx.store.touchDevices(
        new Map([
          [a, T0 + 5],
          [b, T0 + 30],
        ]),
      );
      await ctx.store.touchDevices(new Map());
      const seen = async (x: string) => (await ctx.store.getDevice(x))?.last_seen_ms;
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
});
