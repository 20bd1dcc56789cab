import type { EnergyBucketRow } from '../store.js';
import type { PgDatabase } from './database.js';

/** The 15-minute energy rollups on PostgreSQL (as `../sqlite/energy-rollups.ts`). */
export interface PgEnergyRollups {
  /** Rolls up every committed telemetry row; concurrent calls share one pass. */
  catchUp(): Promise<void>;
  /** Rows not rolled up yet, as of the last pass (for /metrics). */
  lagRows(): number;
  /** Settles when no pass is running (before the pool closes). */
  idle(): Promise<void>;
  /** Summed buckets of these devices, in [startMs, endMs), by intervalMs, after catching up. */
  buckets(
    deviceIds: readonly string[],
    startMs: number,
    endMs: number,
    intervalMs: number,
  ): Promise<EnergyBucketRow[]>;
}

export function createPgEnergyRollups(_db: PgDatabase, _telemetryHorizonMs: () => number): PgEnergyRollups {
  const todo = () => Promise.reject(new Error('not implemented'));
  return { catchUp: todo, lagRows: () => 0, idle: async () => undefined, buckets: todo };
}
