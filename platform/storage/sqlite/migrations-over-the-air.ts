/**
 * Migrations 10 onwards (sqlite/migrations.ts applies them after FOUNDATION_MIGRATIONS): over-the-air updates
 * (DESIGN.md §19).
 */
export const UPDATE_MIGRATIONS: readonly string[] = [
  // 10: update artifacts (DESIGN.md §19, storage/artifact-repository.ts), stored in chunks so that a range read
  // touches only its chunks. A release (operator, kind, version, target) is uploaded once, whether ready or still
  // uploading; listings go newest first through their index; the stale-upload sweep through a partial one.
  `
  CREATE TABLE artifacts (
    artifact_id TEXT PRIMARY KEY,
    operator_id TEXT NOT NULL REFERENCES operators(operator_id),
    kind TEXT NOT NULL,
    version TEXT NOT NULL,
    target TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    size INTEGER NOT NULL,
    signature TEXT NOT NULL,
    status TEXT NOT NULL,
    created_ms INTEGER NOT NULL
  );
  CREATE UNIQUE INDEX artifacts_release ON artifacts(operator_id, kind, version, target);
  CREATE INDEX artifacts_newest ON artifacts(operator_id, created_ms DESC, artifact_id DESC);
  CREATE INDEX artifacts_uploading ON artifacts(created_ms) WHERE status = 'uploading';
  CREATE TABLE artifact_chunks (
    artifact_id TEXT NOT NULL REFERENCES artifacts(artifact_id),
    chunk_index INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (artifact_id, chunk_index)
  );
  `,
  // 11: the fleet's inventory (DESIGN.md §19): the agent's release beside the firmware's, both filterable;
  // firmware reports tied to an update and stored once per report id (a charger's replay is answered as before).
  `
  ALTER TABLE devices ADD COLUMN agent_version TEXT;
  CREATE INDEX devices_by_firmware_version ON devices(firmware_version);
  CREATE INDEX devices_by_agent_version ON devices(agent_version);
  ALTER TABLE firmware_status ADD COLUMN update_id TEXT;
  ALTER TABLE firmware_status ADD COLUMN report_id TEXT;
  CREATE UNIQUE INDEX firmware_status_report ON firmware_status(device_id, report_id);
  `,
  // 12: updates (campaigns, storage/update-repository.ts): the update and each of its chargers. No foreign key
  // to the artifact (a finished update outlives its artifact: kind and version are kept on the row). The gate
  // finds open updates through a partial index, a charger's updates through its own, and the latest report of
  // each charger about an update through firmware_status_by_update. Artifacts record their chunk size: those
  // stored before it was recorded have chunks of 1 MiB, new ones smaller (shared/artifact-manifest.ts).
  `
  CREATE TABLE updates (
    update_id TEXT PRIMARY KEY,
    operator_id TEXT NOT NULL REFERENCES operators(operator_id),
    client_id TEXT,
    artifact_id TEXT NOT NULL,
    artifact_kind TEXT NOT NULL,
    artifact_version TEXT NOT NULL,
    target_type TEXT NOT NULL,
    target_ids TEXT NOT NULL,
    install TEXT NOT NULL,
    install_window TEXT,
    rollout TEXT NOT NULL,
    status TEXT NOT NULL,
    reason TEXT,
    current_batch INTEGER NOT NULL,
    waived_batch INTEGER NOT NULL,
    created_ms INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL
  );
  CREATE INDEX updates_newest ON updates(operator_id, created_ms DESC, update_id DESC);
  CREATE INDEX updates_open ON updates(created_ms) WHERE status IN ('running', 'paused');
  CREATE INDEX updates_by_artifact ON updates(artifact_id);
  CREATE TABLE update_devices (
    update_id TEXT NOT NULL REFERENCES updates(update_id),
    device_id TEXT NOT NULL,
    batch INTEGER NOT NULL,
    state TEXT NOT NULL,
    command_id TEXT,
    version_before TEXT,
    version_after TEXT,
    reason TEXT,
    state_ms INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL,
    PRIMARY KEY (update_id, device_id)
  );
  CREATE INDEX update_devices_by_device ON update_devices(device_id);
  CREATE INDEX firmware_status_by_update ON firmware_status(update_id, device_id, ts_ms) WHERE update_id IS NOT NULL;
  ALTER TABLE artifacts ADD COLUMN chunk_bytes INTEGER NOT NULL DEFAULT 1048576;
  `,
];
