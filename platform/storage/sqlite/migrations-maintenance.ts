/**
 * Migrations 13 onwards (sqlite/migrations.ts applies them after UPDATE_MIGRATIONS): remote maintenance and
 * diagnostics (DESIGN.md §20).
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
  // 14: diagnostics archives (storage/diagnostics-repository.ts): a request's record and the archive in chunks,
  // as update artifacts. A device's records go newest first through their index; retention finds old ones by
  // their creation time.
  `
  CREATE TABLE diagnostics (
    diagnostics_id TEXT PRIMARY KEY,
    device_id TEXT NOT NULL REFERENCES devices(device_id),
    client_id TEXT,
    command_id TEXT NOT NULL,
    status TEXT NOT NULL,
    start_ms INTEGER NOT NULL,
    end_ms INTEGER NOT NULL,
    size INTEGER,
    received INTEGER NOT NULL,
    sha256 TEXT,
    reason TEXT,
    chunk_bytes INTEGER NOT NULL,
    created_ms INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL
  );
  CREATE INDEX diagnostics_newest ON diagnostics(device_id, created_ms DESC, diagnostics_id DESC);
  CREATE INDEX diagnostics_by_created ON diagnostics(created_ms);
  CREATE TABLE diagnostics_chunks (
    diagnostics_id TEXT NOT NULL REFERENCES diagnostics(diagnostics_id),
    chunk_index INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (diagnostics_id, chunk_index)
  );
  `,
];
