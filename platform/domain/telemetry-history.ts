import {
  encodeTelemetryCursor,
  TELEMETRY_BUCKET_MS,
  TELEMETRY_DEFAULT_SPAN_MS,
  TELEMETRY_MEASUREMENTS,
  type TelemetryHistoryItem,
  type TelemetryResolution,
  toTimestamp,
} from '../../shared/index.js';
import type { TelemetryHistoryRow } from '../storage/store.js';

/**
 * The rules of the telemetry history read (DESIGN.md §21), pure: the range a query covers, how items look on
 * the wire, and where the next page starts.
 */

/** Above every connector id: a cursor "after connector 99" of a bucket resumes at the next bucket. */
const AFTER_EVERY_CONNECTOR = 99;

export interface HistoryRange {
  startMs: number;
  endMs: number;
  /** Set for averaged resolutions; the range is then whole buckets. */
  bucketMs?: number;
}

/** The range of a query at `nowMs`: its times, by default the hour before now, widened to whole buckets. */
export function historyRange(
  q: { start_time?: string; end_time?: string; resolution: TelemetryResolution },
  nowMs: number,
): HistoryRange {
  const endMs = q.end_time === undefined ? nowMs : Date.parse(q.end_time);
  const startMs = q.start_time === undefined ? endMs - TELEMETRY_DEFAULT_SPAN_MS : Date.parse(q.start_time);
  if (q.resolution === 'raw') return { startMs, endMs };
  const bucketMs = TELEMETRY_BUCKET_MS[q.resolution];
  return { startMs: floorTo(startMs, bucketMs), endMs: Math.ceil(endMs / bucketMs) * bucketMs, bucketMs };
}

export const floorTo = (ms: number, stepMs: number): number => Math.floor(ms / stepMs) * stepMs;

/**
 * Where an averaged page reads: from the bucket of the first sample at or after where the page starts (so a
 * long quiet stretch costs no empty pages), for at most `limit` buckets, so that no page groups more than a
 * bounded range. Undefined when nothing is left.
 */
export function averagedWindow(
  range: HistoryRange & { bucketMs: number },
  fromMs: number,
  firstSampleMs: number | undefined,
  limit: number,
): { startMs: number; endMs: number } | undefined {
  if (firstSampleMs === undefined) return undefined;
  const startMs = Math.max(fromMs, floorTo(firstSampleMs, range.bucketMs));
  return { startMs, endMs: Math.min(range.endMs, startMs + limit * range.bucketMs) };
}

/**
 * A page of at most `limit` items from `rows` (read with one more than `limit`), and its next cursor: after
 * the last item when there were more, after the read window when an averaged page read only part of the range.
 */
export function historyPage(
  rows: readonly TelemetryHistoryRow[],
  opts: { resolution: TelemetryResolution; limit: number; windowEndMs: number; range: HistoryRange },
): { items: TelemetryHistoryItem[]; next_cursor: string | null } {
  const { resolution, limit, windowEndMs, range } = opts;
  const page = rows.slice(0, limit);
  const items = page.map((r) => historyItem(r, resolution));
  const last = page.at(-1);
  if (rows.length > limit && last) {
    return {
      items,
      next_cursor: encodeTelemetryCursor({ resolution, tsMs: last.ts_ms, connectorId: last.connector_id }),
    };
  }
  if (range.bucketMs !== undefined && windowEndMs < range.endMs) {
    const tsMs = windowEndMs - range.bucketMs;
    return {
      items,
      next_cursor: encodeTelemetryCursor({ resolution, tsMs, connectorId: AFTER_EVERY_CONNECTOR }),
    };
  }
  return { items, next_cursor: null };
}

/** A stored sample or bucket as the API shows it: measurements only where there were any. */
export function historyItem(row: TelemetryHistoryRow, resolution: TelemetryResolution): TelemetryHistoryItem {
  const item: TelemetryHistoryItem = {
    timestamp: toTimestamp(row.ts_ms),
    connector_id: row.connector_id,
    state: row.state as TelemetryHistoryItem['state'],
  };
  for (const m of TELEMETRY_MEASUREMENTS) {
    const v = row[m];
    if (v !== null) item[m] = v;
  }
  if (resolution === 'raw') {
    if (row.phase_details) item.phase_details = row.phase_details as TelemetryHistoryItem['phase_details'];
  } else {
    item.samples = row.samples;
  }
  return item;
}
