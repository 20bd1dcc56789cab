import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import type Database from 'better-sqlite3';

/**
 * WAL checkpoints off the event loop. SQLite's automatic checkpoint runs inside the commit that crosses its
 * threshold: it copies the WAL back into the database file and fsyncs both, and the event loop waits for the
 * disk (measured: ~15 ms a checkpoint, several a second under telemetry load, about half the store's time).
 * Here a worker thread with its own connection checkpoints instead, so commits only append to the WAL.
 *
 * - Every `intervalMs` a PASSIVE checkpoint copies what it can without blocking anyone. The next commit after
 *   one that caught up starts the WAL from its beginning again; `journal_size_limit` then trims the file.
 * - Under a load that never pauses, a passive checkpoint may never quite catch up and the WAL would grow.
 *   Past `restartAtFrames` frames the worker runs a RESTART checkpoint, which waits for the current write and
 *   holds new ones off while it finishes the little the passive ones left, so that the next write starts the
 *   WAL over: a brief, rare wait.
 * - Should the worker fail, the connection goes back to SQLite's own automatic checkpoints.
 */
export interface CheckpointerOptions {
  intervalMs?: number;
  restartAtFrames?: number;
  /** Told once if the worker fails (the store then checkpoints in-line again). */
  onFailure?: (message: string) => void;
}

export interface Checkpointer {
  close(): Promise<void>;
}

/** SQLite's default `wal_autocheckpoint` (pages), restored if the worker fails. */
const SQLITE_AUTOCHECKPOINT_PAGES = 1000;
/** The WAL file is trimmed to this much when it restarts. */
const JOURNAL_SIZE_LIMIT_BYTES = 64 * 1024 * 1024;

interface WorkerInput {
  driverPath: string;
  dbPath: string;
  intervalMs: number;
  restartAtFrames: number;
}

/**
 * The worker's whole program, evaluated in the worker from its source text (so that it runs from the
 * TypeScript sources in tests as from the build): it may use only its arguments.
 */
function checkpointLoop(input: WorkerInput, load: (id: string) => unknown): void {
  const Driver = load(input.driverPath) as typeof Database;
  const { parentPort } = load('node:worker_threads') as typeof import('node:worker_threads');
  const db = new Driver(input.dbPath);
  // Only the RESTART checkpoint waits, for the one write in progress.
  db.pragma('busy_timeout = 2000');
  const timer = setInterval(() => {
    try {
      const [r] = db.pragma('wal_checkpoint(PASSIVE)') as Array<{ log: number }>;
      if (r && r.log >= input.restartAtFrames) db.pragma('wal_checkpoint(RESTART)');
    } catch (err) {
      // SQLITE_BUSY is a checkpoint that will be retried; anything else ends the worker.
      if ((err as { code?: string }).code === 'SQLITE_BUSY') return;
      clearInterval(timer);
      db.close();
      throw err;
    }
  }, input.intervalMs);
  parentPort?.on('message', () => {
    clearInterval(timer);
    db.close();
    parentPort.close();
  });
}

export function startCheckpointer(
  db: Database.Database,
  dbPath: string,
  options: CheckpointerOptions = {},
): Checkpointer {
  const input: WorkerInput = {
    driverPath: createRequire(import.meta.url).resolve('better-sqlite3'),
    dbPath,
    intervalMs: options.intervalMs ?? 500,
    restartAtFrames: options.restartAtFrames ?? 16_384,
  };
  const worker = new Worker(
    `(${checkpointLoop.toString()})(require('node:worker_threads').workerData, require)`,
    {
      eval: true,
      workerData: input,
    },
  );
  db.pragma(`journal_size_limit = ${JOURNAL_SIZE_LIMIT_BYTES}`);
  db.pragma('wal_autocheckpoint = 0');
  let closing = false;
  let failed = false;
  const fail = (message: string) => {
    if (closing || failed) return;
    failed = true;
    if (db.open) db.pragma(`wal_autocheckpoint = ${SQLITE_AUTOCHECKPOINT_PAGES}`);
    options.onFailure?.(message);
  };
  worker.on('error', (err) => fail(err.message));
  worker.on('exit', (code) => fail(`checkpoint worker exited (${code})`));
  // The worker must not keep a process alive that is otherwise done.
  worker.unref();
  return {
    async close() {
      if (closing) return;
      closing = true;
      if (failed) return;
      const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
      // Waited for, it must keep the process alive until it has closed its connection.
      worker.ref();
      worker.postMessage('close');
      await exited;
    },
  };
}
