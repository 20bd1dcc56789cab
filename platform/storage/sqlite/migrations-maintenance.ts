/**
 * Migrations 13 onwards (sqlite/migrations.ts applies them after UPDATE_MIGRATIONS): remote maintenance
 * (DESIGN.md §20).
 */
export const MAINTENANCE_MIGRATIONS: readonly string[] = [
  // 13: what a charger reported a command produced (JSON, NULL when none); each connector's availability (an
  // operator may take it out of service; every connector is in service until then); each charger's
  // configuration as it last reported it, with the report's timestamp (the newest report wins).
  `
  ALTER TABLE commands ADD COLUMN result TEXT;
  ALTER TABLE connectors ADD COLUMN available INTEGER NOT NULL DEFAULT 1;
  CREATE TABLE device_configurations (
    device_id TEXT PRIMARY KEY REFERENCES devices(device_id),
    reported_values TEXT NOT NULL,
    reported_at_ms INTEGER NOT NULL
  );
  `,
];
