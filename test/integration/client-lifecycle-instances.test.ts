import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisLink, type RedisLink } from '../../platform/coordination/redis-link.js';
import { pollUntil, runCli, runCliJson } from '../helpers/cli.js';
import { createTenant, operatorToken, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { startRedisServer, type TestRedis } from '../helpers/redis.js';

/**
 * An operator client's revocation and secret rotation (DESIGN.md §18), made with the real admin CLI against the
 * shared PostgreSQL, seen by each of three instances (one database, one Redis: DESIGN.md §13) within 5 s.
 * PostgreSQL only (`npm run test:postgres`).
 */

const quiet = { warn: () => undefined, info: () => undefined };
let redis: TestRedis;
let dataDir: string;
const links: RedisLink[] = [];
let instances: TestPlatform[] = [];
let tenant: Awaited<ReturnType<typeof createTenant>>;

async function instance(name: string): Promise<TestPlatform> {
  const link = createRedisLink(redis.url, name, quiet);
  links.push(link);
  const end = Date.now() + 10_000;
  while (!link.available() && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
  return startTestPlatform({ dataDir, redis: link, instanceId: name });
}

const cli = (...args: string[]) => runCli([...args, '--data-dir', dataDir]);
const sitesOn = (p: TestPlatform, token: string) => p.http.get('/v1/operator/sites', { token });

async function newClient(): Promise<{ client_id: string; client_secret: string }> {
  return runCliJson([
    'clients',
    'create',
    '--operator',
    tenant.operatorId,
    '--scopes',
    'read',
    '--data-dir',
    dataDir,
    '--json',
  ]);
}

/** Every instance refuses the token (401/2001) within 5 s of now. */
async function refusedEverywhereWithin5s(token: string): Promise<void> {
  const start = Date.now();
  for (const [i, p] of instances.entries()) {
    const left = Math.max(0, 5_000 - (Date.now() - start));
    const res = await pollUntil(
      () => sitesOn(p, token),
      (r) => r.status === 401,
      left,
      50,
    );
    expect(res.status, `instance ${i}`).toBe(401);
    expect(res.body.code).toBe(2001);
  }
}

beforeAll(async () => {
  redis = await startRedisServer();
  dataDir = await mkdtemp(join(tmpdir(), 'cp-client-instances-'));
  instances = [await instance('inst-a'), await instance('inst-b'), await instance('inst-c')];
  tenant = await createTenant(instances[0]!, 'Instances Lifecycle');
});

afterAll(async () => {
  for (const p of instances) await p.stop();
  for (const link of links) await link.close();
  await redis?.stop();
  await rm(dataDir, { recursive: true, force: true });
});

describe('client lifecycle across three instances', () => {
  it('clients revoke: every instance refuses the client’s tokens within 5 s, and its secret', async () => {
    const client = await newClient();
    const tokens = await Promise.all(
      instances.map((p) => operatorToken(p.http, client.client_id, client.client_secret)),
    );
    for (const [i, p] of instances.entries()) expect((await sitesOn(p, tokens[i]!)).status).toBe(200);

    const res = await cli('clients', 'revoke', '--client', client.client_id);
    expect(res.code, res.stderr).toBe(0);
    for (const token of tokens) await refusedEverywhereWithin5s(token);
    for (const p of instances) {
      const again = await p.http.post('/v1/operator/oauth/token', {
        json: {
          client_id: client.client_id,
          client_secret: client.client_secret,
          grant_type: 'client_credentials',
        },
      });
      expect(again.status).toBe(401);
      expect(again.body.error).toBe('invalid_client');
    }
    // The tenant's other client carries on everywhere.
    for (const p of instances) expect((await sitesOn(p, tenant.token)).status).toBe(200);
  });

  it('clients rotate-secret: the new secret’s token works on every instance at once; with --grace 0 the old one is refused everywhere within 5 s', async () => {
    const client = await newClient();
    const [a, b, c] = instances as [TestPlatform, TestPlatform, TestPlatform];
    const oldToken = await operatorToken(a.http, client.client_id, client.client_secret);
    for (const p of instances) expect((await sitesOn(p, oldToken)).status).toBe(200);

    // With the default grace: the old token still works everywhere, and a token of the new secret issued on
    // one instance is accepted by the others at once (a newer generation than they hold is looked up).
    const rotated = await runCliJson([
      'clients',
      'rotate-secret',
      '--client',
      client.client_id,
      '--data-dir',
      dataDir,
      '--json',
    ]);
    const newToken = await operatorToken(c.http, client.client_id, rotated.client_secret);
    for (const p of [a, b, c]) {
      expect((await sitesOn(p, newToken)).status).toBe(200);
      expect((await sitesOn(p, oldToken)).status).toBe(200);
    }

    const now = await cli('clients', 'rotate-secret', '--client', client.client_id, '--grace', '0');
    expect(now.code, now.stderr).toBe(0);
    const latest = /client_secret: (\S+)/.exec(now.stdout)![1]!;
    await refusedEverywhereWithin5s(newToken);
    await refusedEverywhereWithin5s(oldToken);
    const latestToken = await operatorToken(b.http, client.client_id, latest);
    for (const p of instances) expect((await sitesOn(p, latestToken)).status).toBe(200);
  });
});
