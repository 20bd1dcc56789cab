import type { PrunedKind, RetentionPolicy, RetentionStats } from '../retention-policy.js';
import type { PgDatabase, Sql } from './database.js';
import type { PgEnergyRollups, RollupWatermark } from './energy-rollups.js';
import type { TelemetryPartition, TelemetryPartitions } from './telemetry-partitions.js';

/**
 * Retention (DESIGN.md §12) on PostgreSQL, with the semantics of `../sqlite/retention.ts`:
 *
 * - Raw telemetry (`telemetryDays`): a day partition is dropped whole once its day ended more than the window
 *   ago and every row in it is rolled up; rows of `telemetry_default` (far-off clocks) older than the window
 *   are deleted in batches, rolled-up ones only. Unlike SQLite, a row's arrival time does not keep it longer:
 *   a partition goes as a whole (and ids never restart here, so no newest row is kept).
 * - History (`historyDays`): device events, firmware reports, finished commands with their history, and
 *   finished controls; rollups (`rollupDays`). Both in batches, as on SQLite.
 * - Charging records are kept. 0 days keeps that kind forever.
 *
 * One instance prunes at a time (a session advisory lock for the pass); passes of one instance do not overlap.
 */
export interface PgRetention {
  prune(): Promise<void>;
  stats(): RetentionStats;
  idle(): Promise<void>;
  /** The newest time (ms) of any telemetry row pruned: raw telemetry after it is complete. */
  telemetryHorizonMs(): number;
}

/** Stored with each telemetry deletion; the rollup pass reads it too (another instance may have pruned). */
export const TELEMETRY_PRUNED_THROUGH_SETTING = 'telemetry_pruned_through_ms';

const BATCH = 2000;
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
  policy: RetentionPolicy,
  now: () => number,
  partitions: TelemetryPartitions,
  rollups: PgEnergyRollups,
): PgRetention {
  const pruned: Record<PrunedKind, number> = {
    telemetry: 0,
    device_events: 0,
    firmware_status: 0,
    commands: 0,
    controls: 0,
    energy_rollups: 0,
  };
  let prunedThroughMs = Number.NEGATIVE_INFINITY;
  let passes = 0;
  let lastPassMs: number | null = null;
  let lastPassDurationMs: number | null = null;

  const cutoff = (days: number) => now() - days * DAY_MS;
  const notePruned = (rows: number, newestMs: number | null) => {
    pruned.telemetry += rows;
    if (newestMs !== null && newestMs > prunedThroughMs) prunedThroughMs = newestMs;
  };

  const loadHorizon = async () => {
    const [row] = await db.query<{ value: string }>('SELECT value FROM settings WHERE key = $1', [
      TELEMETRY_PRUNED_THROUGH_SETTING,
    ]);
    if (row && Number(row.value) > prunedThroughMs) prunedThroughMs = Number(row.value);
  };

  /** Drops a day partition if every row in it is rolled up; counts its rows first. */
  const dropPartition = async (p: TelemetryPartition): Promise<boolean> => {
    // Counted outside the exclusive lock (a day can hold millions of rows). Rows at or below `wm` cannot
    // change any more; a row above it (not rolled up, or stored since) makes the drop wait for a later pass.
    const wm = await rollups.watermark();
    const [c] = await db.query<{ n: number; later: number; newest: number | null }>(
      `SELECT count(*) FILTER (WHERE ${rolledUp(1)}) AS n, count(*) FILTER (WHERE NOT ${rolledUp(1)}) AS later,
         max(ts_ms) AS newest FROM ${p.name}`,
      [wm.txid, wm.id],
    );
    if (!c || c.later > 0) return false;
    const dropped = await db.tx(async (sql) => {
      await rollups.holdPasses(sql);
      // Parent first, as DROP locks it: no row can be stored between the check and the drop.
      await sql.query('LOCK TABLE ONLY telemetry IN ACCESS EXCLUSIVE MODE');
      if (await hasRowsAbove(sql, p, wm)) return false;
      if (c.newest !== null) await raiseHorizon(sql, c.newest);
      await sql.query(`DROP TABLE ${p.name}`);
      return true;
    });
    if (!dropped) return false;
    // Its own bookkeeping (the table is gone already).
    await partitions.drop(p);
    notePruned(c.n, c.newest);
    return true;
  };

  const pruneDefaultPartition = async (before: number) => {
    for (;;) {
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
      notePruned(out.n, out.newest);
      if (out.n < BATCH) return;
    }
  };

  const pruneTelemetry = async () => {
    const before = cutoff(policy.telemetryDays);
    for (const p of await partitions.list()) {
      // Oldest first: the first day that has not ended more than the window ago stops the walk.
      if (p.fromMs + DAY_MS >= before) break;
      await dropPartition(p);
    }
    await pruneDefaultPartition(before);
  };

  /** Runs `perDevice` for every device, a batch of devices at a time, until each has nothing left. */
  const forEachDevice = async (perDevice: (deviceId: string) => Promise<boolean>) => {
    let after = '';
    for (;;) {
      const rows = await db.query<{ device_id: string }>(
        'SELECT device_id FROM devices WHERE device_id > $1 ORDER BY device_id LIMIT 50',
        [after],
      );
      if (rows.length === 0) return;
      for (const { device_id } of rows) {
        while (await perDevice(device_id)) {
          // This device had a whole batch: there may be more.
        }
      }
      after = rows.at(-1)!.device_id;
    }
  };

  const pruneHistory = async (before: number) => {
    await forEachDevice(async (id) => {
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
      pruned.device_events += events;
      pruned.firmware_status += firmware;
      return events === BATCH || firmware === BATCH;
    });
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
      pruned.commands += n;
      if (n < BATCH) break;
    }
    for (;;) {
      const n = await deleted(
        db,
        `WITH d AS (DELETE FROM controls WHERE control_id = ANY(ARRAY(
           SELECT control_id FROM controls WHERE status <> 'executing' AND ends_ms < $1 LIMIT ${BATCH}))
           RETURNING 1)
         SELECT count(*) AS n FROM d`,
        [before],
      );
      pruned.controls += n;
      if (n < BATCH) break;
    }
  };

  const pruneRollups = (before: number) =>
    forEachDevice(async (id) => {
      const n = await deleted(
        db,
        `WITH d AS (DELETE FROM energy_rollups WHERE (device_id, bucket_ms, connector_id) IN (
           SELECT device_id, bucket_ms, connector_id FROM energy_rollups WHERE device_id = $1 AND bucket_ms < $2
           LIMIT ${BATCH}) RETURNING 1)
         SELECT count(*) AS n FROM d`,
        [id, before],
      );
      pruned.energy_rollups += n;
      return n === BATCH;
    });

  const work = async () => {
    await loadHorizon();
    if (policy.telemetryDays > 0) await pruneTelemetry();
    if (policy.historyDays > 0) await pruneHistory(cutoff(policy.historyDays));
    if (policy.rollupDays > 0) await pruneRollups(cutoff(policy.rollupDays));
  };

  const pass = async () => {
    const started = now();
    if (!(await whileHoldingRetentionLock(db, work))) return;
    passes++;
    lastPassMs = now();
    lastPassDurationMs = lastPassMs - started;
  };

  let running: Promise<void> | undefined;
  return {
    prune() {
      running ??= pass().finally(() => {
        running = undefined;
      });
      return running;
    },
    idle() {
      return running?.catch(() => undefined) ?? Promise.resolve();
    },
    stats() {
      return { pruned: { ...pruned }, passes, lastPassMs, lastPassDurationMs };
    },
    telemetryHorizonMs() {
      return prunedThroughMs;
    },
  };
}

async function hasRowsAbove(sql: Sql, p: TelemetryPartition, wm: RollupWatermark): Promise<boolean> {
  const [row] = await sql.query<{ later: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM ${p.name} WHERE (txid, id) > ($1::xid8, $2::bigint)) AS later`,
    [wm.txid, wm.id],
  );
  return row?.later === true;
}

/**
 * Runs `work` while this process holds the retention lock, on a connection of its own for the whole pass (a
 * session lock: it goes with the connection if the process dies); false, without running it, when another
 * instance holds it.
 */
async function whileHoldingRetentionLock(db: PgDatabase, work: () => Promise<void>): Promise<boolean> {
  const client = await db.pool.connect();
  let broken = false;
  try {
    const { rows } = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1) AS ok', [
      RETENTION_LOCK,
    ]);
    if (rows[0]?.ok !== true) return false;
    try {
      await work();
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [RETENTION_LOCK]).catch(() => {
        broken = true;
      });
    }
    return true;
  } finally {
    // A connection that could not unlock is closed, which releases the lock.
    client.release(broken);
  }
}
