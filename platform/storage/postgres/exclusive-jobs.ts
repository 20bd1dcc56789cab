import type { ExclusiveJob, RunAloneOutcome } from '../store.js';
import type { PgDatabase } from './database.js';

/** Any number unique to this program (see MIGRATION_LOCK in database.ts): one sweeping instance at a time. */
export const SWEEP_LOCK = 7_340_315_004;
const JOB_LOCKS: Record<ExclusiveJob, number> = { sweep: SWEEP_LOCK };

const ignore = () => undefined;

/**
 * Runs a job that must run on one instance at a time (DESIGN.md §13) while holding its session advisory lock,
 * on a pooled connection of its own for the whole run: when an instance dies, PostgreSQL ends its backend as
 * the connection drops and the lock goes with it, so the next instance to try runs the job. Nobody waits for
 * the lock (`pg_try_advisory_lock`): the job runs again on its next tick, wherever the lock is free then.
 * (`../maintenance-scheduler.ts` keeps two runs of one process from overlapping.)
 */
export function holdingJobLock<T>(
  db: PgDatabase,
  job: ExclusiveJob,
  run: () => Promise<T>,
): Promise<RunAloneOutcome<T>> {
  return whileHoldingLock(db, JOB_LOCKS[job], run);
}

/**
 * Runs `run` while this connection holds the lock `key`; `{ ran: false }`, without running it, when another
 * session holds it. The lock is released, and the connection returned, also when `run` throws. A connection
 * that fails (or cannot unlock) is closed, not reused, which releases the lock; its error passes unchanged, a
 * storage fault as anywhere else in this backend.
 */
export async function whileHoldingLock<T>(
  db: PgDatabase,
  key: number,
  run: () => Promise<T>,
): Promise<RunAloneOutcome<T>> {
  const client = await db.pool.connect();
  // Checked out, the client has no pool listener: a connection lost during `run` would otherwise be an
  // unhandled 'error' event that ends the process. The unlock fails instead.
  client.on('error', ignore);
  let broken = false;
  try {
    let locked: boolean;
    try {
      const { rows } = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1) AS ok', [key]);
      locked = rows[0]?.ok === true;
    } catch (err) {
      broken = true;
      throw err;
    }
    if (!locked) return { ran: false };
    try {
      return { ran: true, value: await run() };
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [key]).catch(() => {
        broken = true;
      });
    }
  } finally {
    client.removeListener('error', ignore);
    client.release(broken);
  }
}
