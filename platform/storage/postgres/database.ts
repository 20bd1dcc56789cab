import pg from 'pg';
import { markDriverError } from '../storage-faults.js';
import { PG_MIGRATIONS } from './migrations.js';

/** Something that runs SQL: the pool, or the client of one transaction. */
export interface Sql {
  query<R = Record<string, unknown>>(text: string, values?: readonly unknown[]): Promise<R[]>;
}

export interface PgDatabase extends Sql {
  /**
   * Runs `work` in one transaction on one connection; retried from the start when PostgreSQL aborts it for a
   * serialization failure or a deadlock, so `work` must only touch the database (and compute).
   */
  tx<T>(work: (sql: Sql) => Promise<T>): Promise<T>;
  /** The connection pool, for what needs a dedicated client (LISTEN). */
  readonly pool: pg.Pool;
  readonly url: string;
  close(): Promise<void>;
}

/** Which part of a `postgres://` URL names the database, for messages (never the password). */
export function describeDatabase(url: string): string {
  try {
    const u = new URL(url);
    return `PostgreSQL ${u.hostname}${u.port ? `:${u.port}` : ''}${u.pathname}`;
  } catch {
    return 'PostgreSQL';
  }
}

export function isPostgresUrl(value: string): boolean {
  return value.startsWith('postgres://') || value.startsWith('postgresql://');
}

// BIGINT (epoch milliseconds, counts) and NUMERIC (what SUM of BIGINT returns) as numbers: every value
// stored here is far inside 2^53. Per pool, so that other users of `pg` in the process are unaffected.
const INT8_OID = 20;
const NUMERIC_OID = 1700;
const types = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === INT8_OID || oid === NUMERIC_OID) return (value: string) => Number(value);
    return pg.types.getTypeParser(oid, format);
  },
} as pg.CustomTypesConfig;

type Callback = (err: unknown, ...rest: unknown[]) => void;

/**
 * `pg.Client` whose errors are marked as the driver's as they leave it (every connect and query, whichever way
 * called: the pool uses callbacks, this code promises), so that only they can count as storage faults.
 */
class DriverClient extends pg.Client {}
const marked =
  (cb: Callback): Callback =>
  (err, ...rest) =>
    cb(err ? markDriverError(err) : err, ...rest);
const clientProto = DriverClient.prototype as unknown as Record<
  'query' | 'connect',
  (...a: unknown[]) => unknown
>;
for (const method of ['query', 'connect'] as const) {
  const original = clientProto[method] as (...a: unknown[]) => unknown;
  clientProto[method] = function (this: pg.Client, ...args: unknown[]) {
    const last = args.length - 1;
    if (typeof args[last] === 'function') args[last] = marked(args[last] as Callback);
    const result = original.apply(this, args);
    return result instanceof Promise
      ? result.catch((err: unknown) => {
          throw markDriverError(err);
        })
      : result;
  };
}

const RETRY_CODES = new Set(['40001', '40P01']);
const ignore = () => undefined;
const MAX_ATTEMPTS = 5;
/** Any number unique to this program: migrations run under it, one instance at a time. */
const MIGRATION_LOCK = 7_340_315_001;

/**
 * Opens a pool on `url` and brings the schema up to date (`migrations.ts`). Fails, with PostgreSQL's own
 * message, when the server cannot be reached or the schema is newer than this build.
 */
export async function openPgDatabase(url: string, options: { poolSize?: number } = {}): Promise<PgDatabase> {
  const pool = new pg.Pool({
    connectionString: url,
    max: options.poolSize ?? 10,
    Client: DriverClient,
    types,
    // A charger request must not hang on a dead server: fail, answer 503, and let the charger retry.
    connectionTimeoutMillis: 5_000,
    application_name: 'charger-platform',
  });
  // An idle client whose connection drops (a server restart) emits 'error' on the pool; without a listener
  // that would end the process. The next query opens a new connection.
  pool.on('error', () => undefined);
  const query = async <R>(text: string, values?: readonly unknown[]) =>
    (await pool.query(text, values as unknown[] | undefined)).rows as R[];
  const db: PgDatabase = {
    pool,
    url,
    query,
    async tx(work) {
      for (let attempt = 1; ; attempt++) {
        const client = await pool.connect();
        // A checked-out client has no pool listener: a connection lost between two statements would
        // otherwise be an unhandled 'error' event that ends the process. The next statement fails instead.
        client.on('error', ignore);
        const sql: Sql = {
          query: async <R>(text: string, values?: readonly unknown[]) =>
            (await client.query(text, values as unknown[] | undefined)).rows as R[],
        };
        let broken = false;
        try {
          await client.query('BEGIN');
          const result = await work(sql);
          await client.query('COMMIT');
          return result;
        } catch (err) {
          await client.query('ROLLBACK').catch(() => {
            broken = true;
          });
          const code = (err as { code?: string }).code;
          if (attempt < MAX_ATTEMPTS && code !== undefined && RETRY_CODES.has(code)) continue;
          throw err;
        } finally {
          client.removeListener('error', ignore);
          client.release(broken);
        }
      }
    },
    async close() {
      await pool.end();
    },
  };
  try {
    await migrate(db);
  } catch (err) {
    await pool.end().catch(() => undefined);
    throw err;
  }
  return db;
}

async function migrate(db: PgDatabase): Promise<void> {
  const client = await db.pool.connect();
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    await client.query('CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)');
    const rows = (await client.query('SELECT version FROM schema_version')).rows as Array<{
      version: number;
    }>;
    const current = rows[0]?.version ?? 0;
    if (current > PG_MIGRATIONS.length) {
      throw new Error(
        `database schema version ${current} is newer than this build knows (${PG_MIGRATIONS.length}); upgrade the platform`,
      );
    }
    for (let v = current; v < PG_MIGRATIONS.length; v++) {
      await client.query('BEGIN');
      try {
        await client.query(PG_MIGRATIONS[v]!);
        await client.query('DELETE FROM schema_version');
        await client.query('INSERT INTO schema_version (version) VALUES ($1)', [v + 1]);
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK');
        throw err;
      }
    }
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => undefined);
    client.release();
  }
}

/** The channel on which admin changes to principals are announced to every instance (`store.ts`). */
export const DIRECTORY_CHANNEL = 'charger_platform_directory';

/** Announces a change to devices' or clients' credentials, tenancy or signing; delivered at commit. */
export async function notifyDirectoryChange(sql: Sql): Promise<void> {
  await sql.query(`SELECT pg_notify('${DIRECTORY_CHANNEL}', '')`);
}
