import type pg from 'pg';
import type { OpenedBackend } from '../maintenance-steps.js';
import { DEFAULT_RETENTION, type RetentionPolicy } from '../retention-policy.js';
import { createPgArtifacts } from './artifacts.js';
import { createPgChargingRecords } from './charging-records.js';
import { createPgCommands } from './commands.js';
import { createPgConfigurations } from './configurations.js';
import { DIRECTORY_CHANNEL, openPgDatabase, type PgDatabase } from './database.js';
import { createPgDeviceHistory } from './device-history.js';
import { createPgDeviceSecrets } from './device-secrets.js';
import { createPgDevices } from './devices.js';
import { createPgDiagnostics } from './diagnostics.js';
import { createPgDirectory } from './directory.js';
import { createPgEnergyRollups } from './energy-rollups.js';
import { createPgEnrolments } from './enrolments.js';
import { holdingJobLock } from './exclusive-jobs.js';
import { createPgRetention } from './retention.js';
import { analyzeStaleTables } from './statistics.js';
import { createPgTelemetry } from './telemetry.js';
import { createPgTelemetryBlocks } from './telemetry-blocks.js';
import { createPgTelemetryHistory } from './telemetry-history.js';
import { createTelemetryPartitions } from './telemetry-partitions.js';
import { createPgUpdates } from './updates.js';
import { createPgWebhooks } from './webhooks.js';

export { describeDatabase, isPostgresUrl } from './database.js';

/** How often the server looks for tables whose planner statistics are stale (`statistics.ts`). */
const ANALYZE_EVERY_MS = 30_000;
/** How soon a lost LISTEN connection is opened again. */
const RELISTEN_MS = 1_000;
/** How far back a telemetry day gets its own partition when telemetry is kept forever. */
const KEEP_FOREVER_PARTITION_DAYS = 400;

export interface PostgresBackendOptions {
  /** How long telemetry is kept decides which days get a partition; default `DEFAULT_RETENTION`. */
  retention?: RetentionPolicy;
  /**
   * As the server runs it: listen for admin changes made elsewhere, and create the coming days' telemetry
   * partitions before serving.
   */
  backgroundMaintenance?: boolean;
  poolSize?: number;
}

/**
 * The PostgreSQL backend (`--database postgres://…`): every repository of `../store.ts` over one connection
 * pool, one module per aggregate beside this file, with the steps of rollups, retention and partition upkeep
 * (`../maintenance-scheduler.ts` runs them) and the election of the instance that runs each once-only job
 * (`exclusive-jobs.ts`).
 */
export async function openPostgresBackend(
  url: string,
  now: () => number = Date.now,
  options: PostgresBackendOptions = {},
): Promise<OpenedBackend> {
  const db = await openPgDatabase(url, options.poolSize ? { poolSize: options.poolSize } : {});
  const policy = options.retention ?? DEFAULT_RETENTION;
  const partitions = createTelemetryPartitions(
    db,
    now,
    (policy.telemetryDays || KEEP_FOREVER_PARTITION_DAYS) + 1,
  );
  const records = createPgChargingRecords(db);
  const directory = createPgDirectory(db, now);
  const devices = createPgDevices({ db, now, records });
  const deviceSecrets = createPgDeviceSecrets({ db });
  const blocks = createPgTelemetryBlocks(db, now, () => rollups, partitions);
  const telemetry = createPgTelemetry(db, partitions, blocks);
  const commands = createPgCommands(db);
  const history = createPgDeviceHistory(db);
  const configurations = createPgConfigurations(db);
  const webhooks = createPgWebhooks(db);
  const enrolments = createPgEnrolments(db, now);
  const artifacts = createPgArtifacts(db);
  const updates = createPgUpdates(db);
  const diagnostics = createPgDiagnostics(db);
  const rollups = createPgEnergyRollups(db, () => pruning.telemetryHorizonMs());
  const pruning = createPgRetention(db, partitions, rollups, blocks);

  const maintenance = options.backgroundMaintenance ?? false;
  const changes = maintenance ? await listenForChanges(db) : undefined;
  if (maintenance) await partitions.prepareAhead();

  const repositories: OpenedBackend['repositories'] = {
    ...directory,
    ...devices,
    ...deviceSecrets,
    ...telemetry,
    ...createPgTelemetryHistory(db),
    ...commands,
    ...history,
    ...configurations,
    ...webhooks,
    ...enrolments,
    ...artifacts,
    ...updates,
    ...diagnostics,
    externalChangeVersion() {
      return changes?.version() ?? 0;
    },
    listChargingRecords(operatorIds, q) {
      return records.list(operatorIds, q);
    },
    insertChargingRecords(rows, stored) {
      return records.insert(rows, now(), stored);
    },
    energyBuckets(deviceIds, startMs, endMs, intervalMs) {
      return rollups.buckets(deviceIds, startMs, endMs, intervalMs);
    },
  };

  return {
    repositories,
    upkeep: {
      rollups,
      retention: pruning,
      compaction: blocks,
      exclusively: (job, run) => holdingJobLock(db, job, run),
      beforeRetention: () => partitions.prepareAhead(),
      chores: [{ everyMs: ANALYZE_EVERY_MS, run: () => analyzeStaleTables(db) }],
    },
    async close() {
      await changes?.close();
      await db.close();
    },
  };
}

/**
 * Counts the admin changes to principals announced on `DIRECTORY_CHANNEL` by any process or instance (the
 * admin CLI, another instance): the principal directory reloads when the count moves. A lost connection is
 * reopened, and counted as a change, since announcements may have been missed meanwhile.
 */
async function listenForChanges(db: PgDatabase) {
  let version = 0;
  let client: pg.PoolClient | undefined;
  let closed = false;
  let retry: NodeJS.Timeout | undefined;
  const reconnectSoon = () => {
    if (closed || retry) return;
    retry = setTimeout(() => {
      retry = undefined;
      connect().catch(reconnectSoon);
    }, RELISTEN_MS);
    retry.unref();
  };
  const connect = async (): Promise<void> => {
    const c = await db.pool.connect();
    c.on('notification', () => {
      version++;
    });
    c.on('error', () => {
      if (client !== c) return;
      client = undefined;
      c.release(true);
      // Announcements may have been missed while the connection was down.
      version++;
      reconnectSoon();
    });
    try {
      await c.query(`LISTEN ${DIRECTORY_CHANNEL}`);
    } catch (err) {
      c.release(true);
      throw err;
    }
    if (closed) {
      c.release(true);
      return;
    }
    client = c;
  };
  await connect();
  return {
    version: () => version,
    async close() {
      closed = true;
      clearTimeout(retry);
      client?.release(true);
      client = undefined;
    },
  };
}
