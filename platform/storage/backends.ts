import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { withMaintenance } from './maintenance-scheduler.js';
import {
  describeDatabase,
  isPostgresUrl,
  openPostgresBackend,
  type PostgresBackendOptions,
} from './postgres/store.js';
import { DEFAULT_RETENTION, type RetentionPolicy } from './retention-policy.js';
import { DATABASE_FILE, openSqliteBackend, type SqliteBackendOptions } from './sqlite/store.js';
import type { Store } from './store.js';

/**
 * The backends (DESIGN.md §12, §22): how `--database` names each, how messages name it, and how it opens, with
 * the upkeep of `maintenance-scheduler.ts` over its steps. Callers look a choice up here instead of asking
 * which kind it is.
 */

/**
 * Which backend holds the platform's data: `sqlite` (the default, `DIR/platform.sqlite`) or a PostgreSQL URL.
 * The data directory keeps the TLS files and the platform key in both cases.
 */
export type DatabaseChoice = { kind: 'sqlite' } | { kind: 'postgres'; url: string };

export const DATABASE_ENV = 'CHARGER_PLATFORM_DATABASE';
/** `--database`'s default. */
export const DEFAULT_DATABASE: DatabaseChoice = { kind: 'sqlite' };

export interface OpenStoreOptions {
  now?: () => number;
  /** As `serve` runs it: background upkeep (and on SQLite, checkpoints and reads in worker threads). */
  server?: boolean;
  retention?: RetentionPolicy;
  onCheckpointerFailure?: (message: string) => void;
  onReaderFailure?: (message: string) => void;
}

export interface StorageBackend<C extends DatabaseChoice = DatabaseChoice> {
  /** `--database`'s value, when it names this backend. */
  parse(value: string): C | undefined;
  /** Names the database in messages and logs, without a password. */
  describe(choice: C, dataDir: string): string;
  /** Names the deployment as a whole in messages (which environment it belongs to). */
  describeDeployment(choice: C, dataDir: string): string;
  /** Whether `dataDir` (with `choice`) holds a deployment. */
  hasDeployment(choice: C, dataDir: string, keyFile?: string): boolean;
  /** What `hasDeployment` looks for, as a message names it when missing. */
  deploymentMarker(choice: C, dataDir: string): string;
  /**
   * The database is a file in the data directory: its faults are the data directory's (a full disk, its
   * permissions), and a deployment on a full disk still starts (it serves reads). Otherwise a failure to open
   * it is the configuration's (the URL, the server).
   */
  inDataDir: boolean;
  /** Several instances may share it (and Redis then links them, DESIGN.md §13). */
  shared: boolean;
  /** The store over it, without the platform-key check (`open-store.ts`). */
  open(choice: C, dataDir: string, opts: OpenStoreOptions): Promise<Store>;
}

type Choice<K extends DatabaseChoice['kind']> = Extract<DatabaseChoice, { kind: K }>;

const BACKENDS: { [K in DatabaseChoice['kind']]: StorageBackend<Choice<K>> } = {
  sqlite: {
    parse: (value) => (value === 'sqlite' ? { kind: 'sqlite' } : undefined),
    describe: (_choice, dataDir) => join(dataDir, DATABASE_FILE),
    describeDeployment: (_choice, dataDir) => `data directory ${dataDir}`,
    hasDeployment: (_choice, dataDir) => existsSync(join(dataDir, DATABASE_FILE)),
    deploymentMarker: (_choice, dataDir) => join(dataDir, DATABASE_FILE),
    inDataDir: true,
    shared: false,
    async open(_choice, dataDir, opts) {
      return createSqliteStore(dataDir, opts.now, {
        backgroundCheckpoints: opts.server ?? false,
        ...(opts.retention ? { retention: opts.retention } : {}),
        ...(opts.onCheckpointerFailure ? { onCheckpointerFailure: opts.onCheckpointerFailure } : {}),
        ...(opts.onReaderFailure ? { onReaderFailure: opts.onReaderFailure } : {}),
      });
    },
  },
  postgres: {
    parse: (value) => (isPostgresUrl(value) ? { kind: 'postgres', url: value } : undefined),
    describe: (choice) => describeDatabase(choice.url),
    describeDeployment: (choice) => describeDatabase(choice.url),
    hasDeployment: (_choice, dataDir, keyFile) =>
      existsSync(keyFile ?? join(dataDir, 'keys', 'platform.key')),
    deploymentMarker: () => 'keys/platform.key',
    inDataDir: false,
    shared: true,
    open(choice, _dataDir, opts) {
      return createPostgresStore(choice.url, opts.now, {
        backgroundMaintenance: opts.server ?? false,
        ...(opts.retention ? { retention: opts.retention } : {}),
      });
    },
  },
};

/** The backend a choice names. */
export function backendOf(choice: DatabaseChoice): StorageBackend {
  return BACKENDS[choice.kind];
}

/** `--database`'s value; undefined when no backend takes it (neither `sqlite` nor a `postgres://` URL). */
export function parseDatabaseChoice(value: string): DatabaseChoice | undefined {
  for (const backend of Object.values(BACKENDS)) {
    const choice = backend.parse(value);
    if (choice) return choice;
  }
  return undefined;
}

export type SqliteStoreOptions = SqliteBackendOptions & {
  /** How long each kind of data is kept (DESIGN.md §12); default `DEFAULT_RETENTION`. */
  retention?: RetentionPolicy;
  /**
   * Keep rollups and retention going on timers: for the server (defaults to `backgroundCheckpoints`).
   * Otherwise they run when asked (`runMaintenance`, and rollups before an energy read).
   */
  backgroundMaintenance?: boolean;
};

/** The SQLite store in `dataDir`, with its upkeep. */
export function createSqliteStore(
  dataDir: string,
  now: () => number = Date.now,
  options: SqliteStoreOptions = {},
): Store {
  const { retention, backgroundMaintenance, ...backendOptions } = options;
  return withMaintenance(openSqliteBackend(dataDir, now, backendOptions), {
    policy: retention ?? DEFAULT_RETENTION,
    now,
    background: backgroundMaintenance ?? options.backgroundCheckpoints ?? false,
  });
}

/**
 * The PostgreSQL store at `url`, with its upkeep: on timers with `backgroundMaintenance` (the server),
 * otherwise when asked (`runMaintenance`, and rollups before an energy read).
 */
export async function createPostgresStore(
  url: string,
  now: () => number = Date.now,
  options: PostgresBackendOptions = {},
): Promise<Store> {
  return withMaintenance(await openPostgresBackend(url, now, options), {
    policy: options.retention ?? DEFAULT_RETENTION,
    now,
    background: options.backgroundMaintenance ?? false,
  });
}
