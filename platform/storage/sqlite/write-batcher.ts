import type Database from 'better-sqlite3';

interface PendingWrite {
  run: () => unknown;
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
}

export interface WriteBatcherOptions {
  /**
   * Commits at most once per this many ms: a write arriving sooner after the previous commit waits for the
   * rest of the interval and shares the next one. 0: every turn of the event loop that has writes commits.
   */
  minCommitIntervalMs?: number;
  now?: () => number;
}

/**
 * Group commit: writes queued together share one SQLite transaction, and each caller's promise settles only
 * after that transaction committed. Hot paths (telemetry, heartbeat) stay durable-before-acknowledged without
 * paying a commit per request. Each write runs in its own savepoint, so one failing write does not undo the
 * others.
 *
 * When writes are rare, each commits in the turn it was made, at no added latency. When they come faster than
 * one per `minCommitIntervalMs`, they are gathered for the rest of that interval: a commit costs about as much
 * for one row as for twenty (the WAL frames of the pages it touched, the locks), so a busy platform does fewer,
 * larger commits, and each write waits at most one interval.
 */
export function createWriteBatcher(db: Database.Database, options: WriteBatcherOptions = {}) {
  const minInterval = options.minCommitIntervalMs ?? 0;
  const now = options.now ?? (() => performance.now());
  let queue: PendingWrite[] = [];
  let scheduled = false;
  let lastCommitAt = Number.NEGATIVE_INFINITY;

  const schedule = () => {
    scheduled = true;
    const wait = lastCommitAt + minInterval - now();
    if (wait >= 1) setTimeout(flush, wait);
    else setImmediate(flush);
  };

  const flush = () => {
    scheduled = false;
    if (queue.length === 0) return;
    lastCommitAt = now();
    const batch = queue;
    queue = [];
    const results: unknown[] = new Array(batch.length);
    const failures: unknown[] = new Array(batch.length);
    try {
      db.transaction(() => {
        batch.forEach((w, i) => {
          try {
            results[i] = db.transaction(w.run)();
          } catch (err) {
            // SQLite may roll the whole transaction back itself (SQLITE_FULL, SQLITE_IOERR, ...): then the
            // writes before this one are undone too, and the ones after must not run on their own and commit
            // while their callers are told they failed. Fail the batch as a whole.
            if (!db.inTransaction) throw err;
            failures[i] = err ?? new Error('write failed');
          }
        });
      }).immediate();
    } catch (err) {
      for (const w of batch) w.reject(err);
      return;
    }
    batch.forEach((w, i) => {
      if (failures[i] === undefined) w.resolve(results[i]);
      else w.reject(failures[i]);
    });
  };

  return {
    write<T>(run: () => T): Promise<T> {
      return new Promise<T>((resolve, reject) => {
        queue.push({ run, resolve: resolve as (value: unknown) => void, reject });
        if (!scheduled) schedule();
      });
    },
    /** Flush now (shutdown). */
    drain(): void {
      if (queue.length > 0) flush();
    },
  };
}
