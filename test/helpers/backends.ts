import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { createPostgresStore, createSqliteStore } from '../../platform/storage/backends.js';
import { loadOrCreatePlatformKeys } from '../../platform/storage/platform-keys.js';
import type { RetentionPolicy } from '../../platform/storage/retention-policy.js';
import type { Store } from '../../platform/storage/store.js';

/**
 * The storage backends tests run on. `TEST_DATABASE=postgres` runs the integration suite on PostgreSQL
 * (`npm run test:postgres`); every platform a test starts then gets a throw-away database of its own.
 */
export type Backend = 'sqlite' | 'postgres';
export const TEST_BACKEND: Backend = process.env.TEST_DATABASE === 'postgres' ? 'postgres' : 'sqlite';
/**
 * The backends the repository contract suites run on: the run's own, or both with `TEST_DATABASE=both`
 * (`npm test` needs no database server; `npm run test:postgres` runs them on PostgreSQL).
 */
export const BACKENDS: readonly Backend[] =
  process.env.TEST_DATABASE === 'both' ? ['sqlite', 'postgres'] : [TEST_BACKEND];
/** The server the throw-away databases are created on (DESIGN.md §13: trust auth, user postgres). */
export const POSTGRES_ADMIN_URL =
  process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export interface TestDatabase {
  url: string;
  drop(): Promise<void>;
}

/**
 * Every database a test run creates is named after the run (`test/global-setup.ts` sets the id and drops the
 * run's databases at the end), so that runs side by side never drop each other's.
 */
const RUN_ID = process.env.CP_TEST_RUN ?? 'adhoc';
export const TEST_DATABASE_PREFIX = `cp_test_${RUN_ID}_`;

function urlOf(name: string): string {
  const url = new URL(POSTGRES_ADMIN_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

/**
 * The run's migrated database (`test/global-setup.ts` makes it once): every test database is a copy of it, so
 * that no test start spends a few hundred milliseconds migrating an empty one. Not set outside a run's setup.
 */
const TEMPLATE_ENV = 'CP_TEST_POSTGRES_TEMPLATE';

/** Makes the run's migrated template database, once; test databases made after this are copies of it. */
export async function createMigratedTemplate(): Promise<void> {
  if (process.env[TEMPLATE_ENV]) return;
  const name = `${TEST_DATABASE_PREFIX}template`;
  await adminQuery(`CREATE DATABASE ${name}`);
  const store = await createPostgresStore(urlOf(name));
  await store.close();
  process.env[TEMPLATE_ENV] = name;
}

/** `CREATE DATABASE`, a copy of the run's migrated template unless `empty` (or there is none). */
function createDatabaseSql(name: string, empty: boolean): string {
  const template = process.env[TEMPLATE_ENV];
  return template && !empty ? `CREATE DATABASE ${name} TEMPLATE ${template}` : `CREATE DATABASE ${name}`;
}

/**
 * A new PostgreSQL database, dropped (with its connections) by `drop`: migrated (a copy of the run's template),
 * or with nothing in it when `empty`.
 */
export async function createTestDatabase(opts: { empty?: boolean } = {}): Promise<TestDatabase> {
  const name = `${TEST_DATABASE_PREFIX}${randomBytes(6).toString('hex')}`;
  await adminQuery(createDatabaseSql(name, opts.empty ?? false));
  return { url: urlOf(name), drop: () => dropDatabase(name) };
}

/**
 * The database that belongs to a data directory in PostgreSQL runs: the same on every start and every admin
 * command with that directory (a platform restarted on its data keeps its data), created on first use.
 */
export async function databaseForDataDir(dataDir: string, opts: { empty?: boolean } = {}): Promise<string> {
  const name = `${TEST_DATABASE_PREFIX}d${createHash('sha256').update(dataDir).digest('hex').slice(0, 16)}`;
  try {
    await adminQuery(createDatabaseSql(name, opts.empty ?? false));
  } catch (err) {
    // 42P04: created by an earlier start or command; 23505: by one running at the same moment.
    const code = (err as { code?: string }).code;
    if (code !== '42P04' && code !== '23505') throw err;
  }
  return urlOf(name);
}

export function dropDatabase(name: string): Promise<void> {
  return adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
}

/** The names of the databases whose names start with `prefix`. */
export async function listDatabases(prefix: string): Promise<string[]> {
  const client = new pg.Client({ connectionString: POSTGRES_ADMIN_URL });
  await client.connect();
  try {
    const res = await client.query<{ datname: string }>(
      'SELECT datname FROM pg_database WHERE starts_with(datname, $1)',
      [prefix],
    );
    return res.rows.map((r) => r.datname);
  } finally {
    await client.end();
  }
}

async function adminQuery(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: POSTGRES_ADMIN_URL });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

export interface TestStore {
  backend: Backend;
  store: Store;
  dataDir: string;
  /** The PostgreSQL URL when on PostgreSQL. */
  databaseUrl: string | undefined;
  /** Closes the store and removes its data directory and database. */
  close(): Promise<void>;
}

/** A store on a fresh data directory (and, on PostgreSQL, a fresh database). */
export async function openTestStore(
  backend: Backend,
  opts: {
    now?: () => number;
    retention?: RetentionPolicy;
    /** As `serve` runs it: timers for rollups and retention (and, on SQLite, worker threads). */
    server?: boolean;
  } = {},
): Promise<TestStore> {
  const dataDir = await mkdtemp(join(tmpdir(), 'cp-store-'));
  // The data directory's platform key, as a deployment has one (tests seal and open secrets with it).
  loadOrCreatePlatformKeys(dataDir);
  const now = opts.now ?? Date.now;
  const retention = opts.retention ? { retention: opts.retention } : {};
  if (backend === 'sqlite') {
    const store = createSqliteStore(dataDir, now, {
      backgroundCheckpoints: opts.server ?? false,
      ...retention,
    });
    return {
      backend,
      store,
      dataDir,
      databaseUrl: undefined,
      async close() {
        await store.close();
        await rm(dataDir, { recursive: true, force: true });
      },
    };
  }
  const database = await createTestDatabase();
  const store = await createPostgresStore(database.url, now, {
    backgroundMaintenance: opts.server ?? false,
    ...retention,
  });
  return {
    backend,
    store,
    dataDir,
    databaseUrl: database.url,
    async close() {
      await store.close();
      await database.drop();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * Another connection to the deployment in `dataDir`, as the admin CLI opens it: its SQLite file, or in
 * PostgreSQL runs the data directory's database (`databaseForDataDir`).
 */
export async function openStoreForDataDir(dataDir: string): Promise<Store> {
  // A deployment's key comes first (a database without one was set up with --key-file).
  loadOrCreatePlatformKeys(dataDir);
  if (TEST_BACKEND === 'sqlite') return createSqliteStore(dataDir);
  return createPostgresStore(await databaseForDataDir(dataDir));
}
