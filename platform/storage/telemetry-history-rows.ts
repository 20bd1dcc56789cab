import { TELEMETRY_MEASUREMENTS } from '../../shared/index.js';
import type { TelemetryHistoryRead, TelemetryHistoryRow } from './telemetry-history-repository.js';

/** The measurement columns, in the order both backends select them. */
export const MEASUREMENT_COLUMNS = TELEMETRY_MEASUREMENTS.join(', ');

/**
 * Where a read starts: after its cursor's item when that lies in the range, else at `startMs` (connector ids
 * start at 1, so "after connector 0" takes every connector of the first instant).
 */
export function readStart(read: TelemetryHistoryRead): { tsMs: number; connectorId: number } {
  return read.after && read.after.tsMs >= read.startMs ? read.after : { tsMs: read.startMs, connectorId: 0 };
}

/** A row as a backend returned it (phase details as JSON text on SQLite, an object on PostgreSQL). */
export type RawHistoryRow = Omit<TelemetryHistoryRow, 'phase_details'> & { phase_details: unknown };

export function toHistoryRow(raw: RawHistoryRow): TelemetryHistoryRow {
  const details = raw.phase_details;
  return {
    ...raw,
    phase_details:
      typeof details === 'string'
        ? (JSON.parse(details) as Record<string, unknown>)
        : ((details ?? null) as Record<string, unknown> | null),
  };
}
