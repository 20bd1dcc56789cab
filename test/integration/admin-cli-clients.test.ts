import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pollUntil, runCli, runCliJson, type ServeProcess, spawnServe, tempDirs } from '../helpers/cli.js';
import { type HttpClient, type HttpResult, httpClient, operatorToken } from '../helpers/platform.js';

/**
 * `charger-platform clients list|revoke|rotate-secret` (DESIGN.md §18), run as the built program on a temporary
 * data directory while `serve` runs on it: the running platform sees each change within 5 s.
 */

const dirs = tempDirs('cp-admin-clients-');
let dir: string;
const cli = (...args: string[]) => runCli([...args, '--data-dir', dir]);
const cliJson = (...args: string[]) => runCliJson([...args, '--data-dir', dir, '--json']);

let opA: string;
let opB: string;
let clientA: { client_id: string; client_secret: string };
let clientAB: { client_id: string; client_secret: string };
let server: ServeProcess;
let http: HttpClient;

const sites = (token: string) => http.get('/v1/operator/sites', { token });
const tokenFor = (clientId: string, secret: string) =>
  http.post('/v1/operator/oauth/token', {
    json: { client_id: clientId, client_secret: secret, grant_type: 'client_credentials' },
  });
/** Polls the running platform until the token is refused (or 5 s pass): the change reached it. */
const refusedWithin5s = (token: string) =>
  pollUntil(
    () => sites(token),
    (r) => r.status === 401,
    5_000,
  );
function expectInvalidClient(res: HttpResult): void {
  expect(res.status, res.text).toBe(401);
  expect(res.body.code).toBe(2001);
  expect(res.body.error).toBe('invalid_client');
}

beforeAll(async () => {
  dir = await dirs.make();
  opA = (await cliJson('operators', 'create', '--name', 'Acme')).operator_id;
  opB = (await cliJson('operators', 'create', '--name', 'Beta')).operator_id;
  clientA = await cliJson('clients', 'create', '--operator', opA, '--scopes', 'read');
  clientAB = await cliJson('clients', 'create', '--operator', `${opB},${opA}`, '--scopes', 'read,write');
  server = await spawnServe(['--data-dir', dir, '--env', 'production', '--self-signed']);
  http = httpClient(server.url, await readFile(server.certPath, 'utf8'));
});
afterAll(async () => {
  await http?.close();
  const exit = await server?.stop();
  expect(exit).toEqual({ code: 0, signal: null });
  await dirs.removeAll();
});

describe('clients list', () => {
  it('--json prints [{client_id, operator_ids, scopes, status, created_at}] oldest first, never a secret', async () => {
    const res = await cli('clients', 'list', '--json');
    expect(res.code, res.stderr).toBe(0);
    const list = JSON.parse(res.stdout);
    expect(list).toEqual([
      {
        client_id: clientA.client_id,
        operator_ids: [opA],
        scopes: ['read'],
        status: 'active',
        created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      },
      {
        client_id: clientAB.client_id,
        operator_ids: [opA, opB].sort(),
        scopes: ['read', 'write'],
        status: 'active',
        created_at: expect.any(String),
      },
    ]);
    for (const item of list)
      expect(Object.keys(item).sort()).toEqual([
        'client_id',
        'created_at',
        'operator_ids',
        'scopes',
        'status',
      ]);
    expect(res.stdout).not.toContain(clientA.client_secret);
    expect(res.stdout).not.toContain(clientAB.client_secret);
  });

  it('without --json prints a table with a header and a line per client', async () => {
    const res = await cli('clients', 'list');
    expect(res.code, res.stderr).toBe(0);
    const lines = res.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^CLIENT\s+STATUS\s+SCOPES\s+OPERATORS\s+CREATED$/);
    expect(lines).toHaveLength(3);
    expect(lines[1]).toMatch(new RegExp(`^${clientA.client_id}\\s+active\\s+read\\s+${opA}\\s+\\d{4}-`));
    expect(res.stdout).not.toContain(clientA.client_secret);
  });

  it('on a directory with no clients says so', async () => {
    const empty = await dirs.make();
    await runCliJson(['operators', 'create', '--name', 'Solo', '--data-dir', empty, '--json']);
    const res = await runCli(['clients', 'list', '--data-dir', empty]);
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout).toBe('(no clients)\n');
    expect(await runCliJson(['clients', 'list', '--data-dir', empty, '--json'])).toEqual([]);
  });
});

describe('clients rotate-secret, while serve runs', () => {
  it('--json prints exactly {client_id, client_secret}; the old secret and token work through the default grace', async () => {
    const oldToken = await operatorToken(http, clientA.client_id, clientA.client_secret);
    const rotated = await cliJson('clients', 'rotate-secret', '--client', clientA.client_id);
    expect(Object.keys(rotated).sort()).toEqual(['client_id', 'client_secret']);
    expect(rotated.client_id).toBe(clientA.client_id);
    expect(rotated.client_secret).not.toBe(clientA.client_secret);
    // The new secret works at once (the token endpoint reads the database).
    const fresh = await tokenFor(clientA.client_id, rotated.client_secret);
    expect(fresh.status, fresh.text).toBe(200);
    expect((await sites(fresh.body.access_token)).status).toBe(200);
    // The old ones, within the day's grace, too.
    expect((await sites(oldToken)).status).toBe(200);
    const viaOld = await tokenFor(clientA.client_id, clientA.client_secret);
    expect(viaOld.status, viaOld.text).toBe(200);
    expect(viaOld.body.expires_in).toBeGreaterThan(86_300);

    // A second rotation with --grace 0 refuses the secret it replaced and its tokens at once.
    const prior = fresh.body.access_token as string;
    const again = await cli('clients', 'rotate-secret', '--client', clientA.client_id, '--grace', '0');
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toContain('client_secret: ');
    expect(again.stdout).toContain('refused now');
    const newSecret = /client_secret: (\S+)/.exec(again.stdout)![1]!;
    const refused = await refusedWithin5s(prior);
    expect(refused.status).toBe(401);
    expect(refused.body.code).toBe(2001);
    // Two generations back: refused as well.
    expect((await sites(oldToken)).status).toBe(401);
    expectInvalidClient(await tokenFor(clientA.client_id, rotated.client_secret));
    expectInvalidClient(await tokenFor(clientA.client_id, clientA.client_secret));
    const now = await tokenFor(clientA.client_id, newSecret);
    expect(now.status, now.text).toBe(200);
    expect((await sites(now.body.access_token)).status).toBe(200);
    clientA = { client_id: clientA.client_id, client_secret: newSecret };
  });

  it('refuses a bad --grace and an unknown client', async () => {
    for (const grace of ['-1', 'abc', '1.5', '2592001']) {
      const res = await cli('clients', 'rotate-secret', '--client', clientA.client_id, '--grace', grace);
      expect(res.code, grace).toBe(1);
      expect(res.stderr).toContain('--grace');
      expect(res.stdout).toBe('');
    }
    const res = await cli('clients', 'rotate-secret', '--client', 'cli_nobody', '--json');
    expect(res.code).toBe(1);
    expect(res.stderr).toContain('no client cli_nobody');
    expect(res.stdout).toBe('');
    // Nothing changed: the current secret still buys a token.
    expect((await tokenFor(clientA.client_id, clientA.client_secret)).status).toBe(200);
  });
});

describe('clients revoke, while serve runs', () => {
  it('refuses the client’s token on the running platform within 5 s and its secret at once', async () => {
    const token = await operatorToken(http, clientAB.client_id, clientAB.client_secret);
    const other = await operatorToken(http, clientA.client_id, clientA.client_secret);
    expect((await sites(token)).status).toBe(200);
    const res = await cli('clients', 'revoke', '--client', clientAB.client_id);
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout).toContain(`client ${clientAB.client_id} revoked`);
    const refused = await refusedWithin5s(token);
    expect(refused.status).toBe(401);
    expect(refused.body.code).toBe(2001);
    expectInvalidClient(await tokenFor(clientAB.client_id, clientAB.client_secret));
    // Only that client.
    expect((await sites(other)).status).toBe(200);
    const list = await cliJson('clients', 'list');
    expect(list.map((c: { status: string }) => c.status)).toEqual(['active', 'revoked']);
  });

  it('a second time changes nothing and says so (exit 0)', async () => {
    const res = await cli('clients', 'revoke', '--client', clientAB.client_id);
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout).toBe(`client ${clientAB.client_id} was already revoked: nothing changed\n`);
  });

  it('an unknown client: a clear error, exit 1', async () => {
    const res = await cli('clients', 'revoke', '--client', 'cli_nobody');
    expect(res.code).toBe(1);
    expect(res.stderr).toBe('charger-platform: no client cli_nobody\n');
    expect(res.stdout).toBe('');
  });

  it('rotate-secret of a revoked client is refused with a sentence', async () => {
    const res = await cli('clients', 'rotate-secret', '--client', clientAB.client_id, '--json');
    expect(res.code).toBe(1);
    expect(res.stderr).toContain(`client ${clientAB.client_id} is revoked`);
    expect(res.stdout).toBe('');
    expectInvalidClient(await tokenFor(clientAB.client_id, clientAB.client_secret));
  });
});

describe('serve --token-ttl', () => {
  it('keeps its default of a day', async () => {
    const res = await tokenFor(clientA.client_id, clientA.client_secret);
    expect(res.status, res.text).toBe(200);
    expect(res.body.expires_in).toBe(86_400);
  });

  it('above 86,400 is refused at start with a sentence naming the option and the bound', async () => {
    const res = await runCli([
      'serve',
      '--data-dir',
      dir,
      '--self-signed',
      '--port',
      '0',
      '--token-ttl',
      '86401',
    ]);
    expect(res.code).toBe(1);
    expect(res.stderr).toContain('--token-ttl');
    expect(res.stderr).toContain('86400');
    expect(res.stdout).toBe('');
  });
});
