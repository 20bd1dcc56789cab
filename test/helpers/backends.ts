import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { loadOrCreatePlatformKeys } from '../../platform/platform-keys.js';
import { createPostgresStore } from '../../platform/storage/postgres/store.js';
import type { RetentionPolicy } from '../../platform/storage/retention-policy.js';
import { createSqliteStore } from '../../platform/storage/sqlite/store.js';
import type { Store } from '../../platform/storage/store.js';

/**
 * The storage backends tests run on. `TEST_DATABASE=postgres` runs the integration suite on PostgreSQL
 * (`npm run test:postgres`); every platform a test starts then gets a throw-away database of its own.
 */
export type Backend = 'sqlite' | 'postgres';
export const BACKENDS: readonly Backend[] = ['sqlite', 'postgres'];
export const TEST_BACKEND: Backend = process.env.TEST_DATABASE === 'postgres' ? 'postgres' : 'sqlite';
/** The server the throw-away databases are created on (DESIGN.md §13: trust auth, user postgres). */
export const POSTGRES_ADMIN_URL =
  process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export interface TestDatabase {
  url: string;
  drop(): Promise<void>;
}

/** A new, empty PostgreSQL database, dropped (with its connections) by `drop`. */
export async function createTestDatabase(): Promise<TestDatabase> {
  const name = `cp_test_${process.pid}_${randomBytes(4).toString('hex')}`;
  await adminQuery(`CREATE DATABASE ${name}`);
  const url = new URL(POSTGRES_ADMIN_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: () => adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`),
  };
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
  const keys = loadOrCreatePlatformKeys(dataDir);
  const now = opts.now ?? Date.now;
  const retention = opts.retention ? { retention: opts.retention } : {};
  if (backend === 'sqlite') {
    const store = createSqliteStore(dataDir, keys, now, {
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
  const store = await createPostgresStore(database.url, keys, now, {
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
