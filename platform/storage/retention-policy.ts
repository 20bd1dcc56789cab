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
  | 'energy_rollups'
  /** Diagnostics records (DESIGN.md §20), each with its archive's chunks. */
  | 'diagnostics';

export interface RetentionStats {
  /** Rows deleted since start, by kind. */
  pruned: Record<PrunedKind, number>;
  passes: number;
  lastPassMs: number | null;
  lastPassDurationMs: number | null;
}

/** Rows retention deletes per statement or transaction, on both backends: no request waits long behind one. */
export const RETENTION_BATCH = 2000;
/**
 * Diagnostics records deleted per transaction, each with its archive (up to 20 MiB in chunks): a few, so that a
 * batch frees at most about 100 MiB.
 */
export const DIAGNOSTICS_BATCH = 5;

/**
 * The setting holding the newest time (ms) of any telemetry row pruned: raw telemetry after it is complete.
 * Rollups read it (on PostgreSQL, another instance may have pruned).
 */
export const TELEMETRY_PRUNED_THROUGH_SETTING = 'telemetry_pruned_through_ms';
