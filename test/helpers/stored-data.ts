import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { databaseForDataDir, TEST_BACKEND } from './backends.js';

/**
 * Plain SQL on what a deployment stored, beside the platform (for tests that count rows, compare snapshots or
 * break the schema on purpose), on the run's backend: the data directory's SQLite file, or its PostgreSQL
 * database. SQL uses `?` placeholders and standard SQL both backends read alike.
 */
export interface StoredData {
  all<T = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<T[]>;
  /** `SELECT count(*) AS n …` and the like: the first column of the first row, as a number. */
  value(sql: string, params?: readonly unknown[]): Promise<number>;
  /** The platform's tables (not SQLite's own, not PostgreSQL's partitions or schema bookkeeping). */
  tables(): Promise<string[]>;
  exec(sql: string): Promise<void>;
  close(): Promise<void>;
}

export async function openStoredData(dataDir: string, opts: { write?: boolean } = {}): Promise<StoredData> {
  if (TEST_BACKEND === 'sqlite') {
    const db = new Database(join(dataDir, 'platform.sqlite'), {
      readonly: !opts.write,
      fileMustExist: true,
    });
    return {
      all: async <T>(sql: string, params: readonly unknown[] = []) => db.prepare(sql).all(...params) as T[],
      value: async (sql, params = []) =>
        Number(
          db
            .prepare(sql)
            .pluck()
            .get(...params),
        ),
      tables: async () =>
        db
          .prepare(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
          )
          .pluck()
          .all() as string[],
      exec: async (sql) => {
        db.exec(sql);
      },
      close: async () => {
        db.close();
      },
    };
  }
  const client = new pg.Client({ connectionString: await databaseForDataDir(dataDir) });
  await client.connect();
  const numbered = (sql: string) => {
    let i = 0;
    return sql.replace(/\?/g, () => `$${++i}`);
  };
  const all = async <T>(sql: string, params: readonly unknown[] = []) =>
    (await client.query(numbered(sql), [...params])).rows as T[];
  return {
    all,
    async value(sql, params = []) {
      const res = await client.query({ text: numbered(sql), values: [...params], rowMode: 'array' });
      return Number((res.rows[0] as unknown[] | undefined)?.[0]);
    },
    async tables() {
      const rows = await all<{ name: string }>(
        `SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition
           AND c.relname <> 'schema_version' ORDER BY c.relname`,
      );
      return rows.map((r) => r.name);
    },
    async exec(sql) {
      await client.query(sql);
    },
    close: () => client.end(),
  };
}
