import type { TelemetryHistoryRepository } from '../store.js';
import {
  MEASUREMENT_COLUMNS,
  type RawHistoryRow,
  readStart,
  toHistoryRow,
} from '../telemetry-history-rows.js';
import type { SqlReader } from './reader.js';

const AVERAGES = MEASUREMENT_COLUMNS.split(', ')
  .map((m) => `AVG(${m}) AS ${m}`)
  .join(', ');

/**
 * A charger's stored telemetry for operators (DESIGN.md §21), read through `reader` (the worker thread's
 * connection in the server): raw samples walk `telemetry_unique` (device, time, connector) in order and stop
 * at the limit; averaged buckets group one bounded range. SQLite takes a bare column (`state`) from the row
 * of the query's single `max()`: each bucket's last state.
 */
export function createSqliteTelemetryHistory(reader: SqlReader): TelemetryHistoryRepository {
  return {
    async telemetryHistory(read) {
      const start = readStart(read);
      const connector = read.connectorId === undefined ? '' : ' AND connector_id = ?';
      const connectorArg = read.connectorId === undefined ? [] : [read.connectorId];
      if (read.bucketMs === undefined) {
        const rows = await reader.all<RawHistoryRow>(
          `SELECT ts_ms, connector_id, state, ${MEASUREMENT_COLUMNS}, phase_details, 1 AS samples
           FROM telemetry WHERE device_id = ? AND ts_ms >= ? AND ts_ms < ?${connector}
             AND (ts_ms > ? OR connector_id > ?)
           ORDER BY ts_ms, connector_id LIMIT ?`,
          [read.deviceId, start.tsMs, read.endMs, ...connectorArg, start.tsMs, start.connectorId, read.limit],
        );
        return rows.map(toHistoryRow);
      }
      const rows = await reader.all<RawHistoryRow>(
        `SELECT bucket AS ts_ms, connector_id, state, ${MEASUREMENT_COLUMNS}, NULL AS phase_details, samples
         FROM (
           SELECT ts_ms - (ts_ms % ?) AS bucket, connector_id, state, MAX(ts_ms) AS last_ms, COUNT(*) AS samples,
             ${AVERAGES}
           FROM telemetry WHERE device_id = ? AND ts_ms >= ? AND ts_ms < ?${connector}
           GROUP BY bucket, connector_id
         ) WHERE bucket > ? OR connector_id > ?
         ORDER BY bucket, connector_id LIMIT ?`,
        [
          read.bucketMs,
          read.deviceId,
          start.tsMs,
          read.endMs,
          ...connectorArg,
          start.tsMs,
          start.connectorId,
          read.limit,
        ],
      );
      return rows.map(toHistoryRow);
    },
    async firstTelemetryAt(deviceId, connectorId, fromMs, toMs) {
      const connector = connectorId === undefined ? '' : ' AND connector_id = ?';
      const row = await reader.get<{ ts_ms: number | null }>(
        `SELECT MIN(ts_ms) AS ts_ms FROM telemetry WHERE device_id = ? AND ts_ms >= ? AND ts_ms < ?${connector}`,
        [deviceId, fromMs, toMs, ...(connectorId === undefined ? [] : [connectorId])],
      );
      return row?.ts_ms ?? undefined;
    },
  };
}
