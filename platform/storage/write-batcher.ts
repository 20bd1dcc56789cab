import type Database from 'better-sqlite3';

interface PendingWrite {
  run: () => unknown;
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
}

/**
 * Group commit: writes queued in the same turn of the event loop share one SQLite transaction, and each
 * caller's promise settles only after that transaction committed. Hot paths (telemetry, heartbeat) stay
 * durable-before-acknowledged without paying one fsync per request. Each write runs in its own savepoint, so
 * one failing write does not undo the others.
 */
export function createWriteBatcher(db: Database.Database) {
  let queue: PendingWrite[] = [];
  let scheduled = false;

  const flush = () => {
    scheduled = false;
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
        if (!scheduled) {
          scheduled = true;
          setImmediate(flush);
        }
      });
    },
    /** Flush now (shutdown). */
    drain(): void {
      if (queue.length > 0) flush();
    },
  };
}
