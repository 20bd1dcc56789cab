import { CONNECTORS_PER_DEVICE_MAX } from '../../../shared/index.js';
import type { TelemetryHistoryRead, TelemetryHistoryRepository } from '../store.js';
import * as blockCodec from '../telemetry-block.js';
import { BLOCK_MS, type CompactableRow } from '../telemetry-compaction.js';
import {
  type FetchedBlock,
  historyFromColumns,
  MEASUREMENT_COLUMNS,
  planBlocks,
  type RawHistoryRow,
  rawPageEnd,
  readStart,
  toHistoryRow,
} from '../telemetry-history-rows.js';
import type { PgDatabase } from './database.js';

const AVERAGES = MEASUREMENT_COLUMNS.split(', ')
  .map((m) => `AVG(${m})::float8 AS ${m}`)
  .join(', ');

/** Blocks decoded per turn of the event loop: about 2 ms of work between the charger requests waiting. */
const DECODE_CHUNK = 16;

/**
 * The blocks' columns. PostgreSQL reads have no worker thread (the SQLite reader's): a week's blocks take tens
 * of milliseconds to decode, so this lets the event loop serve requests between chunks.
 */
async function decodeYielding(blocks: readonly FetchedBlock[]): Promise<blockCodec.BlockColumns[]> {
  const out: blockCodec.BlockColumns[] = [];
  for (let k = 0; k < blocks.length; k++) {
    if (k > 0 && k % DECODE_CHUNK === 0) await new Promise((resolve) => setImmediate(resolve));
    out.push(blockCodec.decodeColumns((blocks[k] as FetchedBlock).data));
  }
  return out;
}

/**
 * A charger's stored telemetry for operators on PostgreSQL (DESIGN.md §21), as `../sqlite/telemetry-history.ts`
 * reads it: raw samples in the order of the unique index (device, time, connector), only the day partitions the
 * range touches; averaged buckets group one bounded range, each bucket's state the last by time.
 */
export function createPgTelemetryHistory(db: PgDatabase): TelemetryHistoryRepository {
  /**
   * The read's compressed blocks (DESIGN.md §21), decoded, and up to when they answer it: a raw page needs
   * only the hours that hold its `limit` samples (as `../sqlite/telemetry-history.ts` chooses them).
   */
  const fetchBlocks = async (read: TelemetryHistoryRead, fromMs: number) => {
    const args: unknown[] = [read.deviceId, fromMs - BLOCK_MS, read.endMs, fromMs];
    const connector =
      read.connectorId === undefined ? '' : ` AND connector_id = $${args.push(read.connectorId)}`;
    const where = `device_id = $1${connector} AND start_ms > $2 AND start_ms < $3 AND last_ms >= $4`;
    let untilMs = read.endMs;
    if (read.bucketMs === undefined) {
      const counts = await db.query<{ start_ms: number; samples: number }>(
        `SELECT start_ms, SUM(samples)::int AS samples FROM telemetry_blocks WHERE ${where}
         GROUP BY start_ms ORDER BY start_ms`,
        args,
      );
      untilMs = rawPageEnd(counts, fromMs, read);
    }
    const blocks = await db.query<FetchedBlock>(
      `SELECT connector_id, start_ms, data, summary, samples FROM telemetry_blocks WHERE ${where} AND start_ms < $${args.length + 1}
       ORDER BY start_ms, connector_id`,
      [...args, untilMs],
    );
    return { blocks, untilMs };
  };
  /** The recent table's samples of the read, as they are (for merging with blocks). */
  const recentSamples = async (read: TelemetryHistoryRead, fromMs: number) => {
    const args: unknown[] = [read.deviceId, fromMs, read.endMs];
    const connector =
      read.connectorId === undefined ? '' : ` AND connector_id = $${args.push(read.connectorId)}`;
    const limit =
      read.bucketMs === undefined ? ` LIMIT $${args.push(read.limit + CONNECTORS_PER_DEVICE_MAX)}` : '';
    return db.query<CompactableRow>(
      `SELECT connector_id, ts_ms, state, ${MEASUREMENT_COLUMNS}, phase_details::text AS phase_details
       FROM telemetry WHERE device_id = $1 AND ts_ms >= $2 AND ts_ms < $3${connector}
       ORDER BY ts_ms, connector_id${limit}`,
      args,
    );
  };
  return {
    async telemetryHistory(read) {
      const start = readStart(read);
      const compacted = await fetchBlocks(read, start.tsMs);
      if (compacted.blocks.length > 0) {
        const page = { ...read, endMs: compacted.untilMs };
        const recent = await recentSamples(page, start.tsMs);
        const plan = planBlocks(compacted.blocks, recent, page, blockCodec);
        const columns = await decodeYielding(plan.decode);
        return historyFromColumns(plan, columns, recent, page, blockCodec);
      }
      const args: unknown[] = [read.deviceId, start.tsMs, read.endMs, start.connectorId, read.limit];
      const connector =
        read.connectorId === undefined ? '' : ` AND connector_id = $${args.push(read.connectorId)}`;
      if (read.bucketMs === undefined) {
        const rows = await db.query<RawHistoryRow>(
          `SELECT ts_ms, connector_id, state, ${MEASUREMENT_COLUMNS}, phase_details, 1 AS samples
           FROM telemetry WHERE device_id = $1 AND ts_ms >= $2 AND ts_ms < $3${connector}
             AND (ts_ms > $2 OR connector_id > $4)
           ORDER BY ts_ms, connector_id LIMIT $5`,
          args,
        );
        return rows.map(toHistoryRow);
      }
      const bucket = `$${args.push(read.bucketMs)}::bigint`;
      const rows = await db.query<RawHistoryRow>(
        `SELECT bucket AS ts_ms, connector_id, state, ${MEASUREMENT_COLUMNS}, NULL AS phase_details, samples
         FROM (
           SELECT ts_ms - (ts_ms % ${bucket}) AS bucket, connector_id, COUNT(*)::int AS samples,
             (array_agg(state ORDER BY ts_ms DESC))[1] AS state, ${AVERAGES}
           FROM telemetry WHERE device_id = $1 AND ts_ms >= $2 AND ts_ms < $3${connector}
           GROUP BY 1, 2
         ) b WHERE bucket > $2 OR connector_id > $4
         ORDER BY bucket, connector_id LIMIT $5`,
        args,
      );
      return rows.map(toHistoryRow);
    },
    async firstTelemetryAt(deviceId, connectorId, fromMs, toMs) {
      const args: unknown[] = [deviceId, fromMs, toMs];
      const connector = connectorId === undefined ? '' : ` AND connector_id = $${args.push(connectorId)}`;
      // A block that holds `fromMs` starts before it: `fromMs` is then as early as its samples can matter.
      const [row] = await db.query<{ ts_ms: number | null }>(
        `SELECT LEAST(
           (SELECT MIN(ts_ms) FROM telemetry WHERE device_id = $1 AND ts_ms >= $2 AND ts_ms < $3${connector}),
           (SELECT CASE WHEN MIN(first_ms) IS NULL THEN NULL ELSE GREATEST(MIN(first_ms), $2::bigint) END
            FROM telemetry_blocks
            WHERE device_id = $1 AND last_ms >= $2 AND first_ms < $3${connector})) AS ts_ms`,
        args,
      );
      return row?.ts_ms ?? undefined;
    },
  };
}
