import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { createSqliteStore } from '../../platform/storage/backends.js';
import { loadOrCreatePlatformKeys } from '../../platform/storage/platform-keys.js';
import { MIGRATIONS } from '../../platform/storage/sqlite/migrations.js';
import { DATABASE_FILE } from '../../platform/storage/sqlite/store.js';
import { recordReportOnStore } from '../helpers/sealed-writes.js';

/** A deployment from before rollups and record counts (schema 2) upgrades with its history intact. */
const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

describe('upgrading a schema-2 database', () => {
  it('counts its charging records and rolls up its telemetry', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cp-migrate-'));
    dirs.push(dir);
    const T = Date.UTC(2026, 4, 1, 10);
    // A deployment's key comes first (a database without one was set up with --key-file).
    loadOrCreatePlatformKeys(dir);
    {
      const db = new Database(join(dir, DATABASE_FILE));
      db.exec(MIGRATIONS[0]!);
      db.exec(MIGRATIONS[1]!);
      db.pragma('user_version = 2');
      db.prepare("INSERT INTO operators VALUES ('op_a', 'A', 0)").run();
      db.prepare("INSERT INTO sites VALUES ('site_a', 'op_a', 'a', 'UTC', 0)").run();
      db.prepare(
        "INSERT INTO devices (device_id, sn, site_id, registered_ms) VALUES ('dev_a', 'SN-A', 'site_a', 0)",
      ).run();
      db.prepare("INSERT INTO devices (device_id, sn, registered_ms) VALUES ('dev_b', 'SN-B', 0)").run();
      const rec = db.prepare(
        'INSERT INTO charging_records (record_id, device_id, connector_id, start_ms, end_ms, energy) VALUES (?, ?, 1, ?, ?, 1)',
      );
      for (let i = 0; i < 50; i++)
        rec.run(`r${i}`, 'dev_a', T - i * 3_600_000, T - i * 3_600_000 + 1_800_000);
      rec.run('orphan', 'dev_b', T, T + 1);
      const tel = db.prepare(
        "INSERT INTO telemetry (device_id, connector_id, ts_ms, state, power, received_ms) VALUES ('dev_a', 1, ?, 'charging', 12, 0)",
      );
      // 12 kW for an hour, a sample every 10 s: 12 kWh.
      for (let t = T; t <= T + 3_600_000; t += 10_000) tel.run(t);
      db.close();
    }
    const store = createSqliteStore(dir);
    try {
      const page = await store.listChargingRecords(['op_a'], { page: 1, size: 5 });
      expect(page.total).toBe(50);
      expect(page.items.map((r) => r.record_id)).toEqual(['r0', 'r1', 'r2', 'r3', 'r4']);
      const lastDay = await store.listChargingRecords(['op_a'], {
        page: 1,
        size: 100,
        start_time: new Date(T - 10 * 3_600_000).toISOString(),
      });
      expect(lastDay.total).toBe(11);
      const [bucket] = await store.energyBuckets(['dev_a'], T, T + 3_600_000, 3_600_000);
      expect(bucket!.imported_kwh).toBeCloseTo(12, 9);
      expect(bucket!.samples).toBe(360);
      // The orphan charger's record becomes visible when it is given a site.
      await store.assignDevice('dev_b', 'site_a');
      expect((await store.listChargingRecords(['op_a'], { page: 1, size: 1 })).total).toBe(51);
    } finally {
      await store.close();
    }
  });
});

/** A deployment from before the inventory (schema 10, DESIGN.md §19) keeps its firmware history and versions. */
describe('upgrading a schema-10 database', () => {
  it('lists the firmware reports stored before, and takes report ids, agent versions and filters after', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cp-migrate-'));
    dirs.push(dir);
    const T = Date.UTC(2026, 4, 1, 10);
    loadOrCreatePlatformKeys(dir);
    {
      const db = new Database(join(dir, DATABASE_FILE));
      for (const m of MIGRATIONS.slice(0, 10)) db.exec(m);
      db.pragma('user_version = 10');
      db.prepare("INSERT INTO operators VALUES ('op_a', 'A', 0)").run();
      db.prepare("INSERT INTO sites VALUES ('site_a', 'op_a', 'a', 'UTC', 0)").run();
      db.prepare(
        `INSERT INTO devices (device_id, sn, site_id, firmware_version, registered_ms)
         VALUES ('dev_a', 'SN-A', 'site_a', '1.0.0', 0)`,
      ).run();
      const fw = db.prepare(
        "INSERT INTO firmware_status (device_id, status, version, ts_ms, received_ms) VALUES ('dev_a', ?, '1.0.0', ?, ?)",
      );
      fw.run('downloading', T, T);
      fw.run('installed', T + 1, T + 1);
      db.close();
    }
    const store = createSqliteStore(dir);
    try {
      const before = await store.listFirmwareStatus('dev_a', 1, 10);
      expect(before.items.map((r) => [r.status, r.update_id, r.report_id])).toEqual([
        ['installed', null, null],
        ['downloading', null, null],
      ]);
      expect(await store.getDevice('dev_a')).toMatchObject({
        firmware_version: '1.0.0',
        agent_version: null,
      });
      const report = { status: 'installed', version: '2.0.0', report_id: 'r1', ts_ms: T + 2 };
      expect(await recordReportOnStore(store, 'dev_a', report, T + 2)).toBe(true);
      expect(await recordReportOnStore(store, 'dev_a', report, T + 3)).toBe(false);
      await store.setDeviceVersions('dev_a', { agent_version: '0.1.0' });
      const found = await store.listDevices(
        ['op_a'],
        { firmware_version: '2.0.0', agent_version: '0.1.0', page: 1, size: 5 },
        0,
      );
      expect(found.items.map((d) => d.device_id)).toEqual(['dev_a']);
    } finally {
      await store.close();
    }
  });
});

/** A deployment from before remote maintenance (schema 12, DESIGN.md §20) keeps its commands and connectors. */
describe('upgrading a schema-12 database', () => {
  it('reads its commands with no result and its connectors in service, and takes both after', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cp-migrate-'));
    dirs.push(dir);
    const T = Date.UTC(2026, 4, 1, 10);
    loadOrCreatePlatformKeys(dir);
    {
      const db = new Database(join(dir, DATABASE_FILE));
      for (const m of MIGRATIONS.slice(0, 12)) db.exec(m);
      db.pragma('user_version = 12');
      db.prepare("INSERT INTO operators VALUES ('op_a', 'A', 0)").run();
      db.prepare("INSERT INTO sites VALUES ('site_a', 'op_a', 'a', 'UTC', 0)").run();
      db.prepare(
        "INSERT INTO devices (device_id, sn, site_id, registered_ms) VALUES ('dev_a', 'SN-A', 'site_a', 0)",
      ).run();
      db.prepare(
        "INSERT INTO connectors (device_id, connector_id, max_power_kw, state) VALUES ('dev_a', 1, 11, 'idle')",
      ).run();
      db.prepare(
        `INSERT INTO commands (command_id, device_id, command, params, status, expiry_ms, created_ms, updated_ms)
         VALUES ('cmd_old', 'dev_a', 'stop', '{"connector_id":1}', 'delivered', ?, ?, ?)`,
      ).run(T + 600_000, T, T);
      db.close();
    }
    const store = createSqliteStore(dir);
    try {
      expect(await store.getConnector('dev_a', 1)).toMatchObject({ state: 'idle', available: true });
      expect((await store.getCommand('cmd_old'))?.command).toMatchObject({
        status: 'delivered',
        result: null,
      });
      const moved = await store.reportCommandStatus(
        'dev_a',
        'cmd_old',
        { status: 'succeeded', result: { stopped: true } },
        T + 1,
      );
      expect(moved).toMatchObject({ outcome: 'ok', changed: true, command: { result: { stopped: true } } });
      expect(await store.getConfiguration('dev_a')).toBeUndefined();
      expect(
        await store.recordConfiguration('dev_a', { values: { log_level: 'info' }, reported_at_ms: T }),
      ).toBe(true);
    } finally {
      await store.close();
    }
  });
});

/**
 * A deployment from before the integer device key of the recent telemetry table (schema 17): its rows keep their
 * ids (the rollups, the live state and retention follow them) and their charger, and ingest, duplicates and reads
 * go on over them.
 */
describe('upgrading a schema-17 database', () => {
  it('keeps every recent telemetry row under its id and charger, and takes new ones after them', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cp-migrate-'));
    dirs.push(dir);
    // Recent enough not to be compacted by the store's first passes.
    const T = Date.now() - 10 * 60_000;
    loadOrCreatePlatformKeys(dir);
    const migrations = 17;
    type Row = { id: number; device_id: string; connector_id: number; ts_ms: number; power: number };
    let before: Row[];
    {
      const db = new Database(join(dir, DATABASE_FILE));
      for (const m of MIGRATIONS.slice(0, migrations)) db.exec(m);
      db.pragma(`user_version = ${migrations}`);
      db.prepare("INSERT INTO operators VALUES ('op_a', 'A', 0)").run();
      db.prepare("INSERT INTO sites VALUES ('site_a', 'op_a', 'a', 'UTC', 0)").run();
      for (const d of ['dev_a', 'dev_b'])
        db.prepare(
          "INSERT INTO devices (device_id, sn, site_id, registered_ms) VALUES (?, ?, 'site_a', 0)",
        ).run(d, `SN-${d}`);
      const tel = db.prepare(
        "INSERT INTO telemetry (id, device_id, connector_id, ts_ms, state, power, received_ms) VALUES (?, ?, ?, ?, 'charging', ?, 0)",
      );
      // Ids with gaps (retention and compaction delete rows), chargers interleaved.
      let id = 10;
      for (let i = 0; i < 20; i++) {
        tel.run(id, i % 3 === 0 ? 'dev_b' : 'dev_a', 1 + (i % 2), T + i * 5_000, i);
        id += 1 + (i % 4);
      }
      before = db
        .prepare('SELECT id, device_id, connector_id, ts_ms, power FROM telemetry ORDER BY id')
        .all() as Row[];
      db.close();
    }
    const store = createSqliteStore(dir);
    try {
      const oneMore = {
        timestamp: new Date(T + 200_000).toISOString(),
        connector_id: 1,
        state: 'charging' as const,
      };
      // A sample stored before is a duplicate; a new one is stored.
      const again = {
        timestamp: new Date(before[0]!.ts_ms).toISOString(),
        connector_id: before[0]!.connector_id,
        state: 'charging' as const,
        power: 99,
      };
      expect(await store.recordTelemetry(before[0]!.device_id, [again, oneMore], T + 200_000)).toBe(1);
      const history = await store.telemetryHistory({
        deviceId: 'dev_b',
        startMs: T - 1,
        endMs: T + 300_000,
        limit: 100,
      });
      // The first row is dev_b's: its history is its rows from before, then the new sample.
      expect(history.map((r) => [r.ts_ms, r.connector_id, r.power])).toEqual([
        ...before.filter((r) => r.device_id === 'dev_b').map((r) => [r.ts_ms, r.connector_id, r.power]),
        [T + 200_000, 1, null],
      ]);
    } finally {
      await store.close();
    }
    const db = new Database(join(dir, DATABASE_FILE), { readonly: true });
    try {
      const after = db
        .prepare('SELECT id, device_id, connector_id, ts_ms, power FROM telemetry ORDER BY id')
        .all() as Row[];
      expect(after.slice(0, before.length)).toEqual(before);
      expect(after).toHaveLength(before.length + 1);
      expect(after.at(-1)).toMatchObject({ id: before.at(-1)!.id + 1, device_id: before[0]!.device_id });
      expect(db.prepare('SELECT device_id FROM telemetry_devices ORDER BY device_key').pluck().all()).toEqual(
        ['dev_a', 'dev_b'],
      );
    } finally {
      db.close();
    }
  });
});
