import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { migrate } from '../../../platform/storage/sqlite/migrations.js';
import { createTelemetryKeys } from '../../../platform/storage/sqlite/telemetry-keys.js';

/** The recent telemetry table's integer device keys (migration 18), on a real SQLite database in memory. */
let db: Database.Database;
beforeEach(() => {
  db = new Database(':memory:');
  migrate(db);
});
afterEach(() => db.close());

const inTransaction = <T>(run: () => T, commit: boolean): T => {
  db.exec('BEGIN');
  const result = run();
  db.exec(commit ? 'COMMIT' : 'ROLLBACK');
  return result;
};

describe('telemetry device keys', () => {
  it('gives a charger one key, read back from the table by a new process', () => {
    const keys = createTelemetryKeys(db);
    const fresh = new Map<string, number>();
    const a = inTransaction(() => keys.keyOf('dev_a', fresh), true);
    keys.committed(fresh);
    const b = inTransaction(() => keys.keyOf('dev_b', new Map()), true);
    expect(a).not.toBe(b);
    expect(keys.keyOf('dev_a', new Map())).toBe(a);
    // Another process (a restart) finds the same keys in the table.
    const restarted = createTelemetryKeys(db);
    expect([restarted.keyOf('dev_a', new Map()), restarted.keyOf('dev_b', new Map())]).toEqual([a, b]);
    expect(db.prepare('SELECT COUNT(*) FROM telemetry_devices').pluck().get()).toBe(2);
  });

  it('forgets a key given in a transaction that was rolled back: SQLite gives that number to the next charger', () => {
    const keys = createTelemetryKeys(db);
    const lost = inTransaction(() => keys.keyOf('dev_a', new Map()), false);
    const fresh = new Map<string, number>();
    const b = inTransaction(() => keys.keyOf('dev_b', fresh), true);
    keys.committed(fresh);
    expect(b).toBe(lost);
    // Had dev_a's key been remembered, its samples would now be stored under dev_b.
    const a = inTransaction(() => keys.keyOf('dev_a', new Map()), true);
    expect(a).not.toBe(b);
    expect(
      db.prepare('SELECT device_key FROM telemetry_devices WHERE device_id = ?').pluck().get('dev_a'),
    ).toBe(a);
  });
});
