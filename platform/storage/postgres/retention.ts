import type { RetentionPolicy } from '../retention-policy.js';
import type { RetentionStats } from '../sqlite/retention.js';
import type { PgDatabase } from './database.js';
import type { PgEnergyRollups } from './energy-rollups.js';
import type { TelemetryPartitions } from './telemetry-partitions.js';

/** Retention on PostgreSQL (DESIGN.md §12): old telemetry partitions dropped whole, the rest in batches. */
export interface PgRetention {
  prune(): Promise<void>;
  stats(): RetentionStats;
  idle(): Promise<void>;
  /** The newest time (ms) of any telemetry row pruned: raw telemetry after it is complete. */
  telemetryHorizonMs(): number;
}

export function createPgRetention(
  _db: PgDatabase,
  _policy: RetentionPolicy,
  _now: () => number,
  _partitions: TelemetryPartitions,
  _rollups: PgEnergyRollups,
): PgRetention {
  return {
    prune: () => Promise.reject(new Error('not implemented')),
    stats: () => ({
      pruned: {
        telemetry: 0,
        device_events: 0,
        firmware_status: 0,
        commands: 0,
        controls: 0,
        energy_rollups: 0,
      },
      passes: 0,
      lastPassMs: null,
      lastPassDurationMs: null,
    }),
    idle: async () => undefined,
    telemetryHorizonMs: () => Number.NEGATIVE_INFINITY,
  };
}
