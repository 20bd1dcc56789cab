import { copyFile, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTcpProxy, type TcpProxy } from '../helpers/agent.js';
import { createTestDatabase, POSTGRES_ADMIN_URL, type TestDatabase } from '../helpers/backends.js';
import { runCli, type ServeProcess, spawnServe, tempDirs } from '../helpers/cli.js';
import { expectError, type HttpClient, httpClient, operatorToken } from '../helpers/platform.js';

/**
 * The PostgreSQL server's faults, as an operator meets them (PostgreSQL runs only: `npm run test:postgres`).
 * The platform reaches its database through a TCP proxy that the test cuts: requests that need the database
 * answer 503/9001 with Retry-After, the process and its health endpoint stay up, and it serves again as soon
 * as the database is back. A database it cannot reach at start, or one set up with another platform key,
 * stops `serve` with a message naming the database (never its password).
 */
const dirs = tempDirs('cp-pg-faults-');
const pgPort = Number(new URL(POSTGRES_ADMIN_URL).port || 5432);
afterAll(() => dirs.removeAll());

function viaPort(url: string, port: number, password?: string): string {
  const u = new URL(url);
  u.host = `127.0.0.1:${port}`;
  if (password) u.password = password;
  return u.toString();
}

describe('the database goes away under a running platform', () => {
  let db: TestDatabase;
  let proxy: TcpProxy;
  let srv: ServeProcess;
  let http: HttpClient;
  let token: string;
  beforeAll(async () => {
    db = await createTestDatabase();
    proxy = await startTcpProxy(pgPort);
    const dataDir = await dirs.make();
    srv = await spawnServe([
      '--env',
      'sandbox',
      '--data-dir',
      dataDir,
      '--database',
      viaPort(db.url, proxy.port),
    ]);
    http = httpClient(srv.url, await readFile(srv.certPath, 'utf8'));
    token = await operatorToken(http, srv.clientId!, srv.clientSecret!);
  });
  afterAll(async () => {
    await http?.close();
    await srv?.stop();
    await proxy?.close();
    await db?.drop();
  });

  it('answers 503/9001 with Retry-After while it is gone, stays up, and serves again when it is back', async () => {
    const devices = () => http.get('/v1/operator/devices', { token });
    expect((await devices()).status).toBe(200);

    proxy.setTarget(undefined);
    proxy.cut();
    const refused = await devices();
    expect(refused.status, srv.stderr()).toBe(503);
    expectError(refused, 503, 9001);
    expect(refused.headers['retry-after']).toBeDefined();
    expect(refused.text).not.toMatch(/ECONN|postgres|Connection terminated/i);
    // The operator's log says what is wrong and what happens meanwhile (once, not per request).
    const logged = () => `${srv.stdout()}${srv.stderr()}`.includes('the PostgreSQL server cannot be reached');
    for (let i = 0; i < 20 && !logged(); i++) await new Promise((r) => setTimeout(r, 100));
    expect(logged(), srv.stdout() + srv.stderr()).toBe(true);
    const health = await http.get('/healthz');
    expect(health.status).toBe(200);

    proxy.setTarget(pgPort);
    let back = await devices();
    for (let i = 0; i < 50 && back.status !== 200; i++) {
      await new Promise((r) => setTimeout(r, 200));
      back = await devices();
    }
    expect(back.status, srv.stderr()).toBe(200);
    expect(back.body.data.total).toBeGreaterThan(0);
    expect(srv.child.exitCode).toBeNull();
  }, 30_000);
});

describe('serve refuses a database it cannot use', () => {
  it('one it cannot reach: exit 1, naming the database without its password', async () => {
    const closed = await startTcpProxy(undefined);
    try {
      const url = viaPort(`${POSTGRES_ADMIN_URL.replace(/\/[^/]*$/, '')}/nowhere`, closed.port, 's3cret-pw');
      const res = await runCli([
        'serve',
        '--data-dir',
        await dirs.make(),
        '--self-signed',
        '--database',
        url,
      ]);
      expect(res.code).toBe(1);
      expect(res.stderr).toContain(`cannot use PostgreSQL 127.0.0.1:${closed.port}/nowhere`);
      expect(res.stderr).not.toContain('s3cret-pw');
    } finally {
      await closed.close();
    }
  });

  it('one set up with another platform key: exit 1, saying which key file to copy', async () => {
    const db = await createTestDatabase();
    try {
      const first = await dirs.make();
      const created = await runCli([
        'operators',
        'create',
        '--data-dir',
        first,
        '--database',
        db.url,
        '--name',
        'A',
      ]);
      expect(created.code, created.stderr).toBe(0);
      const second = await dirs.make();
      const res = await runCli(['serve', '--data-dir', second, '--self-signed', '--database', db.url]);
      expect(res.code).toBe(1);
      expect(res.stderr).toContain('another platform key');
      expect(res.stderr).toContain(`${second}/keys/platform.key`);
      // With the first instance's key copied over, the second directory uses the same database.
      await copyFile(join(first, 'keys', 'platform.key'), join(second, 'keys', 'platform.key'));
      const list = await runCli(['operators', 'list', '--data-dir', second, '--database', db.url, '--json']);
      expect(list.code, list.stderr).toBe(0);
      expect(JSON.parse(list.stdout)).toEqual([expect.objectContaining({ name: 'A' })]);
    } finally {
      await db.drop();
    }
  });
});
