import { CONNECTORS_PER_DEVICE_MAX } from '../../../shared/index.js';
import type { TelemetryHistoryRead, TelemetryHistoryRepository } from '../store.js';
import { decodeBlock } from '../telemetry-block.js';
import { BLOCK_MS, type CompactableRow } from '../telemetry-compaction.js';
import {
  historyFromSamples,
  MEASUREMENT_COLUMNS,
  type RawHistoryRow,
  rawPageEnd,
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
  /**
   * The read's compressed blocks (DESIGN.md §21), decoded, and up to when they answer it: a raw page needs
   * only the hours that hold its `limit` samples, so blocks are chosen by their counts before any is fetched
   * (the hour of the page's start does not count: part of it may lie before the cursor).
   */
  const blockSamples = async (
    read: TelemetryHistoryRead,
    fromMs: number,
  ): Promise<{ samples: CompactableRow[]; untilMs: number }> => {
    const connector = read.connectorId === undefined ? '' : ' AND connector_id = ?';
    const where = `device_id = ?${connector} AND start_ms > ? AND start_ms < ? AND last_ms >= ?`;
    const args = [
      read.deviceId,
      ...(read.connectorId === undefined ? [] : [read.connectorId]),
      fromMs - BLOCK_MS,
      read.endMs,
      fromMs,
    ];
    let untilMs = read.endMs;
    if (read.bucketMs === undefined) {
      const counts = await reader.all<{ start_ms: number; samples: number }>(
        `SELECT start_ms, SUM(samples) AS samples FROM telemetry_blocks WHERE ${where}
         GROUP BY start_ms ORDER BY start_ms`,
        args,
      );
      untilMs = rawPageEnd(counts, fromMs, read);
    }
    const blocks = await reader.all<{ connector_id: number; data: Uint8Array }>(
      `SELECT connector_id, data FROM telemetry_blocks WHERE ${where} AND start_ms < ?
       ORDER BY start_ms, connector_id`,
      [...args, untilMs],
    );
    const samples = blocks.flatMap((b) =>
      decodeBlock(b.data).map((s) => ({ ...s, connector_id: b.connector_id })),
    );
    return { samples, untilMs };
  };
  /** The recent table's samples of the read, as they are (for merging with blocks). */
  const recentSamples = (read: TelemetryHistoryRead, fromMs: number) => {
    const connector = read.connectorId === undefined ? '' : ' AND connector_id = ?';
    return reader.all<CompactableRow>(
      `SELECT connector_id, ts_ms, state, ${MEASUREMENT_COLUMNS}, phase_details FROM telemetry
       WHERE device_id = ? AND ts_ms >= ? AND ts_ms < ?${connector} ORDER BY ts_ms, connector_id
       ${read.bucketMs === undefined ? 'LIMIT ?' : ''}`,
      [
        read.deviceId,
        fromMs,
        read.endMs,
        ...(read.connectorId === undefined ? [] : [read.connectorId]),
        // Raw: the first `limit` after the cursor are among these (each instant has at most one per connector).
        ...(read.bucketMs === undefined ? [read.limit + CONNECTORS_PER_DEVICE_MAX] : []),
      ],
    );
  };
  return {
    async telemetryHistory(read) {
      const start = readStart(read);
      const compacted = await blockSamples(read, start.tsMs);
      if (compacted.samples.length > 0) {
        const page = { ...read, endMs: compacted.untilMs };
        return historyFromSamples(compacted.samples.concat(await recentSamples(page, start.tsMs)), page);
      }
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
      const args = [deviceId, fromMs, toMs, ...(connectorId === undefined ? [] : [connectorId])];
      // A block that holds `fromMs` starts before it: its first sample at or after it is `fromMs` at the
      // earliest, which is all a read window needs.
      const row = await reader.get<{ ts_ms: number | null }>(
        `SELECT MIN(t) AS ts_ms FROM (
           SELECT MIN(ts_ms) AS t FROM telemetry WHERE device_id = ? AND ts_ms >= ? AND ts_ms < ?${connector}
           UNION ALL
           SELECT MAX(MIN(first_ms), ?) FROM telemetry_blocks
           WHERE device_id = ? AND last_ms >= ? AND first_ms < ?${connector})`,
        [...args, fromMs, ...args],
      );
      return row?.ts_ms ?? undefined;
    },
  };
}
