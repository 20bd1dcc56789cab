import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createPostgresStore } from '../../platform/storage/backends.js';
import { SWEEP_LOCK } from '../../platform/storage/postgres/exclusive-jobs.js';
import { storageFaultOf } from '../../platform/storage/storage-faults.js';
import type { Store } from '../../platform/storage/store.js';
import { startTcpProxy, type TcpProxy, waitFor } from '../helpers/agent.js';
import { createTestDatabase, POSTGRES_ADMIN_URL, type TestDatabase } from '../helpers/backends.js';
import { heldJob, neverRun } from '../helpers/held-jobs.js';

/**
 * `Maintenance.runAlone` on PostgreSQL across instances sharing one database (DESIGN.md §13): never on two at
 * once, the job passing to another instance when the one running it closes or dies. PostgreSQL only
 * (`npm run test:postgres`); the contract on one store, on both backends, is `exclusive-jobs.test.ts`.
 */

describe('runAlone across instances sharing PostgreSQL', () => {
  let database: TestDatabase;
  let dataDir: string;
  let open: Store[];
  let peek: pg.Client;
  let proxy: TcpProxy | undefined;

  /** Another instance on the test database (`url`, by default the database's own). */
  const instance = async (url = database.url): Promise<Store> => {
    const store = await createPostgresStore(url);
    open.push(store);
    return store;
  };
  /** Closes `store` in the test: afterEach leaves it. */
  const closeInstance = async (store: Store) => {
    open = open.filter((s) => s !== store);
    await store.close();
  };
  /** The backends holding the sweep's advisory lock (a bigint key: high 32 bits, low 32 bits, 1). */
  const sweepLockHolders = async (): Promise<number[]> => {
    const { rows } = await peek.query<{ pid: number }>(
      `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted
         AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
         AND classid = $1 AND objid = $2 AND objsubid = 1`,
      [Math.floor(SWEEP_LOCK / 2 ** 32), SWEEP_LOCK % 2 ** 32],
    );
    return rows.map((r) => r.pid);
  };

  beforeEach(async () => {
    database = await createTestDatabase();
    dataDir = await mkdtemp(join(tmpdir(), 'cp-jobs-'));
    open = [];
    proxy = undefined;
    peek = new pg.Client({ connectionString: database.url });
    await peek.connect();
  });
  afterEach(async () => {
    for (const store of open) await store.close().catch(() => undefined);
    await proxy?.close();
    await peek.end();
    await database.drop();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('runs the job on one instance at a time, and on the other once it finished', async () => {
    const a = await instance();
    const b = await instance();
    const jobA = heldJob('a');
    const runningA = a.runAlone('sweep', jobA.run);
    await jobA.started;
    expect(await sweepLockHolders()).toHaveLength(1);

    const jobB = neverRun();
    // Answered at once while A still runs, and B's job never started.
    expect(await b.runAlone('sweep', jobB.run)).toEqual({ ran: false });
    expect(await b.runAlone('sweep', jobB.run)).toEqual({ ran: false });
    expect(jobB.calls()).toBe(0);

    jobA.finish();
    expect(await runningA).toEqual({ ran: true, value: 'a' });
    expect(await sweepLockHolders()).toEqual([]);
    expect(await b.runAlone('sweep', async () => 'b')).toEqual({ ran: true, value: 'b' });
    // And back: whichever instance asks when it is free runs it.
    expect(await a.runAlone('sweep', async () => 'a again')).toEqual({ ran: true, value: 'a again' });
  });

  it("releases the lock when the job throws, and rejects with the job's error", async () => {
    const a = await instance();
    const b = await instance();
    const jobA = heldJob('never');
    const runningA = a.runAlone('sweep', jobA.run);
    await jobA.started;
    expect(await b.runAlone('sweep', neverRun().run)).toEqual({ ran: false });

    const boom = new Error('expiring commands failed');
    jobA.fail(boom);
    await expect(runningA).rejects.toBe(boom);
    expect(await sweepLockHolders()).toEqual([]);
    expect(await b.runAlone('sweep', async () => 'b')).toEqual({ ran: true, value: 'b' });
  });

  it('passes the job on when the instance running it closes', async () => {
    const a = await instance();
    const b = await instance();
    const jobA = heldJob('a');
    const runningA = a.runAlone('sweep', async () => {
      const value = await jobA.run();
      await a.countCommandsByStatus();
      return value;
    });
    await jobA.started;
    const closing = closeInstance(a);
    // Closing waits for the job, which still holds the lock.
    expect(await b.runAlone('sweep', neverRun().run)).toEqual({ ran: false });
    jobA.finish();
    expect(await runningA).toEqual({ ran: true, value: 'a' });
    await closing;
    expect(await sweepLockHolders()).toEqual([]);
    expect(await b.runAlone('sweep', async () => 'b')).toEqual({ ran: true, value: 'b' });
  });

  it('passes the job on at once when the connection of the instance running it drops', async () => {
    // A reaches PostgreSQL through a proxy whose connections the test cuts: what PostgreSQL sees when an
    // instance is killed or its machine goes away.
    proxy = await startTcpProxy(Number(new URL(POSTGRES_ADMIN_URL).port || 5432));
    const viaProxy = new URL(database.url);
    viaProxy.port = String(proxy.port);
    const a = await instance(viaProxy.toString());
    const b = await instance();
    const jobA = heldJob('a, cut off');
    const runningA = a.runAlone('sweep', jobA.run);
    await jobA.started;
    const [holder] = await sweepLockHolders();
    expect(holder).toBeDefined();
    expect(await b.runAlone('sweep', neverRun().run)).toEqual({ ran: false });

    proxy.setTarget(undefined);
    proxy.cut();
    // PostgreSQL ends A's backend as its connection closes, and the lock goes with it; A's job still runs.
    const holders = await waitFor(sweepLockHolders, (pids) => !pids.includes(holder!), 10_000);
    expect(holders).not.toContain(holder);
    expect(jobA.calls()).toBe(1);
    expect(await b.runAlone('sweep', async () => 'b took over')).toEqual({ ran: true, value: 'b took over' });

    // A's job finishes; its unlock fails on the dead connection, which is dropped, not reused.
    jobA.finish();
    expect(await runningA).toEqual({ ran: true, value: 'a, cut off' });
    // With PostgreSQL out of reach, A's next attempt fails as a storage fault, as any other A call would.
    const err = await a.runAlone('sweep', neverRun().run).catch((e: unknown) => e);
    expect(storageFaultOf(err)).toMatchObject({ kind: 'unavailable', postgres: true });

    // Back in reach, A takes part again.
    proxy.setTarget(Number(new URL(POSTGRES_ADMIN_URL).port || 5432));
    expect(await a.runAlone('sweep', async () => 'a back')).toEqual({ ran: true, value: 'a back' });
  });

  it('runs nothing while another session holds the lock, and runs once that session is gone', async () => {
    const a = await instance();
    const other = new pg.Client({ connectionString: database.url });
    await other.connect();
    try {
      await other.query('SELECT pg_advisory_lock($1)', [SWEEP_LOCK]);
      const job = neverRun();
      expect(await a.runAlone('sweep', job.run)).toEqual({ ran: false });
      expect(job.calls()).toBe(0);
    } finally {
      await other.end();
    }
    // `end` returns once the connection is closed; the server ends the backend just after.
    await waitFor(sweepLockHolders, (pids) => pids.length === 0, 10_000);
    expect(await a.runAlone('sweep', async () => 'a')).toEqual({ ran: true, value: 'a' });
  });
});
