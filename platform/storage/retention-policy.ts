/**
 * How long each kind of data is kept (DESIGN.md §12), whatever the backend; 0 keeps that kind forever.
 * Charging records are always kept.
 */
export interface RetentionPolicy {
  /** Raw telemetry. */
  telemetryDays: number;
  /** Device events, firmware reports, finished commands (with their history) and finished controls. */
  historyDays: number;
  /** 15-minute energy rollups. */
  rollupDays: number;
}

export const DEFAULT_RETENTION: RetentionPolicy = { telemetryDays: 30, historyDays: 180, rollupDays: 1830 };

/** What retention deletes and counts, by kind (both backends). */
export type PrunedKind =
  | 'telemetry'
  | 'device_events'
  | 'firmware_status'
  | 'commands'
  | 'controls'
  | 'energy_rollups';

export interface RetentionStats {
  /** Rows deleted since start, by kind. */
  pruned: Record<PrunedKind, number>;
  passes: number;
  lastPassMs: number | null;
  lastPassDurationMs: number | null;
}
