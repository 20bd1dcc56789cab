import type { TelemetryRecord } from '../../../shared/index.js';
import type { ConnectorRow, TelemetryRepository } from '../store.js';
import type { PgDatabase } from './database.js';
import type { TelemetryPartitions } from './telemetry-partitions.js';

/**
 * Stores a device's records and moves each connector's live state to its newest new record, in one statement
 * (one round trip, atomic without BEGIN/COMMIT): exact repeats are skipped by the primary key, and the live
 * state only moves forward in time, so a record that arrives late (an outbox replayed after an outage) never
 * overwrites a newer one, whichever instance stored that. Input is sorted so that concurrent statements take
 * row locks in the same order.
 */
const RECORD_TELEMETRY_SQL = `
WITH input AS (
  SELECT * FROM unnest($2::int[], $3::bigint[], $4::text[], $5::float8[], $6::float8[], $7::float8[],
    $8::float8[], $9::int[], $10::float8[], $11::text[])
    AS r(connector_id, ts_ms, state, voltage, current, power, energy_delivered, soc, temperature, phase_details)
),
inserted AS (
  INSERT INTO telemetry (device_id, connector_id, ts_ms, state, voltage, current, power, energy_delivered, soc,
    temperature, phase_details, received_ms)
  SELECT $1, connector_id, ts_ms, state, voltage, current, power, energy_delivered, soc, temperature,
    phase_details::jsonb, $12
  FROM input ORDER BY ts_ms, connector_id
  ON CONFLICT DO NOTHING
  RETURNING connector_id, ts_ms, state, voltage, current, power, energy_delivered, soc, temperature
),
newest AS (
  SELECT DISTINCT ON (connector_id) * FROM inserted ORDER BY connector_id, ts_ms DESC
),
live AS (
  INSERT INTO connectors (device_id, connector_id, state, power, voltage, current, energy_delivered, soc,
    temperature, last_telemetry_ms)
  SELECT $1, connector_id, state, power, voltage, current, energy_delivered, soc, temperature, ts_ms
  FROM newest ORDER BY connector_id
  ON CONFLICT (device_id, connector_id) DO UPDATE SET state = excluded.state, power = excluded.power,
    voltage = excluded.voltage, current = excluded.current, energy_delivered = excluded.energy_delivered,
    soc = excluded.soc, temperature = excluded.temperature, last_telemetry_ms = excluded.last_telemetry_ms
  WHERE connectors.last_telemetry_ms IS NULL OR connectors.last_telemetry_ms <= excluded.last_telemetry_ms
)
SELECT COUNT(*) AS n FROM inserted`;

/** Last seen only moves forward; one statement for the whole map. */
const TOUCH_DEVICES_SQL = `
UPDATE devices d SET last_seen_ms = GREATEST(COALESCE(d.last_seen_ms, 0), t.ms)
FROM unnest($1::text[], $2::bigint[]) AS t(device_id, ms)
WHERE d.device_id = t.device_id`;

const RECORD_HEARTBEAT_SQL = `
UPDATE devices SET last_heartbeat_ms = $1, last_seen_ms = GREATEST(COALESCE(last_seen_ms, 0), $1),
  reported_status = $2, fault_code = $3
WHERE device_id = $4`;

const DEADLOCK = '40P01';
const MAX_ATTEMPTS = 5;

/** Connectors and their live state, telemetry ingest, heartbeats and last-seen times, on PostgreSQL. */
export function createPgTelemetry(db: PgDatabase, partitions: TelemetryPartitions): TelemetryRepository {
  return {
    listConnectors(deviceId) {
      return db.query<ConnectorRow>('SELECT * FROM connectors WHERE device_id = $1 ORDER BY connector_id', [
        deviceId,
      ]);
    },
    async getConnector(deviceId, connectorId) {
      const rows = await db.query<ConnectorRow>(
        'SELECT * FROM connectors WHERE device_id = $1 AND connector_id = $2',
        [deviceId, connectorId],
      );
      return rows[0];
    },
    async listConnectorsOf(deviceIds) {
      if (deviceIds.length === 0) return [];
      return db.query<ConnectorRow>(
        'SELECT * FROM connectors WHERE device_id = ANY($1::text[]) ORDER BY device_id, connector_id',
        [[...deviceIds]],
      );
    },
    async recordTelemetry(deviceId, records, receivedMs) {
      if (records.length === 0) return 0;
      const columns = telemetryColumns(records);
      await partitions.ensure(columns.ts_ms);
      const rows = await withDeadlockRetry(() =>
        db.query<{ n: number }>(RECORD_TELEMETRY_SQL, [
          deviceId,
          columns.connector_id,
          columns.ts_ms,
          columns.state,
          columns.voltage,
          columns.current,
          columns.power,
          columns.energy_delivered,
          columns.soc,
          columns.temperature,
          columns.phase_details,
          receivedMs,
        ]),
      );
      return rows[0]?.n ?? 0;
    },
    async recordHeartbeat(deviceId, hb) {
      await db.query(RECORD_HEARTBEAT_SQL, [hb.atMs, hb.status, hb.fault_code, deviceId]);
    },
    async touchDevices(seen) {
      if (seen.size === 0) return;
      // Sorted by id: concurrent instances lock the rows in the same order.
      const entries = [...seen].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      await withDeadlockRetry(() =>
        db.query(TOUCH_DEVICES_SQL, [entries.map(([id]) => id), entries.map(([, ms]) => ms)]),
      );
    },
  };
}

/** The records as one array per column, for `unnest`. */
function telemetryColumns(records: readonly TelemetryRecord[]) {
  return {
    connector_id: records.map((t) => t.connector_id),
    ts_ms: records.map((t) => Date.parse(t.timestamp)),
    state: records.map((t) => t.state),
    voltage: records.map((t) => t.voltage ?? null),
    current: records.map((t) => t.current ?? null),
    power: records.map((t) => t.power ?? null),
    energy_delivered: records.map((t) => t.energy_delivered ?? null),
    soc: records.map((t) => t.soc ?? null),
    temperature: records.map((t) => t.temperature ?? null),
    phase_details: records.map((t) => (t.phase_details ? JSON.stringify(t.phase_details) : null)),
  };
}

/**
 * A single statement is its own transaction, which `db.tx` would retry at the cost of two more round trips;
 * the rare deadlock between instances writing the same rows is retried here instead.
 */
async function withDeadlockRetry<T>(statement: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await statement();
    } catch (err) {
      if (attempt >= MAX_ATTEMPTS || (err as { code?: string }).code !== DEADLOCK) throw err;
    }
  }
}
