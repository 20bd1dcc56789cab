import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RETENTION_LOCK } from '../../platform/storage/postgres/retention.js';
import { partitionName } from '../../platform/storage/postgres/telemetry-partitions.js';
import { DATABASE_FILE } from '../../platform/storage/sqlite/store.js';
import type { Store } from '../../platform/storage/store.js';
import { BACKENDS, type Backend, openTestStore, type TestStore } from '../helpers/backends.js';
import { registerOnStore } from '../helpers/sealed-writes.js';

/**
 * Retention on the real store of each backend with an injected clock: years pass in milliseconds. Raw
 * telemetry goes after 30 days while its energy stays in the rollups; events and finished commands and
 * controls after 180 days, unfinished commands never; rollups after 1,830 days; charging records stay. On
 * PostgreSQL telemetry goes by whole day partitions, and only once every row in one is rolled up.
 */
const DAY = 86_400_000;
const T0 = Date.UTC(2026, 0, 5, 10);
const iso = (ms: number) => new Date(ms).toISOString();

/** Reads the backend's tables behind the store's back. */
interface Peek {
  query<R>(sql: string, values?: unknown[]): Promise<R[]>;
  close(): Promise<void>;
}
async function openPeek(t: TestStore): Promise<Peek> {
  if (t.backend === 'sqlite') {
    const db = new Database(join(t.dataDir, DATABASE_FILE), { readonly: true });
    return {
      query: async <R>(sql: string, values: unknown[] = []) => db.prepare(sql).all(...values) as R[],
      close: async () => {
        db.close();
      },
    };
  }
  const client = new pg.Client({ connectionString: t.databaseUrl });
  await client.connect();
  return {
    query: async <R>(sql: string, values: unknown[] = []) => (await client.query(sql, values)).rows as R[],
    close: () => client.end(),
  };
}
const countIn = async (peek: Peek, table: string) =>
  Number((await peek.query<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table}`))[0]?.n ?? 0);

/** An hour at 12 kW from `from`, a sample every 10 s: 12 kWh. */
const hourAt = (from: number) =>
  Array.from({ length: 361 }, (_, i) => ({
    timestamp: iso(from + i * 10_000),
    connector_id: 1,
    state: 'charging' as const,
    power: 12,
  }));
const energyOfHour = async (store: Store, deviceId: string, from: number) =>
  (await store.energyBuckets([deviceId], from, from + 3_600_000, 3_600_000))[0]?.imported_kwh ?? 0;

async function registerDevice(store: Store, sn: string): Promise<string> {
  const op = await store.createOperator('A');
  const site = await store.createSite({ operator_id: op.operator_id, name: 's', timezone: 'UTC' });
  const reg = await registerOnStore(
    store,
    { sn, model: 'M', manufacturer: 'X', firmware_version: '1' },
    { registration: 'open', defaultSiteId: site.site_id },
  );
  if (reg.kind !== 'registered') throw new Error(reg.kind);
  return reg.device.device_id;
}

/** Telemetry left after the first 30-day pass: SQLite keeps its newest row, PostgreSQL drops the day. */
const LEFT_AFTER_30_DAYS: Record<Backend, number> = { sqlite: 1, postgres: 0 };

describe.each(BACKENDS)('retention (%s)', (backend) => {
  let t: TestStore;
  let store: Store;
  let peek: Peek;
  let clock = T0;
  let deviceId: string;
  const count = (table: string) => countIn(peek, table);
  /** Raw samples kept: the recent table's and those compacted into blocks (DESIGN.md §21). */
  const samples = async () =>
    (await count('telemetry')) +
    Number(
      (await peek.query<{ n: number }>('SELECT COALESCE(SUM(samples), 0) AS n FROM telemetry_blocks'))[0]
        ?.n ?? 0,
    );
  const energy = (from: number) => energyOfHour(store, deviceId, from);

  beforeAll(async () => {
    t = await openTestStore(backend, { now: () => clock });
    store = t.store;
    peek = await openPeek(t);
    deviceId = await registerDevice(store, 'SN-RET');
    await store.recordTelemetry(deviceId, hourAt(T0), T0);
    await store.insertEvents(
      deviceId,
      [
        {
          event_id: 'e1',
          kind: 'fault',
          severity: 'error',
          connector_id: 1,
          ts_ms: T0,
          message: null,
          data: null,
        },
      ],
      T0,
    );
    const [done, pending] = await store.enqueueCommands(
      [
        { device_id: deviceId, command: 'stop', params: { connector_id: 1 }, expiry_ms: T0 + 60_000 },
        { device_id: deviceId, command: 'stop', params: { connector_id: 1 }, expiry_ms: T0 + 400 * DAY },
      ],
      T0,
    );
    await store.takePendingCommands(deviceId, T0);
    await store.reportCommandStatus(deviceId, done!.command_id, { status: 'succeeded' }, T0 + 1000);
    expect(pending).toBeDefined();
    await store.insertChargingRecords([
      {
        record_id: 'r1',
        device_id: deviceId,
        connector_id: 1,
        start_time: iso(T0),
        end_time: iso(T0 + 3_600_000),
        energy: 12,
      },
    ]);
  });
  afterAll(async () => {
    await peek.close();
    await t.close();
  });

  it('keeps everything inside its window', async () => {
    clock = T0 + 29 * DAY;
    await store.runMaintenance();
    expect(await samples()).toBe(361);
    // Compacted into blocks: SQLite keeps its newest row (row ids never restart), the hour's last sample
    // (T0 + 1 h) that PostgreSQL moves into the next hour's block.
    expect(await count('telemetry')).toBe(backend === 'sqlite' ? 1 : 0);
    expect(await count('telemetry_blocks')).toBe(backend === 'sqlite' ? 1 : 2);
    expect(await count('device_events')).toBe(1);
    expect(await count('commands')).toBe(2);
    expect(store.maintenanceStats().pruned.telemetry).toBe(0);
  });

  it('after 30 days drops raw telemetry but not its energy', async () => {
    clock = T0 + 31 * DAY;
    await store.runMaintenance();
    const left = LEFT_AFTER_30_DAYS[backend];
    expect(await samples()).toBe(left);
    expect(store.maintenanceStats().pruned.telemetry).toBe(361 - left);
    if (backend === 'postgres') {
      // The day's partition itself is gone, not just emptied.
      const parts = await peek.query<{ n: number }>('SELECT COUNT(*) AS n FROM pg_class WHERE relname = $1', [
        partitionName(Date.UTC(2026, 0, 5)),
      ]);
      expect(Number(parts[0]?.n)).toBe(0);
    }
    expect(await energy(T0)).toBeCloseTo(12, 9);
    // New telemetry arrives (on SQLite the old newest row goes now too).
    await store.recordTelemetry(deviceId, hourAt(clock), clock);
    await store.runMaintenance();
    expect(await samples()).toBe(361);
    expect(await energy(T0)).toBeCloseTo(12, 9);
    expect(await energy(clock)).toBeCloseTo(12, 9);
    expect(store.maintenanceStats().retentionPasses).toBe(3);
  });

  it('a late record from before the window does not recompute buckets from pruned neighbours', async () => {
    await store.recordTelemetry(
      deviceId,
      [{ timestamp: iso(T0 + 30 * 60_000 + 5_000), connector_id: 1, state: 'charging', power: 50 }],
      clock,
    );
    expect(await energy(T0)).toBeCloseTo(12, 9);
  });

  it('after 180 days drops events and finished commands, never an unfinished one; records stay', async () => {
    clock = T0 + 181 * DAY;
    await store.runMaintenance();
    expect(await count('device_events')).toBe(0);
    expect(await count('commands')).toBe(1);
    expect(await count('command_history')).toBeGreaterThan(0);
    const [left] = await peek.query<{ status: string }>('SELECT status FROM commands');
    expect(left?.status).toBe('delivered');
    expect(await count('charging_records')).toBe(1);
    expect(store.maintenanceStats().pruned).toMatchObject({ device_events: 1, commands: 1 });
    expect(await energy(T0)).toBeCloseTo(12, 9);
  });

  it('after 1,830 days drops the rollups', async () => {
    clock = T0 + 1831 * DAY;
    await store.runMaintenance();
    expect(await energy(T0)).toBe(0);
    expect(store.maintenanceStats().pruned.energy_rollups).toBeGreaterThan(0);
    expect(await count('charging_records')).toBe(1);
  });
});

describe('telemetry retention by partition (postgres)', () => {
  let t: TestStore;
  let peek: Peek;
  let clock = T0;
  let deviceId: string;
  const dayPartition = partitionName(Date.UTC(2026, 0, 5));
  const partitionExists = async () =>
    Number(
      (
        await peek.query<{ n: number }>('SELECT COUNT(*) AS n FROM pg_class WHERE relname = $1', [
          dayPartition,
        ])
      )[0]?.n,
    ) === 1;

  beforeAll(async () => {
    t = await openTestStore('postgres', { now: () => clock });
    peek = await openPeek(t);
    deviceId = await registerDevice(t.store, 'SN-PART');
  });
  afterAll(async () => {
    await peek.close();
    await t.close();
  });

  it('deletes old rows of the default partition in batches once they are rolled up', async () => {
    // Far before the platform's clock: no day partition, the rows land in telemetry_default.
    const old = T0 - 400 * DAY;
    await t.store.recordTelemetry(deviceId, hourAt(old), T0);
    expect(await countIn(peek, 'telemetry_default')).toBe(361);
    await t.store.runMaintenance();
    expect(await countIn(peek, 'telemetry_default')).toBe(0);
    expect(t.store.maintenanceStats().pruned.telemetry).toBe(361);
    expect(await energyOfHour(t.store, deviceId, old)).toBeCloseTo(12, 9);
  });

  it('keeps a day partition while one of its rows is not rolled up', async () => {
    await t.store.recordTelemetry(deviceId, hourAt(T0), T0);
    expect(await partitionExists()).toBe(true);
    // A row of a transaction id far ahead: no pass takes it yet.
    await peek.query(
      `INSERT INTO telemetry (txid, device_id, connector_id, ts_ms, state, power, received_ms)
       VALUES ('1000000000'::xid8, $1, 2, $2, 'charging', 1, $2)`,
      [deviceId, T0 + 2 * 3_600_000],
    );
    clock = T0 + 31 * DAY;
    await t.store.runMaintenance();
    expect(await partitionExists()).toBe(true);
    // The rolled-up rows went into blocks, which retention pruned; the one not rolled up stays where it was.
    expect(await countIn(peek, 'telemetry')).toBe(1);
    expect(t.store.maintenanceStats().rollupLagRows).toBe(1);

    await peek.query('DELETE FROM telemetry WHERE connector_id = 2');
    await t.store.runMaintenance();
    expect(await partitionExists()).toBe(false);
    expect(await countIn(peek, 'telemetry')).toBe(0);
    expect(t.store.maintenanceStats().pruned.telemetry).toBe(2 * 361);
    expect(await energyOfHour(t.store, deviceId, T0)).toBeCloseTo(12, 9);
  });

  it('prunes nothing while another instance holds the retention lock', async () => {
    const passes = t.store.maintenanceStats().retentionPasses;
    const other = new pg.Client({ connectionString: t.databaseUrl });
    await other.connect();
    try {
      await other.query('SELECT pg_advisory_lock($1)', [RETENTION_LOCK]);
      await t.store.runMaintenance();
      expect(t.store.maintenanceStats().retentionPasses).toBe(passes);
    } finally {
      await other.end();
    }
    await t.store.runMaintenance();
    expect(t.store.maintenanceStats().retentionPasses).toBe(passes + 1);
  });
});
