import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadOrCreatePlatformKeys } from '../../../platform/platform-keys.js';
import { MIGRATIONS } from '../../../platform/storage/migrations.js';
import { createSqliteStore, DATABASE_FILE } from '../../../platform/storage/sqlite-store.js';
import { storageFaultOf } from '../../../platform/storage/storage-faults.js';
import {
  openTelemetryDb,
  TELEMETRY_DATABASE_FILE,
  type TelemetryDb,
} from '../../../platform/storage/telemetry-db.js';
import type { TelemetryRecord } from '../../../shared/index.js';

const T0 = Date.parse('2026-03-01T12:00:00Z');
const at = (s: number) => new Date(T0 + s * 1000).toISOString();
const rec = (s: number, connector_id: number, power: number): TelemetryRecord => ({
  timestamp: at(s),
  connector_id,
  state: 'charging',
  power,
});

describe('the telemetry database and its writer thread', () => {
  let dir: string;
  let tdb: TelemetryDb | undefined;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'telemetry-db-'));
  });
  afterEach(async () => {
    await tdb?.close();
    tdb = undefined;
    rmSync(dir, { recursive: true, force: true });
  });

  it('stores what is new, ignores exact repeats, and keeps each connector’s newest record as its state', async () => {
    tdb = openTelemetryDb(dir);
    // Many requests in one turn share a commit; each gets its own count.
    const counts = await Promise.all([
      tdb.record('dev_a', [rec(10, 1, 7), rec(10, 2, 3)], T0),
      tdb.record('dev_b', [rec(10, 1, 11)], T0),
      tdb.record('dev_a', [rec(10, 1, 7), rec(20, 1, 8)], T0),
    ]);
    expect(counts).toEqual([2, 1, 1]);
    // An older record arriving late is stored but does not overwrite the newer state.
    expect(await tdb.record('dev_a', [rec(5, 1, 99)], T0)).toBe(1);
    expect(tdb.connectorStates(['dev_a']).map((s) => [s.connector_id, s.power, s.last_telemetry_ms])).toEqual(
      [
        [1, 8, T0 + 20_000],
        [2, 3, T0 + 10_000],
      ],
    );
    expect(tdb.connectorState('dev_b', 1)?.power).toBe(11);
    expect(tdb.connectorStates(['dev_a', 'dev_b'])).toHaveLength(3);
    expect([...tdb.samples('dev_a', T0, T0 + 30_000)].map((r) => [r.ts_ms - T0, r.connector_id])).toEqual([
      [5_000, 1],
      [10_000, 1],
      [10_000, 2],
      [20_000, 1],
    ]);
  });

  it('a request that fails does not fail its neighbours', async () => {
    tdb = openTelemetryDb(dir);
    // What validation never lets through: a record whose phase details cannot even be written as JSON.
    const broken = { ...rec(2, 1, 5), phase_details: { l1: 1n } } as unknown as TelemetryRecord;
    const [good, bad, alsoGood] = await Promise.allSettled([
      tdb.record('dev_a', [rec(1, 1, 1)], T0),
      tdb.record('dev_a', [broken], T0),
      tdb.record('dev_b', [rec(1, 1, 2)], T0),
    ]);
    expect(good).toEqual({ status: 'fulfilled', value: 1 });
    expect(alsoGood).toEqual({ status: 'fulfilled', value: 1 });
    expect(bad.status).toBe('rejected');
    expect(storageFaultOf((bad as PromiseRejectedResult).reason)).toBeUndefined();
    expect(tdb.connectorStates(['dev_a', 'dev_b']).map((s) => s.power)).toEqual([1, 2]);
  });

  it('what was acknowledged is in the file once the writer is closed, and is read back after reopening', async () => {
    tdb = openTelemetryDb(dir, { commitIntervalMs: 5 });
    const writes = Array.from({ length: 300 }, (_, i) => tdb!.record(`dev_${i % 7}`, [rec(i, 1, i)], T0));
    expect((await Promise.all(writes)).reduce((a, b) => a + b, 0)).toBe(300);
    await tdb.close();
    const db = new Database(path.join(dir, TELEMETRY_DATABASE_FILE), { readonly: true });
    expect(db.prepare('SELECT COUNT(*) FROM telemetry').pluck().get()).toBe(300);
    db.close();
    tdb = openTelemetryDb(dir);
    expect(tdb.connectorState('dev_0', 1)?.power).toBe(294);
  });
});

describe('migration 3: telemetry moves out of the main database', () => {
  it('carries a version-2 database’s telemetry and live connector state over, and drops them from it', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'telemetry-migration-'));
    try {
      const old = new Database(path.join(dir, DATABASE_FILE));
      old.pragma('journal_mode = WAL');
      for (const m of MIGRATIONS.slice(0, 2)) old.exec(m as string);
      old.pragma('user_version = 2');
      old.exec(`
        INSERT INTO operators VALUES ('op_1', 'Op', 0);
        INSERT INTO sites VALUES ('site_1', 'op_1', 'Site', 'UTC', 0);
        INSERT INTO devices (device_id, sn, site_id, registered_ms) VALUES ('dev_1', 'SN-1', 'site_1', 0);
        INSERT INTO connectors (device_id, connector_id, max_power_kw, v2g_capable, state, power, last_telemetry_ms)
          VALUES ('dev_1', 1, 22, 1, 'charging', 11, ${T0 + 60_000});
        INSERT INTO telemetry (device_id, connector_id, ts_ms, state, power, received_ms)
          VALUES ('dev_1', 1, ${T0}, 'charging', 10, ${T0}), ('dev_1', 1, ${T0 + 60_000}, 'charging', 11, ${T0});
      `);
      old.close();

      const store = createSqliteStore(dir, loadOrCreatePlatformKeys(dir));
      try {
        expect(await store.listConnectors('dev_1')).toEqual([
          expect.objectContaining({
            connector_id: 1,
            max_power_kw: 22,
            v2g_capable: true,
            state: 'charging',
            power: 11,
            last_telemetry_ms: T0 + 60_000,
          }),
        ]);
        const buckets = await store.energyBuckets(['dev_1'], T0, T0 + 3_600_000, 3_600_000);
        expect(buckets[0]?.samples).toBe(2);
      } finally {
        await store.close();
      }
      const main = new Database(path.join(dir, DATABASE_FILE), { readonly: true });
      expect(main.pragma('user_version', { simple: true })).toBe(MIGRATIONS.length);
      expect(main.prepare("SELECT name FROM sqlite_master WHERE name = 'telemetry'").all()).toEqual([]);
      expect(main.prepare('SELECT * FROM connectors').all()).toEqual([
        { device_id: 'dev_1', connector_id: 1, max_power_kw: 22, v2g_capable: 1 },
      ]);
      main.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
