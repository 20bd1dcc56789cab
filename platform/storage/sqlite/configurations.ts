import type Database from 'better-sqlite3';
import type { ConfigurationRepository, StoredConfiguration } from '../store.js';

/** Chargers' reported configurations (DESIGN.md §20): one row per device, the newest report's. */
export function createSqliteConfigurations(db: Database.Database): ConfigurationRepository {
  const stmt = {
    // A report no newer than the stored one (late, or a replay) changes nothing.
    record: db.prepare(
      `INSERT INTO device_configurations (device_id, reported_values, reported_at_ms) VALUES (?, ?, ?)
       ON CONFLICT (device_id) DO UPDATE SET reported_values = excluded.reported_values,
         reported_at_ms = excluded.reported_at_ms
       WHERE device_configurations.reported_at_ms < excluded.reported_at_ms`,
    ),
    get: db.prepare('SELECT reported_values, reported_at_ms FROM device_configurations WHERE device_id = ?'),
  };
  return {
    async recordConfiguration(deviceId, configuration) {
      const { values, reported_at_ms } = configuration;
      return stmt.record.run(deviceId, JSON.stringify(values), reported_at_ms).changes === 1;
    },
    async getConfiguration(deviceId) {
      const raw = stmt.get.get(deviceId) as { reported_values: string; reported_at_ms: number } | undefined;
      if (!raw) return undefined;
      return {
        values: JSON.parse(raw.reported_values) as StoredConfiguration['values'],
        reported_at_ms: raw.reported_at_ms,
      };
    },
  };
}
