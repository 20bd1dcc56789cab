import type { TelemetryRecord } from '../../../shared/index.js';
import { RETENTION_BATCH } from '../retention-policy.js';
import {
  type BlockSample,
  decodeBlock,
  encodeBlock,
  encodeSummary,
  mergeSamples,
} from '../telemetry-block.js';
import {
  BLOCK_MS,
  blockStart,
  type CompactableRow,
  compactedBefore,
  compactionHorizon,
  groupIntoBlocks,
} from '../telemetry-compaction.js';
import { MEASUREMENT_COLUMNS } from '../telemetry-history-rows.js';
import type { PgDatabase, Sql } from './database.js';
import type { RollupGate } from './rollup-watermark.js';
import type { TelemetryPartitions } from './telemetry-partitions.js';

const DAY_MS = 86_400_000;

/**
 * Compressed telemetry blocks on PostgreSQL (DESIGN.md §21), as `../sqlite/telemetry-blocks.ts`: the compaction
 * pass, a device-hour per transaction, and what ingest, rollups and retention ask of the blocks.
 *
 * Each compaction transaction holds the rollup passes' lock: a pass never reads a connector's samples while
 * they move between the recent table and a block, and compaction takes only rows at or below the rollups'
 * watermark, read under that lock. Several instances may run passes at once: the lock orders them, and a
 * device-hour already moved has nothing left to move.
 */
export interface PgTelemetryBlocks {
  /** One pass over every device; the samples it moved. Concurrent calls share the pass. */
  compact(): Promise<number>;
  /** The records of `deviceId` not already in a block (re-sent samples of compacted hours are duplicates). */
  notCompacted(deviceId: string, records: readonly TelemetryRecord[]): Promise<TelemetryRecord[]>;
  /**
   * Inside a transaction: one batch of blocks whose hour ended before `beforeMs`, as SQLite's `pruneBefore`
   * (blocks hold rolled-up samples only: nothing waits for the rollups).
   */
  pruneBefore(sql: Sql, beforeMs: number): Promise<{ deleted: number; samples: number; newestMs: number }>;
}

/** Old blocks given their summary per round trip batch: a few milliseconds of decoding. */
const SUMMARY_BATCH = 50;

export function createPgTelemetryBlocks(
  db: PgDatabase,
  now: () => number,
  rollups: () => RollupGate,
  partitions: Pick<TelemetryPartitions, 'list'>,
): PgTelemetryBlocks {
  /**
   * Empties, for good, the day partitions compaction has emptied: deleted rows would keep their space (and
   * autovacuum's work) until retention drops the day a month later. Checked and truncated under the
   * partition's lock, so that a late row stored meanwhile is never lost.
   */
  const truncateCompactedDays = async (horizonMs: number) => {
    for (const p of await partitions.list()) {
      if (p.fromMs + DAY_MS > horizonMs) return;
      await db.tx(async (sql) => {
        const [size] = await sql.query<{ n: number }>('SELECT pg_relation_size($1::regclass) AS n', [p.name]);
        if (!size || size.n === 0) return;
        await sql.query(`LOCK TABLE ${p.name} IN ACCESS EXCLUSIVE MODE`);
        const [row] = await sql.query<{ any: boolean }>(`SELECT EXISTS (SELECT 1 FROM ${p.name}) AS any`);
        if (row?.any === false) await sql.query(`TRUNCATE ${p.name}`);
      });
    }
  };

  /** Moves one device's compactable rows of its oldest hour that has any: the samples moved, 0 when none. */
  const compactHour = (deviceId: string, horizonMs: number) =>
    db.tx(async (sql) => {
      const wm = await rollups().holdPasses(sql);
      const eligible = `device_id = $1 AND (txid, id) <= ($2::xid8, $3::bigint)`;
      const [first] = await sql.query<{ ts_ms: number | null }>(
        `SELECT MIN(ts_ms) AS ts_ms FROM telemetry WHERE ${eligible} AND ts_ms < $4`,
        [deviceId, wm.txid, wm.id, horizonMs],
      );
      if (first?.ts_ms === null || first?.ts_ms === undefined) return 0;
      const fromMs = blockStart(first.ts_ms);
      const toMs = Math.min(horizonMs, fromMs + BLOCK_MS);
      const rows = await sql.query<Omit<CompactableRow, 'phase_details'> & { phase_details: string | null }>(
        `SELECT connector_id, ts_ms, state, ${MEASUREMENT_COLUMNS}, phase_details::text AS phase_details
         FROM telemetry WHERE ${eligible} AND ts_ms >= $4 AND ts_ms < $5`,
        [deviceId, wm.txid, wm.id, fromMs, toMs],
      );
      for (const g of groupIntoBlocks(rows)) {
        const [stored] = await sql.query<{ data: Buffer }>(
          `SELECT data FROM telemetry_blocks WHERE device_id = $1 AND connector_id = $2 AND start_ms = $3
           FOR UPDATE`,
          [deviceId, g.connectorId, g.startMs],
        );
        const samples = stored ? mergeSamples(decodeBlock(stored.data), g.samples) : g.samples;
        await sql.query(
          `INSERT INTO telemetry_blocks (device_id, connector_id, start_ms, first_ms, last_ms, samples, data, summary)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
           ON CONFLICT (device_id, connector_id, start_ms) DO UPDATE SET first_ms = excluded.first_ms,
             last_ms = excluded.last_ms, samples = excluded.samples, data = excluded.data,
             summary = excluded.summary`,
          [
            deviceId,
            g.connectorId,
            g.startMs,
            (samples[0] as BlockSample).ts_ms,
            (samples.at(-1) as BlockSample).ts_ms,
            samples.length,
            encodeBlock(samples),
            encodeSummary(samples, g.startMs),
          ],
        );
      }
      await sql.query(`DELETE FROM telemetry WHERE ${eligible} AND ts_ms >= $4 AND ts_ms < $5`, [
        deviceId,
        wm.txid,
        wm.id,
        fromMs,
        toMs,
      ]);
      return rows.length;
    });

  let running: Promise<number> | undefined;
  const pass = async (): Promise<number> => {
    const horizonMs = compactionHorizon(now());
    let moved = 0;
    for (let after = ''; ; ) {
      const ids = (
        await db.query<{ device_id: string }>(
          'SELECT device_id FROM devices WHERE device_id > $1 ORDER BY device_id LIMIT 100',
          [after],
        )
      ).map((r) => r.device_id);
      for (const id of ids) {
        // Most passes find nothing to move for most devices: an index probe says so without a transaction
        // that waits for the rollup passes' lock.
        const [any] = await db.query('SELECT 1 FROM telemetry WHERE device_id = $1 AND ts_ms < $2 LIMIT 1', [
          id,
          horizonMs,
        ]);
        if (!any) continue;
        for (let n = 1; n > 0; moved += n) n = await compactHour(id, horizonMs);
      }
      if (ids.length < 100) break;
      after = ids.at(-1) as string;
    }
    await truncateCompactedDays(horizonMs);
    while ((await summarizeSome()) === SUMMARY_BATCH);
    return moved;
  };
  /**
   * Gives blocks compacted before summaries existed theirs, a batch at a time (found by a partial index). Another
   * instance doing the same writes the same bytes.
   */
  const summarizeSome = async (): Promise<number> => {
    const rows = await db.query<{ device_id: string; connector_id: number; start_ms: number; data: Buffer }>(
      `SELECT device_id, connector_id, start_ms, data FROM telemetry_blocks WHERE summary IS NULL
       ORDER BY start_ms LIMIT $1`,
      [SUMMARY_BATCH],
    );
    for (const r of rows)
      await db.query(
        `UPDATE telemetry_blocks SET summary = $4
         WHERE device_id = $1 AND connector_id = $2 AND start_ms = $3 AND summary IS NULL`,
        [r.device_id, r.connector_id, r.start_ms, encodeSummary(decodeBlock(r.data), r.start_ms)],
      );
    return rows.length;
  };

  return {
    compact() {
      running ??= pass().finally(() => {
        running = undefined;
      });
      return running;
    },
    async notCompacted(deviceId, records) {
      const before = compactedBefore(now());
      const old = records.filter((r) => Date.parse(r.timestamp) < before);
      if (old.length === 0) return [...records];
      const keys = [...new Set(old.map((r) => `${r.connector_id}|${blockStart(Date.parse(r.timestamp))}`))];
      const blocks = await db.query<{ connector_id: number; data: Buffer }>(
        `SELECT b.connector_id, b.data FROM telemetry_blocks b
         JOIN unnest($2::int[], $3::bigint[]) AS k(connector_id, start_ms)
           ON b.connector_id = k.connector_id AND b.start_ms = k.start_ms
         WHERE b.device_id = $1`,
        [deviceId, keys.map((k) => Number(k.split('|')[0])), keys.map((k) => Number(k.split('|')[1]))],
      );
      if (blocks.length === 0) return [...records];
      const held = new Set<string>();
      for (const b of blocks) for (const s of decodeBlock(b.data)) held.add(`${b.connector_id}|${s.ts_ms}`);
      return records.filter((r) => !held.has(`${r.connector_id}|${Date.parse(r.timestamp)}`));
    },
    async pruneBefore(sql, beforeMs) {
      const rows = await sql.query<{ last_ms: number; samples: number }>(
        `DELETE FROM telemetry_blocks WHERE ctid IN (
           SELECT ctid FROM telemetry_blocks WHERE start_ms < $1 LIMIT $2)
         RETURNING last_ms, samples`,
        [beforeMs - BLOCK_MS + 1, RETENTION_BATCH],
      );
      return {
        deleted: rows.length,
        samples: rows.reduce((n, r) => n + r.samples, 0),
        newestMs: rows.reduce((m, r) => Math.max(m, r.last_ms), Number.NEGATIVE_INFINITY),
      };
    },
  };
}
