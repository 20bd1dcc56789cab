import type { PrunedKind } from './retention-policy.js';
import type { ExclusiveJob, Maintenance, RunAloneOutcome, Store } from './store.js';

/**
 * What a backend gives the maintenance scheduler (`maintenance-scheduler.ts`): the steps of upkeep as plain
 * queries and transactions. When they run, how often, one pass at a time, and what is counted is the
 * scheduler's, the same on every backend (DESIGN.md §12, §22).
 */

/** Every repository of the store: all but the upkeep, which the scheduler adds. */
export type Repositories = Omit<Store, keyof Maintenance>;

/** Told how many rows of a kind a step deleted, once they are. */
export type CountPruned = (kind: PrunedKind, rows: number) => void;

/** One retention pass's steps; each deletes in batches of `RETENTION_BATCH` rows. */
export interface RetentionSteps {
  /**
   * Runs a pass, alone among the instances sharing the database (PostgreSQL's advisory lock); false, without
   * running it, when another instance is pruning.
   */
  alone(pass: () => Promise<void>): Promise<boolean>;
  /** Raw telemetry older than `beforeMs` that is rolled up, by the backend's rules (arrival, partitions). */
  pruneTelemetry(beforeMs: number, count: CountPruned): Promise<void>;
  /** Device ids after `after`, in order, at most `limit`. */
  devicesAfter(after: string, limit: number): Promise<string[]>;
  /** One batch of a device's events and of its firmware reports from before `beforeMs`: how many of each. */
  pruneDeviceHistory(deviceId: string, beforeMs: number): Promise<{ events: number; firmware: number }>;
  /** Commands finished before `beforeMs`, with their history. */
  pruneCommands(beforeMs: number, count: CountPruned): Promise<void>;
  /** One batch of finished controls that ended before `beforeMs`: how many. */
  pruneControls(beforeMs: number): Promise<number>;
  /** One batch of a device's rollups of buckets before `beforeMs`: how many. */
  pruneRollups(deviceId: string, beforeMs: number): Promise<number>;
  /**
   * One batch of diagnostics records requested before `beforeMs`, each with its archive's chunks: how many
   * records (at most `DIAGNOSTICS_BATCH`, retention-policy.ts).
   */
  pruneDiagnostics(beforeMs: number): Promise<number>;
}

export interface UpkeepSteps {
  rollups: {
    /** Rolls up everything stored so far; concurrent calls share a pass. */
    catchUp(): Promise<void>;
    /** Rows not rolled up yet, as of the last pass. */
    lagRows(): number;
    /** Settles when no pass is running. */
    idle(): Promise<void>;
  };
  retention: RetentionSteps;
  /**
   * Runs `run` while holding `job` among the instances sharing the database: `{ ran: false }`, without
   * running it, when another instance holds it. One process serves a SQLite file: there it always runs.
   */
  exclusively<T>(job: ExclusiveJob, run: () => Promise<T>): Promise<RunAloneOutcome<T>>;
  /**
   * Moves telemetry older than an hour from the recent table into compressed blocks (DESIGN.md §21): the
   * samples it moved. Concurrent calls share a pass.
   */
  compaction?: { compact(): Promise<number> };
  /** Upkeep before each timed retention pass (PostgreSQL: the coming days' telemetry partitions). */
  beforeRetention?(): Promise<void>;
  /** Further upkeep on a timer of its own, one run at a time (PostgreSQL: planner statistics). */
  chores?: ReadonlyArray<{ everyMs: number; run(): Promise<unknown> }>;
}

/** A backend once open: its repositories, its upkeep steps, and how to let go of its database. */
export interface OpenedBackend {
  repositories: Repositories;
  upkeep: UpkeepSteps;
  /** Closes the database, after the scheduler stopped; waits for the backend's own work (writes, reads). */
  close(): Promise<void>;
}
