import type { TelemetryHistoryRepository } from '../store.js';
import {
  MEASUREMENT_COLUMNS,
  type RawHistoryRow,
  readStart,
  toHistoryRow,
} from '../telemetry-history-rows.js';
import type { PgDatabase } from './database.js';

const AVERAGES = MEASUREMENT_COLUMNS.split(', ')
  .map((m) => `AVG(${m})::float8 AS ${m}`)
  .join(', ');

/**
 * A charger's stored telemetry for operators on PostgreSQL (DESIGN.md §21), as `../sqlite/telemetry-history.ts`
 * reads it: raw samples in the order of the unique index (device, time, connector), only the day partitions the
 * range touches; averaged buckets group one bounded range, each bucket's state the last by time.
 */
export function createPgTelemetryHistory(db: PgDatabase): TelemetryHistoryRepository {
  return {
    async telemetryHistory(read) {
      const start = readStart(read);
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
      const [row] = await db.query<{ ts_ms: number | null }>(
        `SELECT MIN(ts_ms) AS ts_ms FROM telemetry WHERE device_id = $1 AND ts_ms >= $2 AND ts_ms < $3${connector}`,
        args,
      );
      return row?.ts_ms ?? undefined;
    },
  };
}
