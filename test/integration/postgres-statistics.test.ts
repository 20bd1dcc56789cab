import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPgDatabase, type PgDatabase } from '../../platform/storage/postgres/database.js';
import { analyzeStaleTables } from '../../platform/storage/postgres/statistics.js';
import { waitFor } from '../helpers/agent.js';
import { createTestDatabase, type TestDatabase } from '../helpers/backends.js';

/**
 * The platform analyzes its tables when their statistics are stale, as autovacuum would (which is off on
 * these machines' PostgreSQL, as it may be on an operator's): PostgreSQL runs only.
 */
describe('planner statistics (postgres)', () => {
  let database: TestDatabase;
  let db: PgDatabase;
  beforeAll(async () => {
    database = await createTestDatabase();
    db = await openPgDatabase(database.url);
  });
  afterAll(async () => {
    await db?.close();
    await database?.drop();
  });

  const lastAnalyze = async (table: string) =>
    (
      await db.query<{ at: Date | null }>(
        'SELECT last_analyze AS at FROM pg_stat_user_tables WHERE relname = $1',
        [table],
      )
    )[0]?.at ?? null;

  it('analyzes a table once enough of it changed, and not again until it changes again', async () => {
    await db.query(
      `INSERT INTO energy_rollups (device_id, bucket_ms, connector_id, imported_kwh, exported_kwh, power_sum,
         max_power, samples)
       SELECT 'dev_stats', g * 900000, 1, 1, 0, 1, 1, 1 FROM generate_series(1, 1000) AS g`,
    );
    // The server's activity counters reach other sessions within moments.
    await waitFor(
      () =>
        db.query<{ n: number }>(
          "SELECT n_mod_since_analyze AS n FROM pg_stat_user_tables WHERE relname = 'energy_rollups'",
        ),
      (rows) => (rows[0]?.n ?? 0) >= 1000,
      5_000,
      100,
    );
    expect(await lastAnalyze('energy_rollups')).toBeNull();
    expect(await analyzeStaleTables(db)).toContain('energy_rollups');
    expect(await lastAnalyze('energy_rollups')).not.toBeNull();
    await waitFor(
      () => analyzeStaleTables(db),
      (names) => !names.includes('energy_rollups'),
      5_000,
      100,
    );
    expect(await analyzeStaleTables(db)).not.toContain('energy_rollups');
  });
});
