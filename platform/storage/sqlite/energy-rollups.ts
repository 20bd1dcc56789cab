import type Database from 'better-sqlite3';
import type { EnergyBucket, PowerSample } from '../../domain/energy.js';
import { MAX_GAP_MS } from '../../domain/energy.js';
import { type RollupRun, recomputeRollupRun } from '../../domain/energy-rollup.js';
import { createPassQueue } from '../pass-queue.js';
import { byConnector, lateRollupRuns, planConnectorRollup, type RollupRow } from '../rollup-rows.js';
import type { SqliteTelemetryBlocks } from './telemetry-blocks.js';
import { deviceKeyOf } from './telemetry-keys.js';

/**
 * Keeps `energy_rollups` equal to the integration of the stored telemetry (domain/energy-rollup.ts), behind
 * the ingest path rather than in it: telemetry rows are rolled up in id order, a chunk per write, and a
 * setting records up to which row they are. A request never waits for this; an energy read first lets it
 * catch up, so a series always includes every record acknowledged before it was asked for.
 *
 * Per connector, rows newer than its newest rolled-up sample are appended (deltas added); rows older than it
 * (a backlog replayed after an outage beside live data) recompute the buckets they can change from the raw
 * samples. Rollups reflect exactly the rows up to the watermark, so a recompute reads only those.
 */
export interface EnergyRollups {
  /** Rolls up everything stored so far; concurrent calls share one pass. */
  catchUp(): Promise<void>;
  /** Rows not rolled up yet, as of the last pass (for /metrics). */
  lagRows(): number;
  /** Settles when no pass is running (before the database closes). */
  idle(): Promise<void>;
  /** The telemetry row id up to which rollups are kept. */
  watermark(): number;
}

export const ROLLUP_WATERMARK_SETTING = 'energy_rollups_up_to_telemetry_id';
/** Rows per write: a chunk holds the event loop for a few milliseconds. */
const CHUNK_ROWS = 4000;
/** How far inside the telemetry retention window a late row must be for its buckets to be recomputed. */
const LATE_MARGIN_MS = 3_600_000;

interface NewRow extends RollupRow {
  id: number;
}

export function createSqliteEnergyRollups(
  db: Database.Database,
  write: <T>(run: () => T) => Promise<T>,
  /** Raw telemetry before this (ms) may have been pruned: late rows there are not recomputed from it. */
  telemetryHorizonMs: () => number = () => Number.NEGATIVE_INFINITY,
  /** Samples compacted out of the recent table (DESIGN.md §21): rolled up already, read back for recomputes. */
  blocks?: () => Pick<SqliteTelemetryBlocks, 'samplesIn' | 'newest'>,
): EnergyRollups {
  const stmt = {
    watermark: db.prepare('SELECT value FROM settings WHERE key = ?').pluck(),
    setWatermark: db.prepare(
      'INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value',
    ),
    newRows: db.prepare(
      'SELECT id, device_id, connector_id, ts_ms, power FROM telemetry WHERE id > ? ORDER BY id LIMIT ?',
    ),
    maxId: db.prepare('SELECT MAX(id) FROM telemetry_recent').pluck(),
    newestRolledUp: db.prepare(
      `SELECT connector_id, ts_ms, power FROM telemetry_recent
       WHERE device_key = ${deviceKeyOf('?')} AND connector_id = ? AND id <= ? ORDER BY ts_ms DESC LIMIT 1`,
    ),
    samplesIn: db.prepare(
      `SELECT connector_id, ts_ms, power FROM telemetry_recent
       WHERE device_key = ${deviceKeyOf('?')} AND ts_ms >= ? AND ts_ms <= ? AND connector_id = ? AND id <= ?
       ORDER BY ts_ms`,
    ),
    addDelta: db.prepare(
      `INSERT INTO energy_rollups (device_id, bucket_ms, connector_id, imported_kwh, exported_kwh, power_sum,
         max_power, samples) VALUES (@device_id, @start_ms, @connector_id, @imported_kwh, @exported_kwh,
         @power_sum, @max_power, @samples)
       ON CONFLICT (device_id, bucket_ms, connector_id) DO UPDATE SET
         imported_kwh = imported_kwh + excluded.imported_kwh, exported_kwh = exported_kwh + excluded.exported_kwh,
         power_sum = power_sum + excluded.power_sum, max_power = MAX(max_power, excluded.max_power),
         samples = samples + excluded.samples`,
    ),
    deleteRun: db.prepare(
      `DELETE FROM energy_rollups WHERE device_id = ? AND connector_id = ? AND bucket_ms >= ? AND bucket_ms < ?`,
    ),
  };

  // Each connector's newest rolled-up sample, valid for the watermark it was noted at.
  const newest = new Map<string, PowerSample>();
  let newestAt = -1;
  let known = { watermark: 0, maxId: 0 };

  const putBuckets = (deviceId: string, connectorId: number, buckets: readonly EnergyBucket[]) => {
    for (const b of buckets) stmt.addDelta.run({ device_id: deviceId, connector_id: connectorId, ...b });
  };
  /** The connector's rolled-up samples in `[fromMs, toMs]`, in time order: its blocks' and the recent table's. */
  const samplesIn = (deviceId: string, connectorId: number, fromMs: number, toMs: number, upToId: number) => {
    const recent = stmt.samplesIn.all(deviceId, fromMs, toMs, connectorId, upToId) as PowerSample[];
    const compacted = blocks?.().samplesIn(deviceId, connectorId, fromMs, toMs) ?? [];
    if (compacted.length === 0) return recent;
    const merged: PowerSample[] = compacted.map((s) => ({
      connector_id: connectorId,
      ts_ms: s.ts_ms,
      power: s.power,
    }));
    return merged.concat(recent).sort((a, b) => a.ts_ms - b.ts_ms);
  };
  /** The connector's newest rolled-up sample, in the recent table or a block. */
  const newestRolledUp = (deviceId: string, connectorId: number, watermark: number) => {
    const recent = stmt.newestRolledUp.get(deviceId, connectorId, watermark) as PowerSample | undefined;
    const compacted = blocks?.().newest(deviceId, connectorId);
    if (!compacted || (recent && recent.ts_ms >= compacted.ts_ms)) return recent;
    return { connector_id: connectorId, ts_ms: compacted.ts_ms, power: compacted.power };
  };
  const recompute = (deviceId: string, connectorId: number, runs: readonly RollupRun[], upToId: number) => {
    for (const run of runs) {
      const samples = samplesIn(
        deviceId,
        connectorId,
        run.startMs - MAX_GAP_MS,
        run.endMs + MAX_GAP_MS,
        upToId,
      );
      const buckets = recomputeRollupRun(samples, run);
      stmt.deleteRun.run(deviceId, connectorId, run.startMs, run.endMs);
      putBuckets(deviceId, connectorId, buckets);
    }
  };

  /** One chunk; false when there was nothing left. */
  const step = (): boolean => {
    const watermark = Number(stmt.watermark.get(ROLLUP_WATERMARK_SETTING) ?? 0);
    // Another process (or a failed write) moved the watermark: what is remembered may be stale.
    if (watermark !== newestAt) newest.clear();
    const rows = stmt.newRows.all(watermark, CHUNK_ROWS) as NewRow[];
    known = { watermark, maxId: Number(stmt.maxId.get() ?? 0) };
    const upToId = rows.at(-1)?.id;
    if (upToId === undefined) {
      newestAt = watermark;
      return false;
    }
    for (const [key, group] of byConnector(rows)) {
      const { device_id, connector_id } = group[0]!;
      const last = newest.get(key) ?? newestRolledUp(device_id, connector_id, watermark);
      const plan = planConnectorRollup(last, group);
      if (plan.deltas) putBuckets(device_id, connector_id, plan.deltas);
      else {
        const floor = telemetryHorizonMs() + LATE_MARGIN_MS;
        recompute(device_id, connector_id, lateRollupRuns(group, floor), upToId);
      }
      newest.set(key, plan.newest);
    }
    stmt.setWatermark.run(ROLLUP_WATERMARK_SETTING, String(upToId));
    newestAt = upToId;
    known = { watermark: upToId, maxId: known.maxId };
    return rows.length === CHUNK_ROWS;
  };

  const pass = async () => {
    // Nothing stored since the last chunk: no write transaction at all (the timer fires every second).
    const maxId = Number(stmt.maxId.get() ?? 0);
    if (newestAt >= 0 && maxId <= newestAt) {
      known = { watermark: newestAt, maxId };
      return;
    }
    try {
      while (await write(step)) {
        // Each chunk is its own write: requests run between them.
      }
    } catch (err) {
      newest.clear();
      newestAt = -1;
      throw err;
    }
  };
  const passes = createPassQueue(pass);
  return {
    catchUp: () => passes.schedule(),
    idle: () => passes.idle(),
    watermark() {
      return Number(stmt.watermark.get(ROLLUP_WATERMARK_SETTING) ?? 0);
    },
    lagRows() {
      return Math.max(0, known.maxId - known.watermark);
    },
  };
}
