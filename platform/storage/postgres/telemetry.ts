import type { TelemetryRecord } from '../../../shared/index.js';
import type { ConnectorRow, TelemetryRepository } from '../store.js';
import type { PgDatabase } from './database.js';
import { createGroupWriter } from './group-writer.js';
import type { PgTelemetryBlocks } from './telemetry-blocks.js';
import type { TelemetryPartitions } from './telemetry-partitions.js';

/**
 * Stores the records of a group of requests (`group-writer.ts`) and moves each connector's live state to its
 * newest new record, in one statement (one round trip, one commit): exact repeats are skipped by the primary
 * key (within the group, the first request that carries a record stores it, as if they had come one by one),
 * and the live state only moves forward in time, so a record that arrives late (an outbox replayed after an
 * outage) never overwrites a newer one, whichever instance stored that. Rows are sorted so that concurrent
 * statements take row locks in the same order. Answers how many rows each request (`req`) stored.
 */
const RECORD_TELEMETRY_SQL = `
WITH input AS (
  SELECT DISTINCT ON (device_id, ts_ms, connector_id) *
  FROM unnest($1::int[], $2::text[], $3::bigint[], $4::int[], $5::bigint[], $6::text[], $7::float8[],
    $8::float8[], $9::float8[], $10::float8[], $11::int[], $12::float8[], $13::text[])
    AS r(req, device_id, received_ms, connector_id, ts_ms, state, voltage, current, power, energy_delivered, soc,
      temperature, phase_details)
  ORDER BY device_id, ts_ms, connector_id, req
),
inserted AS (
  INSERT INTO telemetry (device_id, connector_id, ts_ms, state, voltage, current, power, energy_delivered, soc,
    temperature, phase_details, received_ms)
  SELECT device_id, connector_id, ts_ms, state, voltage, current, power, energy_delivered, soc, temperature,
    phase_details::jsonb, received_ms
  FROM input ORDER BY device_id, ts_ms, connector_id
  ON CONFLICT DO NOTHING
  RETURNING device_id, connector_id, ts_ms, state, voltage, current, power, energy_delivered, soc, temperature
),
newest AS (
  SELECT DISTINCT ON (device_id, connector_id) * FROM inserted ORDER BY device_id, connector_id, ts_ms DESC
),
live AS (
  INSERT INTO connectors (device_id, connector_id, state, power, voltage, current, energy_delivered, soc,
    temperature, last_telemetry_ms)
  SELECT device_id, connector_id, state, power, voltage, current, energy_delivered, soc, temperature, ts_ms
  FROM newest ORDER BY device_id, connector_id
  ON CONFLICT (device_id, connector_id) DO UPDATE SET state = excluded.state, power = excluded.power,
    voltage = excluded.voltage, current = excluded.current, energy_delivered = excluded.energy_delivered,
    soc = excluded.soc, temperature = excluded.temperature, last_telemetry_ms = excluded.last_telemetry_ms
  WHERE connectors.last_telemetry_ms IS NULL OR connectors.last_telemetry_ms <= excluded.last_telemetry_ms
)
SELECT i.req, count(*) AS n FROM inserted JOIN input i USING (device_id, ts_ms, connector_id) GROUP BY i.req`;

/** Groups written at once: a few commits overlap (PostgreSQL flushes their WAL together). */
const TELEMETRY_GROUPS_IN_FLIGHT = 4;
/** Rows per statement at most (a backlog of batches of 500 goes in a few thousand rows at a time). */
const TELEMETRY_GROUP_ROWS = 5_000;

interface TelemetryWrite {
  deviceId: string;
  records: readonly TelemetryRecord[];
  receivedMs: number;
}

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
export function createPgTelemetry(
  db: PgDatabase,
  partitions: TelemetryPartitions,
  /** Compressed blocks (DESIGN.md §21): a re-sent sample of a compacted hour is a duplicate. */
  blocks: Pick<PgTelemetryBlocks, 'notCompacted'>,
): TelemetryRepository {
  const writeGroup = async (writes: readonly TelemetryWrite[]): Promise<number[]> => {
    const columns = telemetryColumns(writes);
    await partitions.ensure(columns.ts_ms);
    const rows = await withDeadlockRetry(() =>
      db.query<{ req: number; n: number }>(RECORD_TELEMETRY_SQL, [
        columns.req,
        columns.device_id,
        columns.received_ms,
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
      ]),
    );
    const counts = writes.map(() => 0);
    for (const r of rows) counts[r.req] = r.n;
    return counts;
  };
  const telemetryWrites = createGroupWriter(writeGroup, (w) => w.records.length, {
    maxInFlight: TELEMETRY_GROUPS_IN_FLIGHT,
    maxWeight: TELEMETRY_GROUP_ROWS,
  });
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
      const fresh = await blocks.notCompacted(deviceId, records);
      if (fresh.length === 0) return 0;
      return telemetryWrites.submit({ deviceId, records: fresh, receivedMs });
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

/** The records of a group as one array per column, for `unnest`; `req` is the write's index in the group. */
function telemetryColumns(writes: readonly TelemetryWrite[]) {
  const rows = writes.flatMap((w, req) => w.records.map((t) => ({ req, w, t })));
  return {
    req: rows.map((r) => r.req),
    device_id: rows.map((r) => r.w.deviceId),
    received_ms: rows.map((r) => r.w.receivedMs),
    connector_id: rows.map((r) => r.t.connector_id),
    ts_ms: rows.map((r) => Date.parse(r.t.timestamp)),
    state: rows.map((r) => r.t.state),
    voltage: rows.map((r) => r.t.voltage ?? null),
    current: rows.map((r) => r.t.current ?? null),
    power: rows.map((r) => r.t.power ?? null),
    energy_delivered: rows.map((r) => r.t.energy_delivered ?? null),
    soc: rows.map((r) => r.t.soc ?? null),
    temperature: rows.map((r) => r.t.temperature ?? null),
    phase_details: rows.map((r) => (r.t.phase_details ? JSON.stringify(r.t.phase_details) : null)),
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
