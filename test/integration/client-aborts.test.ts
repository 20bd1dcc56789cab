import { createServer } from 'node:net';
import { connect } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPgDatabase } from '../../platform/storage/postgres/database.js';
import { storageFaultOf } from '../../platform/storage/storage-faults.js';
import { signRequest } from '../../shared/index.js';
import { createTestDatabase, POSTGRES_ADMIN_URL, TEST_BACKEND } from '../helpers/backends.js';
import { createTenant, registerDevice, startTestPlatform, type TestPlatform } from '../helpers/platform.js';

/**
 * A client that goes away mid-request is not a storage fault (DESIGN.md §18, issue 33 finding 9): only the
 * database driver's errors are. Real TLS sockets cut by hand, on either backend, and the platform's own log read.
 */
let tp: TestPlatform;
beforeAll(async () => {
  tp = await startTestPlatform({ logLevel: 'debug' });
});
afterAll(async () => {
  await tp.stop();
});

interface LogLine {
  level: number;
  msg?: string;
  storage_fault?: string;
}
const lines = (): LogLine[] => tp.logs.map((l) => JSON.parse(l) as LogLine);
const WARN = 40;

/** Opens a TLS connection to the platform, writes `head`, and destroys the socket once `cut` resolves. */
async function cutRequest(head: string, cut: () => Promise<void>): Promise<void> {
  const socket = connect({ host: '127.0.0.1', port: tp.port, ca: tp.ca, servername: 'localhost' });
  await new Promise<void>((resolve, reject) => {
    socket.once('secureConnect', resolve);
    socket.once('error', reject);
  });
  socket.on('error', () => undefined);
  socket.write(head);
  await cut();
  socket.destroy();
}

/** Waits until the platform has logged a line matching `pred` (the request's end), at most ~5 s. */
async function logged(pred: (l: LogLine) => boolean): Promise<void> {
  for (let i = 0; i < 250 && !lines().some(pred); i++) await new Promise((r) => setTimeout(r, 20));
}

describe(`a client that aborts (${TEST_BACKEND})`, () => {
  it('mid-body, is logged below warn and never as a storage fault', async () => {
    const tenant = await createTenant(tp, 'Abort Co');
    const dev = await registerDevice(tp, 'ABORT-SN-1', tenant.siteId);
    const before = tp.logs.length;
    const body = JSON.stringify({ timestamp: new Date().toISOString(), connector_id: 1, state: 'idle' });
    const stamp = Math.floor(Date.now() / 1000);
    const signature = signRequest(dev.secret, 'POST', '/v1/device/telemetry', stamp, body);
    await cutRequest(
      [
        'POST /v1/device/telemetry HTTP/1.1',
        'host: localhost',
        `authorization: Bearer ${dev.token}`,
        'content-type: application/json',
        `x-signature: ${signature}`,
        `x-timestamp: ${stamp}`,
        `content-length: ${body.length + 5_000}`,
        '',
        body,
      ].join('\r\n'),
      () => new Promise((r) => setTimeout(r, 200)),
    );
    await logged((l) => /abort/i.test(l.msg ?? ''));
    const after = lines().slice(before);
    expect(
      after.some((l) => /abort/i.test(l.msg ?? '')),
      JSON.stringify(after),
    ).toBe(true);
    expect(
      after.filter((l) => l.level >= WARN),
      JSON.stringify(after),
    ).toEqual([]);
    expect(JSON.stringify(after)).not.toMatch(/cannot be reached|storage_fault|PostgreSQL|SQLite/);
  });

  it('during a long poll, is not logged as an error either', async () => {
    const tenant = await createTenant(tp, 'Abort Poll Co');
    const dev = await registerDevice(tp, 'ABORT-SN-2', tenant.siteId);
    const before = tp.logs.length;
    await cutRequest(
      [
        'GET /v1/device/commands?wait=30 HTTP/1.1',
        'host: localhost',
        `authorization: Bearer ${dev.token}`,
        '',
        '',
      ].join('\r\n'),
      () => new Promise((r) => setTimeout(r, 300)),
    );
    await new Promise((r) => setTimeout(r, 300));
    const after = lines().slice(before);
    expect(
      after.filter((l) => l.level >= WARN),
      JSON.stringify(after),
    ).toEqual([]);
    expect(JSON.stringify(after)).not.toMatch(/cannot be reached|storage_fault/);
  });
});

describe.runIf(TEST_BACKEND === 'postgres')('storage faults come from the PostgreSQL driver only', () => {
  it('counts the driver refused by a closed port, and the same code from anything else not', async () => {
    // A port nobody listens on: bound, then freed.
    const port = await new Promise<number>((resolve) => {
      const srv = createServer().listen(0, '127.0.0.1', () => {
        const p = (srv.address() as { port: number }).port;
        srv.close(() => resolve(p));
      });
    });
    const url = new URL(POSTGRES_ADMIN_URL);
    url.port = String(port);
    const refused = await openPgDatabase(url.toString()).catch((e: unknown) => e);
    expect(storageFaultOf(refused)).toEqual({ kind: 'unavailable', code: 'ECONNREFUSED', postgres: true });
    // The very same kind of error, raised by a socket that is not the driver's.
    const elsewhere = await new Promise<unknown>((resolve) => {
      connect({ host: '127.0.0.1', port }).once('error', resolve);
    });
    expect((elsewhere as { code?: string }).code).toBe('ECONNREFUSED');
    expect(storageFaultOf(elsewhere)).toBeUndefined();
    expect(storageFaultOf(Object.assign(new Error('aborted'), { code: 'ECONNRESET' }))).toBeUndefined();
  });

  it('counts a read-only server, never a bug in a statement', async () => {
    const database = await createTestDatabase();
    const db = await openPgDatabase(database.url, { poolSize: 1 });
    try {
      const bug = await db.query('SELECT 1 / 0').catch((e: unknown) => e);
      expect((bug as { code?: string }).code).toBe('22012');
      expect(storageFaultOf(bug)).toBeUndefined();
      const readOnly = await db
        .tx(async (sql) => {
          await sql.query('SET TRANSACTION READ ONLY');
          await sql.query('CREATE TABLE t (x int)');
        })
        .catch((e: unknown) => e);
      expect(storageFaultOf(readOnly)).toEqual({ kind: 'read_only', code: '25006', postgres: true });
    } finally {
      await db.close();
      await database.drop();
    }
  });
});
