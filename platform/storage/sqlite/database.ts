import { chmodSync, closeSync, existsSync, mkdirSync, openSync, statSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { asDataDirError } from '../storage-faults.js';
import { migrate } from './migrations.js';

export const DATABASE_FILE = 'platform.sqlite';

export function openDatabase(dataDir: string): Database.Database {
  let db: Database.Database | undefined;
  try {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    const file = join(dataDir, DATABASE_FILE);
    ownerOnly(file);
    db = new Database(file);
    db.pragma('journal_mode = WAL');
    // NORMAL in WAL mode: a power cut may lose the last commits but never corrupts the database; a crash of
    // the process alone loses nothing committed.
    db.pragma('synchronous = NORMAL');
    db.pragma('busy_timeout = 5000');
    db.pragma('foreign_keys = ON');
    // Each write of a group commit runs in its own savepoint, whose statement journal would otherwise be a
    // temporary file created, written and deleted for every commit.
    db.pragma('temp_store = MEMORY');
    migrate(db);
    // SQLite quietly opens a file it may not write read-only, and every write would fail later: find out now
    // with a write that changes nothing (SQLITE_READONLY there; it writes no page, so a full disk does not
    // stop a start: the platform serves reads and recovers when space returns).
    db.prepare('DELETE FROM settings WHERE 0').run();
    return db;
  } catch (err) {
    db?.close();
    throw asDataDirError(dataDir, err);
  }
}

/**
 * The database file, created 0600 before SQLite opens it (SQLite gives its -wal and -shm files the database
 * file's permissions); one created by an earlier version (0644) narrowed, with its -wal and -shm.
 */
function ownerOnly(file: string): void {
  if (!existsSync(file)) closeSync(openSync(file, 'a', 0o600));
  for (const path of [file, `${file}-wal`, `${file}-shm`]) {
    if (existsSync(path) && (statSync(path).mode & 0o077) !== 0) chmodSync(path, 0o600);
  }
}

export function placeholders(n: number): string {
  return new Array(n).fill('?').join(',');
}

/** Statements whose SQL depends on how many ids are bound, prepared once per distinct text. */
export type StatementCache = (sql: string) => Database.Statement;
export function statementCache(db: Database.Database): StatementCache {
  const cache = new Map<string, Database.Statement>();
  return (sql) => {
    let s = cache.get(sql);
    if (!s) {
      s = db.prepare(sql);
      cache.set(sql, s);
    }
    return s;
  };
}
