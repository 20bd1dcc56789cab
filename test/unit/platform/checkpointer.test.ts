import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startCheckpointer } from '../../../platform/storage/sqlite/checkpointer.js';

describe('WAL checkpoints in a worker thread', () => {
  let dir: string;
  let file: string;
  let db: Database.Database;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'ckpt-test-'));
    file = path.join(dir, 'db.sqlite');
    db = new Database(file);
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, k TEXT, v BLOB); CREATE INDEX t_k ON t (k)');
  });
  afterEach(() => {
    if (db.open) db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const walBytes = () => statSync(`${file}-wal`).size;
  const insert = () => {
    const stmt = db.prepare('INSERT INTO t (k, v) VALUES (?, randomblob(200))');
    db.transaction(() => {
      for (let i = 0; i < 50; i++) stmt.run(Math.random().toString(36));
    })();
  };

  it('keeps the WAL bounded under writes that never pause, with no checkpoint in the commits', async () => {
    db.pragma('wal_autocheckpoint = 0');
    insert();
    const perCommit = walBytes(); // the first commit into an empty WAL
    const checkpointer = startCheckpointer(db, file, { intervalMs: 5, restartAtFrames: 500 });
    expect(db.pragma('wal_autocheckpoint', { simple: true })).toBe(0);
    // Enough commits that, kept in the WAL, they would fill 32 MiB (at least: later commits touch more pages).
    const commits = Math.ceil((32 * 1024 * 1024) / perCommit);
    let largest = 0;
    for (let i = 1; i < commits; i++) {
      insert();
      largest = Math.max(largest, walBytes());
      await sleep(1);
    }
    await checkpointer.close();
    // Restarted at 500 frames (~2 MiB), plus what commits add while the worker waits for its turn: a loaded
    // machine (the whole suite in parallel) can hold it off for a while, so the bound is loose, yet half of
    // what the WAL would hold without the worker.
    expect(largest).toBeLessThan(16 * 1024 * 1024);
    expect((db.prepare('SELECT COUNT(*) AS n FROM t').get() as { n: number }).n).toBe(commits * 50);
  });

  it('falls back to SQLite’s own checkpoints when the worker fails', async () => {
    const failures: string[] = [];
    // A database path the worker cannot open.
    startCheckpointer(db, path.join(dir, 'missing', 'db.sqlite'), {
      onFailure: (message) => failures.push(message),
    });
    expect(db.pragma('wal_autocheckpoint', { simple: true })).toBe(0);
    for (let i = 0; i < 100 && failures.length === 0; i++) await sleep(20);
    expect(failures).toHaveLength(1);
    expect(db.pragma('wal_autocheckpoint', { simple: true })).toBe(1000);
  });
});
