/**
 * PostgreSQL migrations 10 and up: remote maintenance (DESIGN.md §20), as SQLite's migrations-maintenance.ts.
 * Appended to PG_MIGRATIONS in order (migrations.ts); a new migration goes at the end.
 */
export const PG_MAINTENANCE_MIGRATIONS: readonly string[] = [
  // 10: remote maintenance (DESIGN.md §20), as SQLite's migration 13: a command's reported result, each
  // connector's availability, each charger's configuration as it last reported it.
  `
  ALTER TABLE commands ADD COLUMN result JSONB;
  ALTER TABLE connectors ADD COLUMN available BOOLEAN NOT NULL DEFAULT true;
  CREATE TABLE device_configurations (
    device_id TEXT PRIMARY KEY REFERENCES devices(device_id),
    reported_values JSONB NOT NULL,
    reported_at_ms BIGINT NOT NULL
  );
  `,
  // 11: diagnostics archives, as SQLite's migration 14: chunks as BYTEA kept out of line uncompressed (the
  // archives are gzip'd already); ids in byte order in the newest-first index.
  `
  CREATE TABLE diagnostics (
    diagnostics_id TEXT PRIMARY KEY,
    device_id TEXT NOT NULL REFERENCES devices(device_id),
    client_id TEXT,
    command_id TEXT NOT NULL,
    status TEXT NOT NULL,
    start_ms BIGINT NOT NULL,
    end_ms BIGINT NOT NULL,
    size BIGINT,
    received BIGINT NOT NULL,
    sha256 TEXT,
    reason TEXT,
    chunk_bytes INTEGER NOT NULL,
    created_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL
  );
  CREATE INDEX diagnostics_newest ON diagnostics(device_id, created_ms DESC, diagnostics_id COLLATE "C" DESC);
  CREATE INDEX diagnostics_by_created ON diagnostics(created_ms);
  CREATE TABLE diagnostics_chunks (
    diagnostics_id TEXT NOT NULL REFERENCES diagnostics(diagnostics_id),
    chunk_index INTEGER NOT NULL,
    data BYTEA NOT NULL,
    PRIMARY KEY (diagnostics_id, chunk_index)
  );
  ALTER TABLE diagnostics_chunks ALTER COLUMN data SET STORAGE EXTERNAL;
  `,
];
