import type { TelemetryMeasurement } from '../../shared/index.js';

/** One stored sample, or one bucket's means of the samples in it (DESIGN.md §21). */
export type TelemetryHistoryRow = {
  /** The sample's time, or the bucket's start, epoch ms. */
  ts_ms: number;
  connector_id: number;
  /** The sample's state, or the bucket's last (by time). */
  state: string;
  /** As the charger sent them, raw samples only; null when averaged or not sent. */
  phase_details: Record<string, unknown> | null;
  /** Samples in the bucket; 1 for a raw sample. */
  samples: number;
} & Record<TelemetryMeasurement, number | null>;

/** Which samples to read: a device's (one connector's), in `[startMs, endMs)`, oldest first. */
export interface TelemetryHistoryRead {
  deviceId: string;
  connectorId?: number;
  startMs: number;
  endMs: number;
  /** Averaged in buckets of this length (aligned to the epoch) when set; raw samples otherwise. */
  bucketMs?: number;
  /** Only items after this one in `(ts_ms, connector_id)` order (a page's cursor). */
  after?: { tsMs: number; connectorId: number };
  limit: number;
}

/** Reads of the stored telemetry for operators, off the charger path (the reader worker on SQLite). */
export interface TelemetryHistoryRepository {
  /** The items of `read`, ordered by `(ts_ms, connector_id)`, at most `read.limit`. */
  telemetryHistory(read: TelemetryHistoryRead): Promise<TelemetryHistoryRow[]>;
  /** The time of the device's (connector's) first sample in `[fromMs, toMs)`, if any. */
  firstTelemetryAt(
    deviceId: string,
    connectorId: number | undefined,
    fromMs: number,
    toMs: number,
  ): Promise<number | undefined>;
}
