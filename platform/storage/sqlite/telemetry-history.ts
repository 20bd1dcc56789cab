import { CONNECTORS_PER_DEVICE_MAX } from '../../../shared/index.js';
import type { TelemetryHistoryRead, TelemetryHistoryRepository } from '../store.js';
import { BLOCK_MS } from '../telemetry-compaction.js';
import { type HistoryStatements, MEASUREMENT_COLUMNS, readStart } from '../telemetry-history-rows.js';
import type { SqlReader } from './reader.js';
import { deviceKeyOf } from './telemetry-keys.js';

const AVERAGES = MEASUREMENT_COLUMNS.split(', ')
  .map((m) => `AVG(${m}) AS ${m}`)
  .join(', ');

/**
 * A charger's stored telemetry for operators (DESIGN.md §21), read through `reader`: in the server its worker
 * thread runs the statements, decodes the blocks and builds the page (`runHistoryRead`), so that none of it
 * holds up the thread that serves chargers. Raw samples of the recent table walk `telemetry_recent_unique` (device,
 * time, connector) in order and stop at the limit; averaged buckets group one bounded range, SQLite taking a
 * bare column (`state`) from the row of the query's single `max()`: each bucket's last state. Where blocks
 * hold part of the range, blocks and recent rows are merged: a raw page fetches only the blocks of the hours
 * its samples need.
 */
export function createSqliteTelemetryHistory(reader: SqlReader): TelemetryHistoryRepository {
  return {
    telemetryHistory(read) {
      return reader.telemetryHistory(historyStatements(read));
    },
    async firstTelemetryAt(deviceId, connectorId, fromMs, toMs) {
      const connector = connectorId === undefined ? '' : ' AND connector_id = ?';
      const args = [deviceId, fromMs, toMs, ...(connectorId === undefined ? [] : [connectorId])];
      // A block that holds `fromMs` starts before it: `fromMs` is then as early as its samples can matter.
      const row = await reader.get<{ ts_ms: number | null }>(
        `SELECT MIN(t) AS ts_ms FROM (
           SELECT MIN(ts_ms) AS t FROM telemetry_recent
           WHERE device_key = ${deviceKeyOf('?')} AND ts_ms >= ? AND ts_ms < ?${connector}
           UNION ALL
           SELECT MAX(MIN(first_ms), ?) FROM telemetry_blocks
           WHERE device_id = ? AND last_ms >= ? AND first_ms < ?${connector})`,
        [...args, fromMs, ...args],
      );
      return row?.ts_ms ?? undefined;
    },
  };
}

/** The statements of `read` (`../telemetry-history-rows.ts`), with named parameters. */
function historyStatements(read: TelemetryHistoryRead): HistoryStatements {
  const start = readStart(read);
  const params = {
    device: read.deviceId,
    connector: read.connectorId ?? null,
    from: start.tsMs,
    afterConnector: start.connectorId,
    end: read.endMs,
    limit: read.limit,
    bucket: read.bucketMs ?? null,
    fromBlock: start.tsMs - BLOCK_MS,
    // Raw: the first `limit` after the cursor are among these (an instant has at most one per connector).
    recentLimit: read.limit + CONNECTORS_PER_DEVICE_MAX,
  };
  const connector = read.connectorId === undefined ? '' : ' AND connector_id = @connector';
  const key = deviceKeyOf('@device');
  const blocksWhere = `device_id = @device${connector} AND start_ms > @fromBlock AND start_ms < @end AND last_ms >= @from`;
  const raw = read.bucketMs === undefined;
  const plain = raw
    ? `SELECT ts_ms, connector_id, state, ${MEASUREMENT_COLUMNS}, phase_details, 1 AS samples
       FROM telemetry_recent WHERE device_key = ${key} AND ts_ms >= @from AND ts_ms < @end${connector}
         AND (ts_ms > @from OR connector_id > @afterConnector)
       ORDER BY ts_ms, connector_id LIMIT @limit`
    : `SELECT bucket AS ts_ms, connector_id, state, ${MEASUREMENT_COLUMNS}, NULL AS phase_details, samples
       FROM (
         SELECT ts_ms - (ts_ms % @bucket) AS bucket, connector_id, state, MAX(ts_ms) AS last_ms,
           COUNT(*) AS samples, ${AVERAGES}
         FROM telemetry_recent WHERE device_key = ${key} AND ts_ms >= @from AND ts_ms < @end${connector}
         GROUP BY bucket, connector_id
       ) WHERE bucket > @from OR connector_id > @afterConnector
       ORDER BY bucket, connector_id LIMIT @limit`;
  return {
    read,
    fromMs: start.tsMs,
    ...(raw
      ? {
          blockCounts: {
            sql: `SELECT start_ms, SUM(samples) AS samples FROM telemetry_blocks WHERE ${blocksWhere}
                  GROUP BY start_ms ORDER BY start_ms`,
            params,
          },
        }
      : {}),
    blocks: {
      sql: `SELECT connector_id, start_ms, data, summary, samples FROM telemetry_blocks WHERE ${blocksWhere} AND start_ms < @until
            ORDER BY start_ms, connector_id`,
      params,
    },
    recent: {
      sql: `SELECT connector_id, ts_ms, state, ${MEASUREMENT_COLUMNS}, phase_details FROM telemetry_recent
            WHERE device_key = ${key} AND ts_ms >= @from AND ts_ms < @until${connector}
            ORDER BY ts_ms, connector_id${raw ? ' LIMIT @recentLimit' : ''}`,
      params,
    },
    plain: { sql: plain, params },
  };
}
