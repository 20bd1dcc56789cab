/**
 * PostgreSQL migrations 12 and up: telemetry history (DESIGN.md §21), as SQLite's
 * migrations-telemetry-history.ts. Appended to PG_MIGRATIONS in order (migrations.ts).
 */
export const PG_TELEMETRY_HISTORY_MIGRATIONS: readonly string[] = [
  // 12: compressed telemetry blocks, one per connector and UTC hour (postgres/telemetry-blocks.ts). The blocks
  // are zstd already: stored out of line without PostgreSQL compressing them again.
  `
  CREATE TABLE telemetry_blocks (
    device_id TEXT NOT NULL,
    connector_id INTEGER NOT NULL,
    start_ms BIGINT NOT NULL,
    first_ms BIGINT NOT NULL,
    last_ms BIGINT NOT NULL,
    samples INTEGER NOT NULL,
    data BYTEA NOT NULL,
    PRIMARY KEY (device_id, connector_id, start_ms)
  );
  ALTER TABLE telemetry_blocks ALTER COLUMN data SET STORAGE EXTERNAL;
  CREATE INDEX telemetry_blocks_by_start ON telemetry_blocks(start_ms);
  `,
  // 13: each block's quarter-hour summary, as SQLite's migration 16 (a 15-minute read need not decode the block).
  `ALTER TABLE telemetry_blocks ADD COLUMN summary BYTEA;`,
  // 14: the partial index by which the compaction pass finds older blocks without a summary (SQLite's 17).
  `CREATE INDEX telemetry_blocks_unsummarized ON telemetry_blocks(start_ms) WHERE summary IS NULL;`,
];
