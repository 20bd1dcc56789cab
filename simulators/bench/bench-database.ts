import { randomBytes } from 'node:crypto';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import * as z from 'zod';

/**
 * Where a benchmark's platform keeps its data: the SQLite file of its data directory (the default), or a
 * throw-away PostgreSQL database made for the run on the server given with `--database URL` (`cp_bench_…`,
 * dropped at the end unless kept). The bench reads it only from outside, as an operator would: row counts and
 * bytes on disk, never through the platform's code.
 */
export type Backend = 'sqlite' | 'postgres';

/** Bytes of the whole database (`total`) and of what makes it up on each backend. */
export type DatabaseBytes =
  | { sqlite: number; wal: number; total: number }
  /** `database`: pg_database_size; `telemetry`: the telemetry partitions with their indexes and TOAST. */
  | { database: number; telemetry: number; total: number };

export interface BenchDatabase {
  backend: Backend;
  /** The platform's `--database` (`sqlite`, or the URL of the run's database, password included). */
  choice: string;
  /** The run's database without a password, for output (null on SQLite: the data directory says it). */
  describe: string | null;
  /** Rows of a platform table (the SQLite file opened read-only). */
  count(dataDir: string, table: 'telemetry' | 'charging_records'): Promise<number>;
  bytes(dataDir: string): Promise<DatabaseBytes>;
  /** Telemetry samples stored: the recent table's rows and those compacted into blocks (DESIGN.md §21). */
  telemetrySamples(dataDir: string): Promise<number>;
  /** Drops the run's PostgreSQL database unless `keep` (nothing on SQLite: the data directory goes with it). */
  release(keep: boolean): Promise<void>;
}

const SQLITE_FILE = 'platform.sqlite';

function sqliteDatabase(): BenchDatabase {
  return {
    backend: 'sqlite',
    choice: 'sqlite',
    describe: null,
    async count(dataDir, table) {
      const db = new Database(join(dataDir, SQLITE_FILE), { readonly: true });
      try {
        return (db.prepare(`SELECT COUNT(*) AS n FROM ${table}`).get() as { n: number }).n;
      } finally {
        db.close();
      }
    },
    async telemetrySamples(dataDir) {
      const db = new Database(join(dataDir, SQLITE_FILE), { readonly: true });
      try {
        return (
          db
            .prepare(
              `SELECT (SELECT COUNT(*) FROM telemetry) + (SELECT COALESCE(SUM(samples), 0) FROM telemetry_blocks) AS n`,
            )
            .get() as { n: number }
        ).n;
      } finally {
        db.close();
      }
    },
    async bytes(dataDir) {
      const size = (file: string) =>
        stat(join(dataDir, file)).then(
          (s) => s.size,
          () => 0,
        );
      const [sqlite, wal] = await Promise.all([size(SQLITE_FILE), size(`${SQLITE_FILE}-wal`)]);
      return { sqlite, wal, total: sqlite + wal };
    },
    async release() {},
  };
}

/** A URL as printed: no password (a kept database is named in logs and in the JSON). */
export function withoutPassword(url: string): string {
  const u = new URL(url);
  u.password = '';
  return u.toString();
}

async function query<T>(url: string, sql: string, row: z.core.$ZodType<T>): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(sql)).rows.map((r: unknown) => z.parse(row, r));
  } finally {
    await client.end();
  }
}

// bigint and numeric arrive as text from `pg`: every count and size here is far inside 2^53.
const Count = z.object({ n: z.coerce.number() });
const Sizes = z.object({ database: z.coerce.number(), telemetry: z.coerce.number() });
// The platform's day partitions of telemetry (and its default partition): the parent itself stores nothing.
const SIZES_SQL = `SELECT pg_database_size(current_database()) AS database,
  (SELECT coalesce(sum(pg_total_relation_size(inhrelid)), 0) FROM pg_inherits
    WHERE inhparent = 'telemetry'::regclass) AS telemetry`;

/** The PostgreSQL database at `url`; `server` (its server's URL) to drop it, when this run made it. */
function postgresDatabase(url: string, server?: string): BenchDatabase {
  const name = decodeURIComponent(new URL(url).pathname.slice(1));
  return {
    backend: 'postgres',
    choice: url,
    describe: withoutPassword(url),
    async count(_dataDir, table) {
      return (await query(url, `SELECT count(*) AS n FROM ${table}`, Count))[0]!.n;
    },
    async telemetrySamples() {
      const sql = `SELECT (SELECT count(*) FROM telemetry) + (SELECT coalesce(sum(samples), 0) FROM telemetry_blocks) AS n`;
      return (await query(url, sql, Count))[0]!.n;
    },
    async bytes() {
      const { database, telemetry } = (await query(url, SIZES_SQL, Sizes))[0]!;
      return { database, telemetry, total: database };
    },
    async release(keep) {
      if (keep || server === undefined) return;
      // FORCE: a connection the platform left behind must not keep the database alive.
      await query(server, `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`, z.unknown());
    },
  };
}

/** SQLite without `server`; else a new database `cp_bench_<random>` on that PostgreSQL server. */
export async function createBenchDatabase(server: string | undefined): Promise<BenchDatabase> {
  if (server === undefined) return sqliteDatabase();
  const name = `cp_bench_${randomBytes(6).toString('hex')}`;
  await query(server, `CREATE DATABASE "${name}"`, z.unknown());
  const url = new URL(server);
  url.pathname = `/${name}`;
  return postgresDatabase(url.toString(), server);
}

/** The database a kept run used (`sqlite`, or the URL remembered with its data): never dropped by this run. */
export function existingBenchDatabase(choice: string): BenchDatabase {
  return choice === 'sqlite' ? sqliteDatabase() : postgresDatabase(choice);
}

/** A bench's `--database` (a PostgreSQL server URL; SQLite without it) and `--keep`. */
export interface BenchStorage {
  database?: string;
  keep?: boolean;
}

/** Runs `work` on a new bench database and drops it afterwards (unless kept), even when `work` fails. */
export async function withBenchDatabase<T>(
  storage: BenchStorage,
  work: (db: BenchDatabase) => Promise<T>,
): Promise<T> {
  const db = await createBenchDatabase(storage.database);
  try {
    return await work(db);
  } finally {
    await db.release(storage.keep === true);
    if (storage.keep && db.describe) process.stderr.write(`database kept: ${db.describe}\n`);
  }
}
