import { randomBytes } from 'node:crypto';

/**
 * Names this test run (its PostgreSQL databases carry the id, `helpers/backends.ts`) and, in PostgreSQL
 * runs, drops every database the run created once it is over.
 */
export default async function setup(): Promise<() => Promise<void>> {
  process.env.CP_TEST_RUN ??= randomBytes(4).toString('hex');
  const postgres = process.env.TEST_DATABASE === 'postgres' || process.env.TEST_DATABASE === 'both';
  return async () => {
    if (!postgres) return;
    const { dropDatabase, listDatabases, TEST_DATABASE_PREFIX } = await import('./helpers/backends.js');
    for (const name of await listDatabases(TEST_DATABASE_PREFIX)) await dropDatabase(name);
  };
}
