import type { ConfigurationRepository, StoredConfiguration } from '../store.js';
import type { PgDatabase } from './database.js';

/** Chargers' reported configurations (DESIGN.md §20) on PostgreSQL: one row per device, the newest report's. */
export function createPgConfigurations(db: PgDatabase): ConfigurationRepository {
  return {
    async recordConfiguration(deviceId, configuration) {
      // A report no newer than the stored one (late, or a replay) changes nothing.
      const rows = await db.query(
        `INSERT INTO device_configurations (device_id, reported_values, reported_at_ms) VALUES ($1, $2::jsonb, $3)
         ON CONFLICT (device_id) DO UPDATE SET reported_values = excluded.reported_values,
           reported_at_ms = excluded.reported_at_ms
         WHERE device_configurations.reported_at_ms < excluded.reported_at_ms
         RETURNING 1`,
        [deviceId, JSON.stringify(configuration.values), configuration.reported_at_ms],
      );
      return rows.length === 1;
    },
    async getConfiguration(deviceId) {
      const [row] = await db.query<{
        reported_values: StoredConfiguration['values'];
        reported_at_ms: number;
      }>('SELECT reported_values, reported_at_ms FROM device_configurations WHERE device_id = $1', [
        deviceId,
      ]);
      return row && { values: row.reported_values, reported_at_ms: row.reported_at_ms };
    },
  };
}
