import { bucketsInOrder, type EnergyBucket, MAX_GAP_MS, type PowerSample } from '../../domain/energy.js';
import { type RollupRun, recomputeRollupRun, sumRollups } from '../../domain/energy-rollup.js';
import { createPassQueue } from '../pass-queue.js';
import { TELEMETRY_PRUNED_THROUGH_SETTING } from '../retention-policy.js';
import {
  byConnector,
  connectorKey,
  lateRollupRuns,
  planConnectorRollup,
  type RollupRow,
} from '../rollup-rows.js';
import type { EnergyBucketRow } from '../store.js';
import type { PgDatabase, Sql } from './database.js';
import type { RollupGate, RollupWatermark } from './rollup-watermark.js';
import { blockPowerSamples, newestBlockSamples } from './telemetry-block-reads.js';

/**
 * Keeps `energy_rollups` equal to the integration of the stored telemetry (domain/energy-rollup.ts), behind
 * ingest, as `../sqlite/energy-rollups.ts` does. Row ids are not committed in order on PostgreSQL, so the pass
 * follows committed transactions instead: each row carries the id of the transaction that stored it, and a
 * pass takes only rows of transactions older than its snapshot's xmin (every one of them has ended), in
 * `(txid, id)` order, a chunk per transaction. The watermark `(txid, id)` is stored with the rollup writes:
 * rollups reflect exactly the rows at or below it, so a recompute of late data reads only those.
 */
export interface PgEnergyRollups extends RollupGate {
  /** Rolls up every committed telemetry row; concurrent calls share one pass. */
  catchUp(): Promise<void>;
  /** Rows not rolled up yet, as of the last pass (for /metrics). */
  lagRows(): number;
  /** Settles when no pass is running (before the pool closes). */
  idle(): Promise<void>;
  /** Summed buckets of these devices, in [startMs, endMs), by intervalMs, after catching up. */
  buckets(
    deviceIds: readonly string[],
    startMs: number,
    endMs: number,
    intervalMs: number,
  ): Promise<EnergyBucketRow[]>;
}

const WATERMARK_SETTING = 'energy_rollups_up_to';
/** Any number unique to this program (see MIGRATION_LOCK in database.ts): one pass at a time. */
const PASS_LOCK = 7_340_315_002;
/** Rows per transaction. */
const CHUNK_ROWS = 4000;
/** How long a catch-up waits for older transactions (anywhere in the cluster) to end, ms. */
const MAX_SETTLE_MS = 5_000;
/** How far inside the telemetry retention window a late row must be for its buckets to be recomputed. */
const LATE_MARGIN_MS = 3_600_000;
const START: RollupWatermark = { txid: '0', id: 0 };

interface NewRow extends RollupRow {
  txid: string;
  id: number;
}

const keyOf = (w: RollupWatermark) => `${w.txid}:${w.id}`;

async function readWatermark(sql: Sql): Promise<RollupWatermark> {
  const [row] = await sql.query<{ value: string }>('SELECT value FROM settings WHERE key = $1', [
    WATERMARK_SETTING,
  ]);
  if (!row) return START;
  const [txid = '0', id = '0'] = row.value.split(':');
  return { txid, id: Number(id) };
}

/** Takes the pass lock for this transaction: waiting for it, or false at once when another holds it. */
async function lockPasses(sql: Sql, wait: boolean): Promise<boolean> {
  if (wait) {
    await sql.query('SELECT pg_advisory_xact_lock($1)', [PASS_LOCK]);
    return true;
  }
  const [row] = await sql.query<{ ok: boolean }>('SELECT pg_try_advisory_xact_lock($1) AS ok', [PASS_LOCK]);
  return row?.ok === true;
}

/** The connector's newest rolled-up samples: the ones appended rows continue from. */
async function newestRolledUp(
  sql: Sql,
  connectors: ReadonlyArray<{ device_id: string; connector_id: number }>,
  wm: RollupWatermark,
): Promise<Map<string, PowerSample>> {
  const rows = await sql.query<PowerSample & { device_id: string }>(
    `SELECT k.device_id, k.connector_id, t.ts_ms, t.power
     FROM unnest($1::text[], $2::int[]) AS k(device_id, connector_id)
     CROSS JOIN LATERAL (
       SELECT ts_ms, power FROM telemetry
       WHERE device_id = k.device_id AND connector_id = k.connector_id AND (txid, id) <= ($3::xid8, $4::bigint)
       ORDER BY ts_ms DESC LIMIT 1) t`,
    [connectors.map((c) => c.device_id), connectors.map((c) => c.connector_id), wm.txid, wm.id],
  );
  const newest = new Map(rows.map((r) => [connectorKey(r), r]));
  // Compacted samples (DESIGN.md §21) were rolled up before they moved: the newer of the two is the newest.
  for (const b of await newestBlockSamples(sql, connectors)) {
    const recent = newest.get(connectorKey(b));
    if (!recent || recent.ts_ms < b.ts_ms) newest.set(connectorKey(b), b);
  }
  return newest;
}

interface BucketWrite extends EnergyBucket {
  device_id: string;
  connector_id: number;
}

/** Adds the buckets to what is stored (each key at most once per call, as ON CONFLICT requires). */
async function addBuckets(sql: Sql, rows: readonly BucketWrite[]): Promise<void> {
  if (rows.length === 0) return;
  const col = <K extends keyof BucketWrite>(k: K) => rows.map((r) => r[k]);
  await sql.query(
    `INSERT INTO energy_rollups AS r (device_id, bucket_ms, connector_id, imported_kwh, exported_kwh, power_sum,
       max_power, samples)
     SELECT * FROM unnest($1::text[], $2::bigint[], $3::int[], $4::float8[], $5::float8[], $6::float8[],
       $7::float8[], $8::bigint[])
     ON CONFLICT (device_id, bucket_ms, connector_id) DO UPDATE SET
       imported_kwh = r.imported_kwh + excluded.imported_kwh, exported_kwh = r.exported_kwh + excluded.exported_kwh,
       power_sum = r.power_sum + excluded.power_sum, max_power = GREATEST(r.max_power, excluded.max_power),
       samples = r.samples + excluded.samples`,
    [
      col('device_id'),
      col('start_ms'),
      col('connector_id'),
      col('imported_kwh'),
      col('exported_kwh'),
      col('power_sum'),
      col('max_power'),
      col('samples'),
    ],
  );
}

/**
 * The samples in time order, each instant once (a block's first: a sample re-sent while its hour was being
 * compacted elsewhere may also sit in the recent table until the next pass merges it).
 */
function onePerInstant(samples: readonly PowerSample[]): PowerSample[] {
  const byTime = new Map<number, PowerSample>();
  for (const s of samples) if (!byTime.has(s.ts_ms)) byTime.set(s.ts_ms, s);
  return [...byTime.values()].sort((a, b) => a.ts_ms - b.ts_ms);
}

/** A connector's buckets in `run` from its raw samples at or below `upTo` (replacing what is stored). */
async function recomputeRun(
  sql: Sql,
  deviceId: string,
  connectorId: number,
  run: RollupRun,
  upTo: RollupWatermark,
): Promise<BucketWrite[]> {
  const fromMs = run.startMs - MAX_GAP_MS;
  const toMs = run.endMs + MAX_GAP_MS;
  const recent = await sql.query<PowerSample>(
    `SELECT connector_id, ts_ms, power FROM telemetry
     WHERE device_id = $1 AND ts_ms >= $2 AND ts_ms <= $3 AND connector_id = $4
       AND (txid, id) <= ($5::xid8, $6::bigint)
     ORDER BY ts_ms`,
    [deviceId, fromMs, toMs, connectorId, upTo.txid, upTo.id],
  );
  const samples = onePerInstant([
    ...(await blockPowerSamples(sql, deviceId, connectorId, fromMs, toMs)),
    ...recent,
  ]);
  await sql.query(
    'DELETE FROM energy_rollups WHERE device_id = $1 AND connector_id = $2 AND bucket_ms >= $3 AND bucket_ms < $4',
    [deviceId, connectorId, run.startMs, run.endMs],
  );
  return recomputeRollupRun(samples, run).map((b) => ({
    ...b,
    device_id: deviceId,
    connector_id: connectorId,
  }));
}

/** What one chunk did; applied to the in-memory state only once its transaction committed. */
interface ChunkOutcome {
  kind: 'busy' | 'done' | 'more';
  /** The watermark after the chunk (unchanged when there was nothing). */
  watermark: RollupWatermark;
  /** The watermark the chunk started from. */
  from: RollupWatermark;
  newest: Map<string, PowerSample>;
}

export function createPgEnergyRollups(db: PgDatabase, telemetryHorizonMs: () => number): PgEnergyRollups {
  // Each connector's newest rolled-up sample, valid at the watermark it was noted at.
  const newest = new Map<string, PowerSample>();
  let newestAt: string | undefined;
  let lag = 0;

  /** Where late rows stop being recomputed: near what retention may have pruned (by any instance). */
  const lateFloor = async (sql: Sql) => {
    const [row] = await sql.query<{ value: string }>('SELECT value FROM settings WHERE key = $1', [
      TELEMETRY_PRUNED_THROUGH_SETTING,
    ]);
    const stored = row ? Number(row.value) : Number.NEGATIVE_INFINITY;
    return Math.max(stored, telemetryHorizonMs()) + LATE_MARGIN_MS;
  };

  const chunk = async (sql: Sql, wait: boolean): Promise<ChunkOutcome> => {
    const noted = new Map<string, PowerSample>();
    if (!(await lockPasses(sql, wait))) return { kind: 'busy', watermark: START, from: START, newest: noted };
    const wm = await readWatermark(sql);
    // Another instance (or a failed transaction) moved the watermark: what is remembered may be stale.
    const cached = newestAt === keyOf(wm) ? newest : new Map<string, PowerSample>();
    const rows = await sql.query<NewRow>(
      // Ordered by the column, not by the text it is returned as (`ORDER BY txid` would name the output
      // column: '99999' sorts after '154142', and the index could not serve the order).
      `SELECT t.txid::text AS txid, t.id, t.device_id, t.connector_id, t.ts_ms, t.power FROM telemetry t
       WHERE (t.txid, t.id) > ($1::xid8, $2::bigint) AND t.txid < pg_snapshot_xmin(pg_current_snapshot())
       ORDER BY t.txid, t.id LIMIT ${CHUNK_ROWS}`,
      [wm.txid, wm.id],
    );
    const last = rows.at(-1);
    if (!last) return { kind: 'done', watermark: wm, from: wm, newest: noted };
    const upTo = { txid: last.txid, id: last.id };
    const groups = byConnector(rows);
    const missing = [...groups.entries()].filter(([k]) => !cached.has(k)).map(([, g]) => g[0]!);
    const stored = missing.length ? await newestRolledUp(sql, missing, wm) : new Map<string, PowerSample>();
    const writes: BucketWrite[] = [];
    let floor: number | undefined;
    for (const [key, group] of groups) {
      const { device_id, connector_id } = group[0]!;
      const plan = planConnectorRollup(cached.get(key) ?? stored.get(key), group);
      if (plan.deltas) {
        for (const b of plan.deltas) writes.push({ ...b, device_id, connector_id });
      } else {
        floor ??= await lateFloor(sql);
        for (const run of lateRollupRuns(group, floor)) {
          writes.push(...(await recomputeRun(sql, device_id, connector_id, run, upTo)));
        }
      }
      noted.set(key, plan.newest);
    }
    await addBuckets(sql, writes);
    await sql.query(
      'INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value',
      [WATERMARK_SETTING, keyOf(upTo)],
    );
    return { kind: rows.length === CHUNK_ROWS ? 'more' : 'done', watermark: upTo, from: wm, newest: noted };
  };

  /** Committed rows above the stored watermark, and how many of them a pass could take now. */
  const pending = async () => {
    const wm = await readWatermark(db);
    const [row] = await db.query<{ lag: number; ready: number }>(
      `SELECT count(*) AS lag,
         count(*) FILTER (WHERE txid < pg_snapshot_xmin(pg_current_snapshot())) AS ready
       FROM telemetry WHERE (txid, id) > ($1::xid8, $2::bigint)`,
      [wm.txid, wm.id],
    );
    return { lag: row?.lag ?? 0, ready: row?.ready ?? 0 };
  };

  /** One pass; false when another instance was running one (and `wait` was not asked for). */
  const pass = async (wait: boolean): Promise<boolean> => {
    const before = await pending();
    lag = before.lag;
    // Nothing to take: no transaction at all (the timer fires every second).
    if (before.ready === 0) return true;
    try {
      for (;;) {
        const out = await db.tx((sql) => chunk(sql, wait));
        if (out.kind === 'busy') return false;
        if (newestAt !== keyOf(out.from)) newest.clear();
        for (const [k, v] of out.newest) newest.set(k, v);
        newestAt = keyOf(out.watermark);
        if (out.kind === 'done') break;
      }
    } catch (err) {
      newest.clear();
      newestAt = undefined;
      throw err;
    }
    lag = (await pending()).lag;
    return true;
  };

  // A reader (`buckets`) needs every committed row, so its pass waits for another instance's chunk instead of
  // leaving the rest to it.
  const passes = createPassQueue(pass);

  /**
   * Passes until every row committed before the call is rolled up. A pass takes only transactions older than
   * every one still running (in the whole cluster): rows committed by a younger one wait until those end.
   */
  const settle = async (wait: boolean) => {
    const [at] = await db.query<{ snapshot: string }>('SELECT pg_current_snapshot()::text AS snapshot');
    const started = Date.now();
    for (let delay = 5; ; delay = Math.min(2 * delay, 200)) {
      if (!(await passes.schedule(wait))) return;
      if (!at || !(await unrolledBefore(at.snapshot)) || Date.now() - started > MAX_SETTLE_MS) return;
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  };
  const settling = new Set<Promise<void>>();
  const tracked = (p: Promise<void>) => {
    settling.add(p);
    const forget = () => settling.delete(p);
    p.then(forget, forget);
    return p;
  };
  /** Whether rows visible in `snapshot` (committed before it was taken) are above the watermark. */
  const unrolledBefore = async (snapshot: string) => {
    const wm = await readWatermark(db);
    const [row] = await db.query<{ waiting: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM telemetry WHERE (txid, id) > ($1::xid8, $2::bigint)
         AND pg_visible_in_snapshot(txid, $3::pg_snapshot)) AS waiting`,
      [wm.txid, wm.id, snapshot],
    );
    return row?.waiting === true;
  };

  return {
    catchUp: () => tracked(settle(false)),
    async idle() {
      // A catch-up between passes (waiting for older transactions) would start another one.
      await Promise.allSettled([...settling, passes.idle()]);
    },
    lagRows: () => lag,
    watermark: () => readWatermark(db),
    async holdPasses(sql) {
      await lockPasses(sql, true);
      return readWatermark(sql);
    },
    async buckets(deviceIds, startMs, endMs, intervalMs) {
      // If the pass fails (the database is down), the answer is what is rolled up, as on SQLite.
      await tracked(settle(true)).catch(() => undefined);
      const rows = await db.query<EnergyBucketRow>(
        `SELECT bucket_ms AS start_ms, SUM(imported_kwh) AS imported_kwh, SUM(exported_kwh) AS exported_kwh,
           SUM(power_sum) AS power_sum, MAX(max_power) AS max_power, SUM(samples) AS samples
         FROM energy_rollups WHERE device_id = ANY($1::text[]) AND bucket_ms >= $2 AND bucket_ms < $3
         GROUP BY bucket_ms`,
        [deviceIds, startMs, endMs],
      );
      return bucketsInOrder(sumRollups(rows, { startMs, endMs, intervalMs }));
    },
  };
}
