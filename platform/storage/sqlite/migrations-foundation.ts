/** Migrations 1 to 9 (sqlite/migrations.ts applies them): the platform before over-the-air updates. */
export const FOUNDATION_MIGRATIONS: readonly string[] = [
  // 1: the foundation
  `
  CREATE TABLE operators (
    operator_id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    created_ms INTEGER NOT NULL
  );
  CREATE TABLE sites (
    site_id TEXT PRIMARY KEY,
    operator_id TEXT NOT NULL REFERENCES operators(operator_id),
    name TEXT NOT NULL,
    timezone TEXT NOT NULL,
    created_ms INTEGER NOT NULL
  );
  CREATE INDEX sites_by_operator ON sites(operator_id);
  CREATE TABLE clients (
    client_id TEXT PRIMARY KEY,
    secret_sealed TEXT NOT NULL,
    scopes TEXT NOT NULL,
    created_ms INTEGER NOT NULL
  );
  CREATE TABLE client_operators (
    client_id TEXT NOT NULL REFERENCES clients(client_id),
    operator_id TEXT NOT NULL REFERENCES operators(operator_id),
    PRIMARY KEY (client_id, operator_id)
  );
  CREATE TABLE allowed_serials (
    sn TEXT PRIMARY KEY,
    created_ms INTEGER NOT NULL
  );
  CREATE TABLE devices (
    device_id TEXT PRIMARY KEY,
    sn TEXT NOT NULL UNIQUE,
    model TEXT,
    manufacturer TEXT,
    firmware_version TEXT,
    mac TEXT,
    site_id TEXT REFERENCES sites(site_id),
    registered INTEGER NOT NULL DEFAULT 1,
    secret_sealed TEXT,
    secret_gen INTEGER NOT NULL DEFAULT 1,
    registered_ms INTEGER NOT NULL,
    last_seen_ms INTEGER,
    last_heartbeat_ms INTEGER,
    reported_status TEXT,
    fault_code INTEGER
  );
  CREATE INDEX devices_by_site ON devices(site_id);
  CREATE TABLE connectors (
    device_id TEXT NOT NULL REFERENCES devices(device_id),
    connector_id INTEGER NOT NULL,
    max_power_kw REAL,
    v2g_capable INTEGER NOT NULL DEFAULT 0,
    state TEXT,
    power REAL,
    voltage REAL,
    current REAL,
    energy_delivered REAL,
    soc INTEGER,
    temperature REAL,
    last_telemetry_ms INTEGER,
    PRIMARY KEY (device_id, connector_id)
  );
  CREATE TABLE telemetry (
    id INTEGER PRIMARY KEY,
    device_id TEXT NOT NULL,
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
  CREATE INDEX telemetry_by_device_time ON telemetry(device_id, ts_ms);
  CREATE TABLE charging_records (
    record_id TEXT PRIMARY KEY,
    device_id TEXT NOT NULL,
    connector_id INTEGER NOT NULL,
    start_ms INTEGER NOT NULL,
    end_ms INTEGER NOT NULL,
    energy REAL NOT NULL,
    max_power REAL,
    avg_power REAL,
    cost REAL,
    meter_start REAL,
    meter_end REAL,
    vin TEXT,
    soc_start INTEGER,
    soc_end INTEGER
  );
  CREATE INDEX charging_records_by_start ON charging_records(start_ms DESC);
  CREATE INDEX charging_records_by_device ON charging_records(device_id, start_ms DESC);
  CREATE TABLE commands (
    command_id TEXT PRIMARY KEY,
    device_id TEXT NOT NULL,
    command TEXT NOT NULL,
    params TEXT NOT NULL,
    status TEXT NOT NULL,
    expiry_ms INTEGER NOT NULL,
    created_ms INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL,
    control_id TEXT,
    client_id TEXT
  );
  CREATE INDEX commands_pending ON commands(device_id, status) WHERE status IN ('queued', 'delivered');
  CREATE TABLE command_history (
    command_id TEXT NOT NULL,
    status TEXT NOT NULL,
    at_ms INTEGER NOT NULL,
    reason TEXT
  );
  CREATE INDEX command_history_by_command ON command_history(command_id, at_ms);
  CREATE TABLE schedules (
    device_id TEXT NOT NULL,
    connector_id INTEGER NOT NULL,
    schedule_id TEXT NOT NULL,
    body TEXT NOT NULL,
    updated_ms INTEGER NOT NULL,
    PRIMARY KEY (device_id, connector_id, schedule_id)
  );
  CREATE TABLE controls (
    control_id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    target_type TEXT NOT NULL,
    target_ids TEXT NOT NULL,
    command TEXT NOT NULL,
    params TEXT NOT NULL,
    status TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    ends_ms INTEGER NOT NULL
  );
  CREATE TABLE settings (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
  );
  `,
  // 2: command lifecycle, signing requirements, events, firmware status, control visibility
  `
  ALTER TABLE clients ADD COLUMN require_signature INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE devices ADD COLUMN require_signature INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE controls ADD COLUMN operator_ids TEXT NOT NULL DEFAULT '[]';
  ALTER TABLE commands ADD COLUMN reason TEXT;
  CREATE INDEX commands_by_control ON commands(control_id) WHERE control_id IS NOT NULL;
  CREATE INDEX commands_expiring ON commands(expiry_ms) WHERE status IN ('queued', 'delivered');
  CREATE TABLE device_events (
    id INTEGER PRIMARY KEY,
    device_id TEXT NOT NULL,
    event_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    severity TEXT NOT NULL,
    connector_id INTEGER,
    ts_ms INTEGER NOT NULL,
    message TEXT,
    data TEXT,
    received_ms INTEGER NOT NULL,
    UNIQUE (device_id, event_id)
  );
  CREATE INDEX device_events_by_device ON device_events(device_id, ts_ms DESC);
  CREATE TABLE firmware_status (
    id INTEGER PRIMARY KEY,
    device_id TEXT NOT NULL,
    status TEXT NOT NULL,
    version TEXT,
    progress INTEGER,
    message TEXT,
    ts_ms INTEGER NOT NULL,
    received_ms INTEGER NOT NULL
  );
  CREATE INDEX firmware_status_by_device ON firmware_status(device_id, ts_ms DESC);
  -- Replayed uploads (an agent's outbox after an outage) must not duplicate anything.
  -- Also the index of time-range reads (energy): device, then time.
  DROP INDEX telemetry_by_device_time;
  CREATE UNIQUE INDEX telemetry_unique ON telemetry(device_id, ts_ms, connector_id);
  -- Record ids are chosen by chargers: unique per charger, not across the fleet.
  CREATE TABLE charging_records_v2 (
    record_id TEXT NOT NULL,
    device_id TEXT NOT NULL,
    connector_id INTEGER NOT NULL,
    start_ms INTEGER NOT NULL,
    end_ms INTEGER NOT NULL,
    energy REAL NOT NULL,
    max_power REAL,
    avg_power REAL,
    cost REAL,
    meter_start REAL,
    meter_end REAL,
    vin TEXT,
    soc_start INTEGER,
    soc_end INTEGER,
    received_ms INTEGER,
    PRIMARY KEY (device_id, record_id)
  );
  INSERT INTO charging_records_v2 (record_id, device_id, connector_id, start_ms, end_ms, energy, max_power,
    avg_power, cost, meter_start, meter_end, vin, soc_start, soc_end)
    SELECT record_id, device_id, connector_id, start_ms, end_ms, energy, max_power, avg_power, cost, meter_start,
      meter_end, vin, soc_start, soc_end FROM charging_records;
  DROP TABLE charging_records;
  ALTER TABLE charging_records_v2 RENAME TO charging_records;
  CREATE INDEX charging_records_by_start ON charging_records(start_ms DESC);
  CREATE INDEX charging_records_by_device ON charging_records(device_id, start_ms DESC);
  `,
  // 3: energy rollups (DESIGN.md §12). Filled from the telemetry already stored by the rollup pass
  // (energy-rollups.ts), which starts from telemetry row 0 when its watermark is missing.
  `
  CREATE TABLE energy_rollups (
    device_id TEXT NOT NULL,
    bucket_ms INTEGER NOT NULL,
    connector_id INTEGER NOT NULL,
    imported_kwh REAL NOT NULL,
    exported_kwh REAL NOT NULL,
    power_sum REAL NOT NULL,
    max_power REAL NOT NULL,
    samples INTEGER NOT NULL,
    PRIMARY KEY (device_id, bucket_ms, connector_id)
  ) WITHOUT ROWID;
  `,
  // 4: charging records bounded by operator (DESIGN.md §12, charging-records.ts): each record carries
  // its device's operator; records are counted per operator, connector and day of start and of end.
  `
  ALTER TABLE charging_records ADD COLUMN operator_id TEXT;
  UPDATE charging_records SET operator_id = (
    SELECT s.operator_id FROM devices d JOIN sites s ON s.site_id = d.site_id
    WHERE d.device_id = charging_records.device_id);
  DROP INDEX charging_records_by_start;
  CREATE INDEX charging_records_by_operator_start
    ON charging_records(operator_id, start_ms DESC, record_id DESC);
  CREATE INDEX charging_records_by_operator_end ON charging_records(operator_id, end_ms);
  CREATE TABLE charging_record_days (
    operator_id TEXT NOT NULL,
    side INTEGER NOT NULL,
    day_ms INTEGER NOT NULL,
    connector_id INTEGER NOT NULL,
    n INTEGER NOT NULL,
    PRIMARY KEY (operator_id, side, day_ms, connector_id)
  ) WITHOUT ROWID;
  INSERT INTO charging_record_days (operator_id, side, day_ms, connector_id, n)
    SELECT operator_id, 0, (start_ms / 86400000) * 86400000, connector_id, COUNT(*) FROM charging_records
    WHERE operator_id IS NOT NULL GROUP BY 1, 3, 4;
  INSERT INTO charging_record_days (operator_id, side, day_ms, connector_id, n)
    SELECT operator_id, 1, (end_ms / 86400000) * 86400000, connector_id, COUNT(*) FROM charging_records
    WHERE operator_id IS NOT NULL GROUP BY 1, 3, 4;
  INSERT INTO settings (key, value)
    SELECT 'charging_record_max_duration_ms', COALESCE(MAX(end_ms - start_ms), 0) FROM charging_records
    WHERE true ON CONFLICT (key) DO NOTHING;
  `,
  // 5: webhook endpoints and their durable delivery queue (DESIGN.md §14, webhooks.ts).
  `
  CREATE TABLE webhooks (
    webhook_id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    url TEXT NOT NULL,
    events TEXT NOT NULL,
    description TEXT,
    status TEXT NOT NULL,
    disabled_reason TEXT,
    secret_sealed TEXT NOT NULL,
    previous_secret_sealed TEXT,
    previous_secret_until_ms INTEGER,
    failing_since_ms INTEGER,
    created_ms INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL
  );
  CREATE INDEX webhooks_by_client ON webhooks(client_id, created_ms);
  CREATE TABLE webhook_deliveries (
    delivery_id TEXT PRIMARY KEY,
    webhook_id TEXT NOT NULL,
    type TEXT NOT NULL,
    payload TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_status INTEGER,
    last_error TEXT,
    state TEXT NOT NULL DEFAULT 'pending',
    next_attempt_ms INTEGER,
    lease_until_ms INTEGER
  );
  CREATE INDEX webhook_deliveries_due ON webhook_deliveries(webhook_id, next_attempt_ms) WHERE state = 'pending';
  CREATE INDEX webhook_deliveries_by_webhook ON webhook_deliveries(webhook_id, created_ms DESC);
  `,
  // 6: a device's commands newest first (GET /v1/operator/devices/{device_id}/commands, device-commands.ts):
  // a page is one range of this index, not a scan of every command. `status` rides along so that the status
  // filter is checked in the index.
  `
  CREATE INDEX commands_by_device_newest ON commands(device_id, created_ms DESC, command_id DESC, status);
  `,
  // 7: two-phase secret rotation (domain/secret-rotation.ts): a rotation's new secret, sealed like the current
  // one, beside it until the charger uses it or its grace is over. The sweep finds the expired ones through the
  // partial index, which holds only the few devices in the middle of a rotation.
  `
  ALTER TABLE devices ADD COLUMN pending_secret_sealed TEXT;
  ALTER TABLE devices ADD COLUMN pending_since_ms INTEGER;
  CREATE INDEX devices_pending_secret ON devices(pending_since_ms) WHERE pending_since_ms IS NOT NULL;
  `,
  // 8: operator clients' lifecycle (DESIGN.md §18, domain/client-credentials.ts): revoked or active, and a secret
  // generation that operator tokens carry, with the secret a rotation replaced live until its grace is over.
  // Existing clients are active at generation 1, the generation tokens without one are read as.
  `
  ALTER TABLE clients ADD COLUMN status TEXT NOT NULL DEFAULT 'active';
  ALTER TABLE clients ADD COLUMN secret_gen INTEGER NOT NULL DEFAULT 1;
  ALTER TABLE clients ADD COLUMN previous_secret_sealed TEXT;
  ALTER TABLE clients ADD COLUMN previous_secret_until_ms INTEGER;
  ALTER TABLE clients ADD COLUMN revoked_ms INTEGER;
  `,
  // 9: enrolment groups (DESIGN.md §18, storage/enrolment-repository.ts): an OEM's CA whose certificates let
  // chargers register under `--registration attested`. At most one active group per CA.
  `
  CREATE TABLE enrolment_groups (
    enrolment_id TEXT PRIMARY KEY,
    operator_id TEXT NOT NULL REFERENCES operators(operator_id),
    site_id TEXT REFERENCES sites(site_id),
    name TEXT NOT NULL,
    ca_pem TEXT NOT NULL,
    ca_fingerprint TEXT NOT NULL,
    status TEXT NOT NULL,
    created_ms INTEGER NOT NULL
  );
  CREATE UNIQUE INDEX enrolment_groups_active_ca ON enrolment_groups(ca_fingerprint) WHERE status = 'active';
  `,
];
