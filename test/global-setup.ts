import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { checkResponses, RESPONSE_LOG_ENV, readRecorded } from './helpers/response-log.js';

/**
 * Names this test run (its PostgreSQL databases carry the id, `helpers/backends.ts`) and, in PostgreSQL
 * runs, makes the migrated database every test database copies, and drops every database the run created once
 * it is over.
 *
 * Every answer the tests receive through `httpClient` is recorded (helpers/response-log.ts); once the run is
 * over, each is checked against the OpenAPI document (its status declared for the operation, its body
 * matching the schema), and the run fails with the list of offenders. `CP_TEST_RESPONSE_LOG=DIR` keeps the
 * recording in DIR.
 */
export default async function setup(): Promise<() => Promise<void>> {
  process.env.CP_TEST_RUN ??= randomBytes(4).toString('hex');
  const postgres = process.env.TEST_DATABASE === 'postgres' || process.env.TEST_DATABASE === 'both';
  // Each project of the config runs this setup (all teardowns come after every test): one checks the recording.
  const created = !process.env[RESPONSE_LOG_ENV];
  if (created) process.env[RESPONSE_LOG_ENV] = mkdtempSync(join(tmpdir(), 'cp-responses-'));
  if (postgres) {
    // One migrated database for the run; every test database is a copy of it (helpers/backends.ts).
    const { createMigratedTemplate } = await import('./helpers/backends.js');
    await createMigratedTemplate();
  }
  const checks = !process.env.CP_TEST_RESPONSE_LOG_CHECKED;
  process.env.CP_TEST_RESPONSE_LOG_CHECKED = '1';
  return async () => {
    if (postgres) {
      const { dropDatabase, listDatabases, TEST_DATABASE_PREFIX } = await import('./helpers/backends.js');
      for (const name of await listDatabases(TEST_DATABASE_PREFIX)) await dropDatabase(name);
    }
    if (checks) checkRecordedResponses(process.env[RESPONSE_LOG_ENV]!, created);
  };
}

function checkRecordedResponses(dir: string, remove: boolean): void {
  const { document, responses } = readRecorded(dir);
  if (remove) rmSync(dir, { recursive: true, force: true });
  if (!document || responses.length === 0) return;
  const offenders = checkResponses(document, responses);
  if (offenders.length === 0) return;
  throw new Error(
    `${offenders.length} kind(s) of answer the OpenAPI document does not declare (of ${responses.length} ` +
      `distinct answers recorded; platform/http/openapi.ts and the routes' \`errors\` declare them):\n  ` +
      offenders.join('\n  '),
  );
}
