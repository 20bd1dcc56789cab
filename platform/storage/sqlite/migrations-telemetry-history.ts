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
  // 18: the recent table keyed by an integer per charger (`telemetry_devices`) instead of its 24-character id:
  // its unique index, which every insert walks, holds at most 8 bytes of key where it held 25 (0.6 µs less per row
  // inserted, a sixth of the insert; docs/benchmarks.md, "Batch ingest"). Row ids are kept: the rollups, the live
  // state, retention and compaction follow them. `telemetry` becomes a view with the columns it had, for the
  // passes that return a charger's id, and for tools and tests; writes through it go to the table.
  `
  CREATE TABLE telemetry_devices (
    device_key INTEGER PRIMARY KEY,
    device_id TEXT NOT NULL UNIQUE
  );
  INSERT INTO telemetry_devices (device_id) SELECT DISTINCT device_id FROM telemetry ORDER BY device_id;
  CREATE TABLE telemetry_recent (
    id INTEGER PRIMARY KEY,
    device_key INTEGER NOT NULL,
    connector_id INTEGER NOT NULL,
    ts_ms INTEGER NOT NULL,
    state TEXT NOT NULL,
    voltage REAL,
    current REAL,
    power REAL,
    energy_delivered REAL,
    soc INTEGER,
    temperature REAL,
    phase_details TEXT,
    received_ms INTEGER NOT NULL
  );
  INSERT INTO telemetry_recent (id, device_key, connector_id, ts_ms, state, voltage, current, power,
    energy_delivered, soc, temperature, phase_details, received_ms)
  SELECT t.id, k.device_key, t.connector_id, t.ts_ms, t.state, t.voltage, t.current, t.power, t.energy_delivered,
    t.soc, t.temperature, t.phase_details, t.received_ms
  FROM telemetry t JOIN telemetry_devices k ON k.device_id = t.device_id ORDER BY t.id;
  DROP TABLE telemetry;
  CREATE UNIQUE INDEX telemetry_recent_unique ON telemetry_recent(device_key, ts_ms, connector_id);
  CREATE VIEW telemetry AS
    SELECT t.id AS id, k.device_id AS device_id, t.connector_id AS connector_id, t.ts_ms AS ts_ms,
      t.state AS state, t.voltage AS voltage, t.current AS current, t.power AS power,
      t.energy_delivered AS energy_delivered, t.soc AS soc, t.temperature AS temperature,
      t.phase_details AS phase_details, t.received_ms AS received_ms
    FROM telemetry_recent t JOIN telemetry_devices k ON k.device_key = t.device_key;
  CREATE TRIGGER telemetry_insert INSTEAD OF INSERT ON telemetry BEGIN
    INSERT OR IGNORE INTO telemetry_devices (device_id) VALUES (NEW.device_id);
    INSERT INTO telemetry_recent (id, device_key, connector_id, ts_ms, state, voltage, current, power,
      energy_delivered, soc, temperature, phase_details, received_ms)
    VALUES (NEW.id, (SELECT device_key FROM telemetry_devices WHERE device_id = NEW.device_id), NEW.connector_id,
      NEW.ts_ms, NEW.state, NEW.voltage, NEW.current, NEW.power, NEW.energy_delivered, NEW.soc, NEW.temperature,
      NEW.phase_details, NEW.received_ms);
  END;
  CREATE TRIGGER telemetry_delete INSTEAD OF DELETE ON telemetry BEGIN
    DELETE FROM telemetry_recent WHERE id = OLD.id;
  END;
  `,
];
