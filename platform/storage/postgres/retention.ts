import type { CountPruned, RetentionSteps } from '../maintenance-steps.js';
import {
  RETENTION_BATCH as BATCH,
  DIAGNOSTICS_BATCH,
  TELEMETRY_PRUNED_THROUGH_SETTING,
} from '../retention-policy.js';
import type { PgDatabase, Sql } from './database.js';
import { whileHoldingLock } from './exclusive-jobs.js';
import type { RollupGate, RollupWatermark } from './rollup-watermark.js';
import type { PgTelemetryBlocks } from './telemetry-blocks.js';
import type { TelemetryPartition, TelemetryPartitions } from './telemetry-partitions.js';

/**
 * Retention's steps (DESIGN.md §12) on PostgreSQL, with the semantics of `../sqlite/retention.ts`;
 * `../maintenance-scheduler.ts` runs the passes and counts.
 *
 * - Raw telemetry: a day partition is dropped whole once its day ended more than the window ago and every row
 *   in it is rolled up; rows of `telemetry_default` (far-off clocks) older than the window are deleted in
 *   batches, rolled-up ones only. Unlike SQLite, a row's arrival time does not keep it longer: a partition
 *   goes as a whole (and ids never restart here, so no newest row is kept).
 * - History, rollups and diagnostics in batches, as on SQLite.
 *
 * One instance prunes at a time (a session advisory lock for the pass).
 */
export interface PgRetention extends RetentionSteps {
  /** The newest time (ms) of any telemetry row pruned: raw telemetry after it is complete. */
  telemetryHorizonMs(): number;
}

const DAY_MS = 86_400_000;
/** Any number unique to this program (see MIGRATION_LOCK in database.ts): one pruning instance at a time. */
export const RETENTION_LOCK = 7_340_315_003;
const FINISHED_COMMANDS = ['succeeded', 'failed', 'rejected', 'expired', 'cancelled'];
/** Rolled up: at or below the watermark given as parameters $i and $i+1. */
const rolledUp = (i: number) => `(txid, id) <= ($${i}::xid8, $${i + 1}::bigint)`;

/** Runs a statement that deletes and counts (`WITH d AS (DELETE … RETURNING 1) SELECT count(*) …`). */
async function deleted(sql: Sql, text: string, values: readonly unknown[]): Promise<number> {
  const [row] = await sql.query<{ n: number }>(text, values);
  return row?.n ?? 0;
}

/** Raises the stored horizon (never lowers it: another instance may have pruned further). */
async function raiseHorizon(sql: Sql, throughMs: number): Promise<void> {
  await sql.query(
    `INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE
     SET value = GREATEST(settings.value::bigint, excluded.value::bigint)::text`,
    [TELEMETRY_PRUNED_THROUGH_SETTING, String(throughMs)],
  );
}

export function createPgRetention(
  db: PgDatabase,
  partitions: TelemetryPartitions,
  rollups: RollupGate,
  blocks: Pick<PgTelemetryBlocks, 'pruneBefore'>,
): PgRetention {
  const telemetry = createTelemetryPruning(db, partitions, rollups, blocks);
  return {
    alone: async (pass) =>
      (
        await whileHoldingLock(db, RETENTION_LOCK, async () => {
          await telemetry.loadHorizon();
          await pass();
        })
      ).ran,
    pruneTelemetry: telemetry.prune,
    telemetryHorizonMs: telemetry.horizonMs,
    ...historySteps(db),
  };
}

/**
 * Raw telemetry's pruning: whole day partitions, and `telemetry_default` in batches; and the horizon it
 * leaves (also loaded from what another instance pruned).
 */
function createTelemetryPruning(
  db: PgDatabase,
  partitions: TelemetryPartitions,
  rollups: RollupGate,
  blocks: Pick<PgTelemetryBlocks, 'pruneBefore'>,
) {
  let prunedThroughMs = Number.NEGATIVE_INFINITY;
  const noteHorizon = (newestMs: number | null) => {
    if (newestMs !== null && newestMs > prunedThroughMs) prunedThroughMs = newestMs;
  };

  const loadHorizon = async () => {
    const [row] = await db.query<{ value: string }>('SELECT value FROM settings WHERE key = $1', [
      TELEMETRY_PRUNED_THROUGH_SETTING,
    ]);
    if (row) noteHorizon(Number(row.value));
  };

  /** Drops a day partition if every row in it is rolled up; answers how many rows went with it. */
  const dropPartition = async (p: TelemetryPartition): Promise<number> => {
    // Counted outside the exclusive lock (a day can hold millions of rows). Rows at or below `wm` cannot
    // change any more; a row above it (not rolled up, or stored since) makes the drop wait for a later pass.
    const wm = await rollups.watermark();
    const [c] = await db.query<{ n: number; later: number; newest: number | null }>(
      `SELECT count(*) FILTER (WHERE ${rolledUp(1)}) AS n, count(*) FILTER (WHERE NOT ${rolledUp(1)}) AS later,
         max(ts_ms) AS newest FROM ${p.name}`,
      [wm.txid, wm.id],
    );
    if (!c || c.later > 0) return 0;
    const dropped = await db.tx(async (sql) => {
      await rollups.holdPasses(sql);
      // Parent first, as DROP locks it: no row can be stored between the check and the drop.
      await sql.query('LOCK TABLE ONLY telemetry IN ACCESS EXCLUSIVE MODE');
      if (await hasRowsAbove(sql, p, wm)) return false;
      if (c.newest !== null) await raiseHorizon(sql, c.newest);
      await sql.query(`DROP TABLE ${p.name}`);
      return true;
    });
    if (!dropped) return 0;
    // Its own bookkeeping (the table is gone already).
    await partitions.drop(p);
    noteHorizon(c.newest);
    return c.n;
  };

  /** One batch of `telemetry_default`'s rows from before `before`: how many went. */
  const pruneDefaultPartition = async (before: number): Promise<number> => {
    const out = await db.tx(async (sql) => {
      // Under the pass lock: no rollup chunk reads these rows' neighbours while they go.
      const wm = await rollups.holdPasses(sql);
      const rows = await sql.query<{ ts_ms: number }>(
        `DELETE FROM telemetry_default WHERE ctid = ANY(ARRAY(
           SELECT ctid FROM telemetry_default WHERE ts_ms < $1 AND ${rolledUp(2)} LIMIT ${BATCH}))
         RETURNING ts_ms`,
        [before, wm.txid, wm.id],
      );
      const newest = rows.length ? Math.max(...rows.map((r) => r.ts_ms)) : null;
      if (newest !== null) await raiseHorizon(sql, newest);
      return { n: rows.length, newest };
    });
    noteHorizon(out.newest);
    return out.n;
  };

  return {
    loadHorizon,
    horizonMs: () => prunedThroughMs,
    async prune(before: number, count: CountPruned) {
      for (const p of await partitions.list()) {
        // Oldest first: the first day that has not ended more than the window ago stops the walk.
        if (p.fromMs + DAY_MS >= before) break;
        count('telemetry', await dropPartition(p));
      }
      for (;;) {
        const n = await pruneDefaultPartition(before);
        count('telemetry', n);
        if (n < BATCH) break;
      }
      // Compressed blocks (DESIGN.md §21) go once their hour is older than the window.
      for (;;) {
        const out = await db.tx(async (sql) => {
          const pruned = await blocks.pruneBefore(sql, before);
          if (pruned.deleted > 0) await raiseHorizon(sql, pruned.newestMs);
          return pruned;
        });
        if (out.deleted > 0) noteHorizon(out.newestMs);
        count('telemetry', out.samples);
        if (out.deleted < BATCH) return;
      }
    },
  };
}

/** The steps of history, rollups and diagnostics: statements on `db`, a batch each. */
function historySteps(db: PgDatabase): Omit<RetentionSteps, 'alone' | 'pruneTelemetry'> {
  return {
    pruneDiagnostics: (before) =>
      // A record an upload holds locked (writing a chunk) is left to the next pass.
      deleted(
        db,
        `WITH doomed AS (
           SELECT diagnostics_id FROM diagnostics WHERE created_ms < $1 LIMIT ${DIAGNOSTICS_BATCH}
           FOR UPDATE SKIP LOCKED),
         c AS (DELETE FROM diagnostics_chunks WHERE diagnostics_id IN (SELECT diagnostics_id FROM doomed)),
         d AS (DELETE FROM diagnostics WHERE diagnostics_id IN (SELECT diagnostics_id FROM doomed) RETURNING 1)
         SELECT count(*) AS n FROM d`,
        [before],
      ),
    async devicesAfter(after, limit) {
      const rows = await db.query<{ device_id: string }>(
        'SELECT device_id FROM devices WHERE device_id > $1 ORDER BY device_id LIMIT $2',
        [after, limit],
      );
      return rows.map((r) => r.device_id);
    },
    async pruneDeviceHistory(id, before) {
      const events = await deleted(
        db,
        `WITH d AS (DELETE FROM device_events WHERE id = ANY(ARRAY(
           SELECT id FROM device_events WHERE device_id = $1 AND ts_ms < $2 LIMIT ${BATCH})) RETURNING 1)
         SELECT count(*) AS n FROM d`,
        [id, before],
      );
      const firmware = await deleted(
        db,
        `WITH d AS (DELETE FROM firmware_status WHERE id = ANY(ARRAY(
           SELECT id FROM firmware_status WHERE device_id = $1 AND ts_ms < $2 LIMIT ${BATCH})) RETURNING 1)
         SELECT count(*) AS n FROM d`,
        [id, before],
      );
      return { events, firmware };
    },
    async pruneCommands(before, count) {
      // A finished command never changes again: it goes with its history in one statement.
      for (;;) {
        const n = await deleted(
          db,
          `WITH doomed AS (
             SELECT command_id FROM commands WHERE updated_ms < $1 AND status = ANY($2::text[]) LIMIT ${BATCH}),
           h AS (DELETE FROM command_history WHERE command_id IN (SELECT command_id FROM doomed)),
           d AS (DELETE FROM commands WHERE command_id IN (SELECT command_id FROM doomed) RETURNING 1)
           SELECT count(*) AS n FROM d`,
          [before, FINISHED_COMMANDS],
        );
        count('commands', n);
        if (n < BATCH) return;
      }
    },
    pruneControls: (before) =>
      deleted(
        db,
        `WITH d AS (DELETE FROM controls WHERE control_id = ANY(ARRAY(
           SELECT control_id FROM controls WHERE status <> 'executing' AND ends_ms < $1 LIMIT ${BATCH}))
           RETURNING 1)
         SELECT count(*) AS n FROM d`,
        [before],
      ),
    pruneRollups: (id, before) =>
      deleted(
        db,
        `WITH d AS (DELETE FROM energy_rollups WHERE (device_id, bucket_ms, connector_id) IN (
           SELECT device_id, bucket_ms, connector_id FROM energy_rollups WHERE device_id = $1 AND bucket_ms < $2
           LIMIT ${BATCH}) RETURNING 1)
         SELECT count(*) AS n FROM d`,
        [id, before],
      ),
  };
}

async function hasRowsAbove(sql: Sql, p: TelemetryPartition, wm: RollupWatermark): Promise<boolean> {
  const [row] = await sql.query<{ later: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM ${p.name} WHERE (txid, id) > ($1::xid8, $2::bigint)) AS later`,
    [wm.txid, wm.id],
  );
  return row?.later === true;
}
