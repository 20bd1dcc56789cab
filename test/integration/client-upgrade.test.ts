import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTokenService } from '../../platform/services/access-tokens.js';
import { loadOrCreatePlatformKeys } from '../../platform/storage/platform-keys.js';
import { PG_MIGRATIONS } from '../../platform/storage/postgres/migrations.js';
import { MIGRATIONS } from '../../platform/storage/sqlite/migrations.js';
import { DATABASE_FILE } from '../../platform/storage/sqlite/store.js';
import { databaseForDataDir, TEST_BACKEND } from '../helpers/backends.js';
import { operatorToken, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { rotateClientSecretOf } from '../helpers/sealed-writes.js';

/**
 * A deployment from before clients had a lifecycle (DESIGN.md §18) upgrades with its clients active at
 * generation 1: their secrets and the tokens issued before the upgrade (which carry no generation) keep working
 * until the client's first rotation or a revocation. The schema is built up to, not including, the lifecycle
 * migration, found by what it does rather than by its number.
 */
const isLifecycle = (sql: string) => sql.includes('ALTER TABLE clients ADD COLUMN secret_gen');
const dirs: string[] = [];
let tp: TestPlatform | undefined;
let dataDir: string;
let legacyToken: string;
const secret = 'an-old-client-secret-from-before-the-upgrade-000';

async function oldSchema(dir: string, sealed: string): Promise<void> {
  const rows = [
    "INSERT INTO operators (operator_id, name, created_ms) VALUES ('op_old', 'Old', 0)",
    `INSERT INTO clients (client_id, secret_sealed, scopes, created_ms) VALUES ('cli_old', '${sealed}', 'read', 0)`,
    "INSERT INTO client_operators (client_id, operator_id) VALUES ('cli_old', 'op_old')",
  ];
  if (TEST_BACKEND === 'sqlite') {
    const upTo = MIGRATIONS.findIndex(isLifecycle);
    expect(upTo).toBeGreaterThan(0);
    const db = new Database(join(dir, DATABASE_FILE));
    for (const m of MIGRATIONS.slice(0, upTo)) db.exec(m);
    db.pragma(`user_version = ${upTo}`);
    for (const r of rows) db.exec(r);
    db.close();
    return;
  }
  const upTo = PG_MIGRATIONS.findIndex(isLifecycle);
  expect(upTo).toBeGreaterThan(0);
  // An empty database: the old schema is written here by hand.
  const client = new pg.Client({ connectionString: await databaseForDataDir(dir, { empty: true }) });
  await client.connect();
  try {
    await client.query('CREATE TABLE schema_version (version INTEGER NOT NULL)');
    for (const m of PG_MIGRATIONS.slice(0, upTo)) await client.query(m);
    await client.query('INSERT INTO schema_version (version) VALUES ($1)', [upTo]);
    for (const r of rows) await client.query(r);
  } finally {
    await client.end();
  }
}

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'cp-client-upgrade-'));
  dirs.push(dataDir);
  const keys = loadOrCreatePlatformKeys(dataDir);
  await oldSchema(dataDir, keys.sealSecret(secret));
  // A token as the platform issued them before: no `gen` claim.
  const nowS = Math.floor(Date.now() / 1000);
  legacyToken = createTokenService(keys.tokenKey).issueOperatorToken({
    sub: 'cli_old',
    scp: ['read'],
    ops: ['op_old'],
    iat: nowS,
    exp: nowS + 3_600,
  });
  tp = await startTestPlatform({ dataDir });
});
afterAll(async () => {
  await tp?.stop();
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

describe('upgrading a deployment whose clients predate their lifecycle', () => {
  it('keeps its clients active at generation 1, their secrets and their earlier tokens working', async () => {
    const p = tp!;
    expect(await p.store.listClients()).toEqual([
      { client_id: 'cli_old', operator_ids: ['op_old'], scopes: ['read'], status: 'active', created_ms: 0 },
    ]);
    expect(await p.store.getClient('cli_old')).toMatchObject({ secret_gen: 1, previous_secret_sealed: null });
    expect((await p.http.get('/v1/operator/sites', { token: legacyToken })).status).toBe(200);
    const fresh = await operatorToken(p.http, 'cli_old', secret);
    expect((await p.http.get('/v1/operator/sites', { token: fresh })).status).toBe(200);
  });

  it('refuses the earlier tokens once the client is rotated without a grace', async () => {
    const p = tp!;
    const rotation = await rotateClientSecretOf(p, 'cli_old', 0);
    expect(rotation.outcome).toBe('rotated');
    await expect
      .poll(async () => (await p.http.get('/v1/operator/sites', { token: legacyToken })).status, {
        timeout: 5_000,
      })
      .toBe(401);
  });
});
