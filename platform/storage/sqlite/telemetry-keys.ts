import type Database from 'better-sqlite3';

/**
 * The recent telemetry table (`telemetry_recent`, migration 18) keys a charger by an integer, `device_key`,
 * given in `telemetry_devices` the first time the charger's telemetry is stored: the unique index, which every
 * insert walks, holds at most 8 bytes of key where the 24-character device id took 25.
 *
 * Statements that filter by charger name the key with `deviceKeyOf(param)`, a scalar subquery SQLite evaluates
 * once per statement, so they still take the device id. Those that must return a charger's id read the view
 * `telemetry`, which joins the two.
 */
export const deviceKeyOf = (param: string): string =>
  `(SELECT device_key FROM telemetry_devices WHERE device_id = ${param})`;

/**
 * Device keys for the ingest path, remembered in memory. A key given inside a transaction is only remembered
 * once that transaction committed (`committed`): were it rolled back, the same key could go to another charger.
 */
export function createTelemetryKeys(db: Database.Database) {
  const stmt = {
    find: db.prepare('SELECT device_key FROM telemetry_devices WHERE device_id = ?').pluck(),
    add: db.prepare('INSERT INTO telemetry_devices (device_id) VALUES (?)'),
  };
  const known = new Map<string, number>();
  return {
    /**
     * The charger's key, given now if it has none; inside a write. `fresh` collects the keys given or first
     * read in this transaction, for `committed`.
     */
    keyOf(deviceId: string, fresh: Map<string, number>): number {
      const key = known.get(deviceId) ?? fresh.get(deviceId);
      if (key !== undefined) return key;
      const found = stmt.find.get(deviceId) as number | undefined;
      const given = found ?? Number(stmt.add.run(deviceId).lastInsertRowid);
      fresh.set(deviceId, given);
      return given;
    },
    /** The transaction that gave or read `fresh` committed. */
    committed(fresh: ReadonlyMap<string, number>): void {
      for (const [deviceId, key] of fresh) known.set(deviceId, key);
    },
  };
}
