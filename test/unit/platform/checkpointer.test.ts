import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startCheckpointer } from '../../../platform/storage/checkpointer.js';

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
    const checkpointer = startCheckpointer(db, file, { intervalMs: 5, restartAtFrames: 500 });
    expect(db.pragma('wal_autocheckpoint', { simple: true })).toBe(0);
    let largest = 0;
    const deadline = Date.now() + 1_500;
    let commits = 0;
    while (Date.now() < deadline) {
      insert();
      commits++;
      largest = Math.max(largest, walBytes());
      await sleep(0);
    }
    await checkpointer.close();
    // Without checkpoints every commit would stay in the WAL: ~16 KiB or more per commit of 50 random keys.
    expect(commits).toBeGreaterThan(100);
    expect(commits * 16_384).toBeGreaterThan(4 * largest);
    // Restarted at 500 frames (plus what one commit adds while the restart waits): ~2 MiB at most.
    expect(largest).toBeLessThan(4 * 1024 * 1024);
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
