import { join } from 'node:path';
import { bucketsInOrder } from '../../domain/energy.js';
import { sumRollups } from '../../domain/energy-rollup.js';
import type { OpenedBackend } from '../maintenance-steps.js';
import type { EnergyBucketRow } from '../store.js';
import { createSqliteArtifacts } from './artifacts.js';
import { createSqliteChargingRecords } from './charging-records.js';
import { startCheckpointer } from './checkpointer.js';
import { createSqliteCommands } from './commands.js';
import { createSqliteConfigurations } from './configurations.js';
import { DATABASE_FILE, openDatabase, placeholders, statementCache } from './database.js';
import { createSqliteDeviceHistory } from './device-history.js';
import { createSqliteDeviceSecrets } from './device-secrets.js';
import { createSqliteDevices } from './devices.js';
import { createSqliteDiagnostics } from './diagnostics.js';
import { createSqliteDirectory } from './directory.js';
import { createSqliteEnergyRollups } from './energy-rollups.js';
import { createSqliteEnrolments } from './enrolments.js';
import { createInlineReader, createWorkerReader } from './reader.js';
import { createSqliteRetention } from './retention.js';
import { createSqliteTelemetry } from './telemetry.js';
import { createSqliteTelemetryBlocks } from './telemetry-blocks.js';
import { createSqliteTelemetryHistory } from './telemetry-history.js';
import { createSqliteUpdates } from './updates.js';
import { createSqliteWebhooks } from './webhooks.js';
import { createWriteBatcher } from './write-batcher.js';

export { DATABASE_FILE, openDatabase } from './database.js';

export interface SqliteBackendOptions {
  /**
   * Checkpoint the WAL from a worker thread instead of inside commits (`checkpointer.ts`): for the server.
   * Short-lived processes (the admin CLI) leave it to SQLite.
   */
  backgroundCheckpoints?: boolean;
  /** Told if the checkpoint worker fails (checkpoints then happen in commits again). */
  onCheckpointerFailure?: (message: string) => void;
  /** Told if the read worker fails (operator reads then run on the main connection again). */
  onReaderFailure?: (message: string) => void;
  /** Group commits at most this often under load, ms (`write-batcher.ts`); default `COMMIT_INTERVAL_MS`. */
  commitIntervalMs?: number;
}

/**
 * At most one group commit per 2 ms under load: at fleet rates (a few requests per ms) most commits would
 * otherwise carry a single row, each writing its own WAL frames; idle, a write still commits at once.
 */
export const COMMIT_INTERVAL_MS = 2;

/**
 * The embedded backend: one SQLite file in the data directory, every repository of `../store.ts` over it
 * (one module per aggregate beside this file), with group commit, WAL checkpoints and operator reads in worker
 * threads, and the steps of rollups and retention (`../maintenance-scheduler.ts` runs them).
 */
export function openSqliteBackend(
  dataDir: string,
  now: () => number = Date.now,
  options: SqliteBackendOptions = {},
): OpenedBackend {
  const db = openDatabase(dataDir);
  const batcher = createWriteBatcher(db, {
    minCommitIntervalMs: options.commitIntervalMs ?? COMMIT_INTERVAL_MS,
  });
  const checkpointer = options.backgroundCheckpoints
    ? startCheckpointer(db, join(dataDir, DATABASE_FILE), {
        ...(options.onCheckpointerFailure ? { onFailure: options.onCheckpointerFailure } : {}),
      })
    : undefined;
  const prepared = statementCache(db);
  // Heavy operator reads run on a read-only connection in a worker thread in the server (reader.ts).
  const reader = options.backgroundCheckpoints
    ? createWorkerReader(db, join(dataDir, DATABASE_FILE), options.onReaderFailure)
    : createInlineReader(db);

  const records = createSqliteChargingRecords(db, reader);
  const { directory, noteLocalChange } = createSqliteDirectory(db, now, prepared);
  const devices = createSqliteDevices({ db, now, prepared, records, noteLocalChange });
  const deviceSecrets = createSqliteDeviceSecrets({ db });
  const telemetry = createSqliteTelemetry(db, batcher, prepared, { blocks: () => blocks, now });
  const { inTransaction, ...commands } = createSqliteCommands(db, reader);
  const updates = createSqliteUpdates({ db, prepared, commands: inTransaction });
  const history = createSqliteDeviceHistory(db);
  const configurations = createSqliteConfigurations(db);
  const webhooks = createSqliteWebhooks(db);
  const enrolments = createSqliteEnrolments(db, now);
  const artifacts = createSqliteArtifacts({ db, prepared, reader, write: (run) => batcher.write(run) });
  const diagnostics = createSqliteDiagnostics({
    db,
    write: (run) => batcher.write(run),
    commands: inTransaction,
  });

  // Retention reads the rollups' watermark and rollups read retention's horizon, each through a function
  // called only once both exist; so do ingest, rollups and retention read the compressed blocks, which are made
  // only of rows the rollups and the live state have taken in.
  const rollups = createSqliteEnergyRollups(
    db,
    (run) => batcher.write(run),
    () => pruning.telemetryHorizonMs(),
    () => blocks,
  );
  const pruning = createSqliteRetention(
    db,
    (run) => batcher.write(run),
    () => rollups.watermark(),
    () => blocks,
  );
  const newestTelemetryId = db.prepare('SELECT MAX(id) FROM telemetry_recent').pluck();
  const blocks = createSqliteTelemetryBlocks(db, {
    write: (run) => batcher.write(run),
    now,
    compactableUpToId: () =>
      Math.min(rollups.watermark(), telemetry.liveStateUpTo(), Number(newestTelemetryId.get() ?? 0) - 1),
  });

  const repositories: OpenedBackend['repositories'] = {
    ...directory,
    ...devices,
    ...deviceSecrets,
    ...telemetry.telemetry,
    ...createSqliteTelemetryHistory(reader),
    ...commands,
    ...history,
    ...configurations,
    ...webhooks,
    ...enrolments,
    ...artifacts,
    ...updates,
    ...diagnostics,
    async listChargingRecords(operatorIds, q) {
      return records.list(operatorIds, q);
    },
    async insertChargingRecords(rows, stored) {
      // Immediate: the insert reads (the charger's operator) before it writes, and a deferred transaction
      // that must upgrade its read lock while another connection checkpoints fails at once with SQLITE_BUSY
      // instead of waiting. Every write transaction here takes the write lock first, for the same reason.
      const ids: string[] | undefined = stored ? [] : undefined;
      const inserted = db.transaction(() => records.insert(rows, now(), ids)).immediate();
      if (ids && ids.length > 0) stored?.(ids);
      return inserted;
    },
    async energyBuckets(deviceIds, startMs, endMs, intervalMs) {
      // Answered from the 15-minute rollups (domain/energy-rollup.ts), after they took in every row stored.
      // If that write fails (a full disk), the answer is what is rolled up: at most a second behind.
      await rollups.catchUp().catch(() => undefined);
      const rows: EnergyBucketRow[] = [];
      for (let i = 0; i < deviceIds.length; i += 500) {
        const ids = deviceIds.slice(i, i + 500);
        rows.push(
          ...(await reader.all<EnergyBucketRow>(
            `SELECT bucket_ms AS start_ms, SUM(imported_kwh) AS imported_kwh, SUM(exported_kwh) AS exported_kwh,
               SUM(power_sum) AS power_sum, MAX(max_power) AS max_power, SUM(samples) AS samples
             FROM energy_rollups WHERE device_id IN (${placeholders(ids.length)}) AND bucket_ms >= ? AND bucket_ms < ?
             GROUP BY bucket_ms`,
            [...ids, startMs, endMs],
          )),
        );
      }
      return bucketsInOrder(sumRollups(rows, { startMs, endMs, intervalMs }));
    },
  };

  return {
    repositories,
    upkeep: {
      rollups,
      retention: pruning,
      compaction: {
        // Compaction takes only rows the live state was written out for: write it out first.
        compact: () => telemetry.persistLiveState().then(() => blocks.compact()),
      },
      // One process serves a SQLite file, so a job always runs here (the scheduler keeps runs from overlapping).
      exclusively: async (_job, run) => ({ ran: true, value: await run() }),
    },
    async close() {
      await telemetry.drainPending();
      batcher.drain();
      // The live state still pending goes out with the last commit.
      await telemetry.close();
      await reader.close();
      await checkpointer?.close();
      db.close();
    },
  };
}
