/**
 * Migrations 15 onwards (sqlite/migrations.ts applies them after MAINTENANCE_MIGRATIONS): telemetry history
 * (DESIGN.md §21).
 */
export const TELEMETRY_HISTORY_MIGRATIONS: readonly string[] = [
  // 15: compressed telemetry blocks (storage/telemetry-block.ts), one per connector and UTC hour, made by the
  // compaction pass (sqlite/telemetry-blocks.ts) from the recent table `telemetry`. Reads find a device's
  // blocks by its key; retention finds old ones by their hour. An existing database is converted by the pass
  // itself, in the background, a device per write.
  `
  CREATE TABLE telemetry_blocks (
    device_id TEXT NOT NULL,
    connector_id INTEGER NOT NULL,
    start_ms INTEGER NOT NULL,
    first_ms INTEGER NOT NULL,
    last_ms INTEGER NOT NULL,
    samples INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (device_id, connector_id, start_ms)
  );
  CREATE INDEX telemetry_blocks_by_start ON telemetry_blocks(start_ms);
  `,
  // 16: each block's quarter-hour summary (storage/telemetry-block.ts encodeSummary), written by compaction;
  // a 15-minute read takes a block's buckets from it without decoding the block. Until a block compacted before
  // has one (NULL), it is decoded, as before.
  `ALTER TABLE telemetry_blocks ADD COLUMN summary BLOB;`,
  // 17: the compaction pass gives older blocks their summary in the background; this partial index finds them
  // (and stays empty once they have one, since new blocks come with theirs).
  `CREATE INDEX telemetry_blocks_unsummarized ON telemetry_blocks(start_ms) WHERE summary IS NULL;`,
];
