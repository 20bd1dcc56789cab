import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSqliteStore } from '../../platform/storage/backends.js';
import { createWorkerReader } from '../../platform/storage/sqlite/reader.js';
import { registerOnStore } from '../helpers/sealed-writes.js';

/** The read worker: a read-only connection in a worker thread, and the main connection when it fails. */
let dir: string;
let db: Database.Database;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cp-reader-'));
  db = new Database(join(dir, 'r.sqlite'));
  db.pragma('journal_mode = WAL');
  db.exec('CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)');
});
afterAll(async () => {
  db.close();
  await rm(dir, { recursive: true, force: true });
});

// About a few hundred milliseconds of work for SQLite.
const HEAVY = `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000000) SELECT SUM(i) AS s FROM n`;

describe('read worker', () => {
  it('sees every committed write, runs off the event loop, and reports SQL errors with their code', async () => {
    const reader = createWorkerReader(db, join(dir, 'r.sqlite'));
    try {
      db.prepare('INSERT INTO t (k, v) VALUES (?, ?)').run(1, 'one');
      expect(await reader.all('SELECT k, v FROM t', [])).toEqual([{ k: 1, v: 'one' }]);
      db.prepare('INSERT INTO t (k, v) VALUES (?, ?)').run(2, 'two');
      expect(await reader.get('SELECT COUNT(*) AS n FROM t WHERE k > ?', [0])).toEqual({ n: 2 });
      // The main thread keeps turning while the worker works.
      let turns = 0;
      const ticker = setInterval(() => turns++, 1);
      const heavy = await reader.get<{ s: number }>(HEAVY, []);
      clearInterval(ticker);
      expect(heavy!.s).toBe((3_000_000 * 3_000_001) / 2);
      expect(turns).toBeGreaterThan(5);
      // Read-only: a write is refused, by SQLite, with its code.
      await expect(reader.all('INSERT INTO t (k, v) VALUES (3, ?) RETURNING k', ['x'])).rejects.toMatchObject(
        {
          code: 'SQLITE_READONLY',
        },
      );
      await expect(reader.all('SELECT nope FROM t', [])).rejects.toThrow(/no such column/);
    } finally {
      await reader.close();
    }
  });

  it('falls back to the main connection when the worker cannot run, and says so once', async () => {
    const failures: string[] = [];
    const reader = createWorkerReader(db, join(dir, 'missing', 'x.sqlite'), (m) => failures.push(m));
    try {
      // Asked before and after the worker fails: both answered.
      const early = reader.all('SELECT k FROM t ORDER BY k', []);
      await new Promise((r) => setTimeout(r, 300));
      expect(await early).toEqual([{ k: 1 }, { k: 2 }]);
      expect(await reader.get('SELECT MAX(k) AS m FROM t', [])).toEqual({ m: 2 });
      expect(failures).toHaveLength(1);
    } finally {
      await reader.close();
    }
  });
});

describe('telemetry history in the read worker (DESIGN.md §21)', () => {
  it('decodes the blocks and builds the page in the worker, as the server runs it', async () => {
    const storeDir = await mkdtemp(join(tmpdir(), 'cp-reader-history-'));
    const failures: string[] = [];
    const T0 = Date.UTC(2026, 3, 1, 8);
    let clock = T0 + 3_600_000;
    // As `serve` opens it: reads in the worker; background upkeep off (the test runs it).
    const store = createSqliteStore(storeDir, () => clock, {
      backgroundCheckpoints: true,
      backgroundMaintenance: false,
      onReaderFailure: (m) => failures.push(m),
    });
    try {
      const op = await store.createOperator('Reader');
      const site = await store.createSite({ operator_id: op.operator_id, name: 's', timezone: 'UTC' });
      const reg = await registerOnStore(
        store,
        { sn: 'SN-READER-1', model: 'M', manufacturer: 'X', firmware_version: '1' },
        { registration: 'open', defaultSiteId: site.site_id },
      );
      if (reg.kind !== 'registered') throw new Error(reg.kind);
      const deviceId = reg.device.device_id;
      const records = Array.from({ length: 720 }, (_, i) => ({
        timestamp: new Date(T0 + i * 5000).toISOString(),
        connector_id: 1,
        state: 'charging' as const,
        power: Math.round((7 + (i % 9) * 0.013) * 1000) / 1000,
        voltage: 229.9 + (i % 4) / 10,
      }));
      await store.recordTelemetry(deviceId, records, clock);
      clock = T0 + 3 * 3_600_000;
      await store.runMaintenance();
      const read = { deviceId, startMs: T0, endMs: T0 + 3_600_000, limit: 1000 };
      const raw = await store.telemetryHistory(read);
      expect(raw).toHaveLength(720);
      expect(raw[100]).toMatchObject({
        ts_ms: T0 + 500_000,
        power: records[100]!.power,
        voltage: records[100]!.voltage,
      });
      const quarters = await store.telemetryHistory({ ...read, bucketMs: 900_000 });
      expect(quarters.map((q) => q.samples)).toEqual([180, 180, 180, 180]);
      // Read in the worker: it loaded the codec and the history rules and never fell back.
      expect(failures).toEqual([]);
    } finally {
      await store.close();
      await rm(storeDir, { recursive: true, force: true });
    }
  });
});
