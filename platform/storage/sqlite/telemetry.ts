import type Database from 'better-sqlite3';
import {
  TELEMETRY_MEASUREMENTS,
  type TelemetryMeasurement,
  type TelemetryRecord,
} from '../../../shared/index.js';
import type { ConnectorRow, TelemetryRepository } from '../store.js';
import { blockStart, compactedBefore } from '../telemetry-compaction.js';
import { placeholders, type StatementCache } from './database.js';
import { createLiveConnectors, type LiveRow } from './live-connectors.js';
import { type RawConnector, telemetryRow, toConnector } from './rows.js';
import type { SqliteTelemetryBlocks } from './telemetry-blocks.js';
import { createTelemetryKeys } from './telemetry-keys.js';
import type { createWriteBatcher } from './write-batcher.js';

/** The setting that says up to which telemetry row the `connectors` table holds the live state. */
const LIVE_STATE_SETTING = 'connector_state_up_to_telemetry_id';
const LIVE_STATE_EVERY_MS = 5_000;
const LIVE_STATE_CHUNK = 250;
/** What a connector's newest sample says of it. */
type LiveState = Pick<ConnectorRow, 'state' | 'last_telemetry_ms' | TelemetryMeasurement>;

/** Connectors and their live state, telemetry ingest, heartbeats and last-seen times. */
export function createSqliteTelemetry(
  db: Database.Database,
  batcher: ReturnType<typeof createWriteBatcher>,
  prepared: StatementCache,
  /** The compressed blocks a late sample may already be in (DESIGN.md §21), and the store's clock. */
  compacted: { blocks: () => Pick<SqliteTelemetryBlocks, 'timesIn'>; now: () => number },
) {
  const stmt = {
    listConnectors: db.prepare('SELECT * FROM connectors WHERE device_id = ? ORDER BY connector_id'),
    getConnector: db.prepare('SELECT * FROM connectors WHERE device_id = ? AND connector_id = ?'),
    upsertConnectorState: db.prepare(
      `INSERT INTO connectors (device_id, connector_id, state, power, voltage, current, energy_delivered, soc,
         temperature, last_telemetry_ms) VALUES (@device_id, @connector_id, @state, @power, @voltage, @current,
         @energy_delivered, @soc, @temperature, @ts_ms)
       ON CONFLICT (device_id, connector_id) DO UPDATE SET state = excluded.state, power = excluded.power,
         voltage = excluded.voltage, current = excluded.current, energy_delivered = excluded.energy_delivered,
         soc = excluded.soc, temperature = excluded.temperature, last_telemetry_ms = excluded.last_telemetry_ms
       WHERE connectors.last_telemetry_ms IS NULL OR connectors.last_telemetry_ms <= excluded.last_telemetry_ms`,
    ),
    // Positional parameters: binding twelve by name cost a third of the insert (1.5 µs a row, measured).
    insertTelemetry: db.prepare(
      `INSERT OR IGNORE INTO telemetry_recent (device_key, connector_id, ts_ms, state, voltage, current, power,
         energy_delivered, soc, temperature, phase_details, received_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    recordHeartbeat: db.prepare(
      `UPDATE devices SET last_heartbeat_ms = ?, last_seen_ms = MAX(COALESCE(last_seen_ms, 0), ?),
         reported_status = ?, fault_code = ? WHERE device_id = ?`,
    ),
    touchDevice: db.prepare(
      'UPDATE devices SET last_seen_ms = MAX(COALESCE(last_seen_ms, 0), ?) WHERE device_id = ?',
    ),
    telemetrySince: db.prepare(
      `SELECT id, device_id, connector_id, ts_ms, state, power, voltage, current, energy_delivered, soc, temperature
       FROM telemetry WHERE id > ? ORDER BY id`,
    ),
    setSetting: db.prepare(
      'INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value',
    ),
    setting: db.prepare('SELECT value FROM settings WHERE key = ?').pluck(),
  };

  /**
   * Telemetry is the hottest write: every record of one event-loop turn goes into one transaction. Each
   * connector's live state (its newest record) is kept in `live` once committed and written to `connectors`
   * every few seconds (`persistLiveState`), not in every commit: there it touched about as many pages as the
   * telemetry itself (measured: 10 % more requests served without it). Nothing is lost in a crash: at start,
   * the telemetry stored since the live state was last written out (by row id) is replayed into `live`.
   */
  interface PendingTelemetry {
    deviceId: string;
    records: readonly TelemetryRecord[];
    receivedMs: number;
    resolve: (inserted: number) => void;
    reject: (err: unknown) => void;
  }
  /** A connector's newest record of a turn so far, kept without a row object per record. */
  interface NewestRecord {
    p: PendingTelemetry;
    t: TelemetryRecord;
    tsMs: number;
    id: number;
  }
  const live = createLiveConnectors();
  const keys = createTelemetryKeys(db);
  let newestTelemetryId =
    (db.prepare('SELECT MAX(id) FROM telemetry_recent').pluck().get() as number | null) ?? 0;
  {
    // Telemetry rows up to this id are reflected in `connectors`; the rest is replayed into `live`.
    const upTo = stmt.setting.get(LIVE_STATE_SETTING);
    if (upTo === undefined) stmt.setSetting.run(LIVE_STATE_SETTING, String(newestTelemetryId));
    else for (const row of stmt.telemetrySince.iterate(Number(upTo)) as Iterable<LiveRow>) live.note(row);
  }
  /**
   * Inserts a turn's records. The hot loop of a backlog (500 records a request): the record's own fields go to
   * the statement, with no row object per record; each connector's newest record becomes its live-state row once,
   * at the end; old samples ask the blocks once per connector-hour, not once per sample.
   */
  const insertTelemetryBatch = (batch: readonly PendingTelemetry[]) => {
    const newest = new Map<string, NewestRecord>();
    const maybeInBlocks = compactedBefore(compacted.now());
    const blocks = compacted.blocks();
    const fresh = new Map<string, number>();
    const counts = batch.map((p) => {
      let n = 0;
      const deviceKey = keys.keyOf(p.deviceId, fresh);
      // Per connector of this request (one charger), indexed by connector id: a backlog alternates connectors
      // record by record, so a single remembered block hour would be looked up again at every record.
      const heldHours: Array<{ startMs: number; times: ReadonlySet<number> } | undefined> = [];
      const newestOf: Array<NewestRecord | undefined> = [];
      for (const t of p.records) {
        const tsMs = Date.parse(t.timestamp);
        const connectorId = t.connector_id;
        // An old sample may be in a block already: then it is a duplicate, as the unique index says of recent ones.
        if (tsMs < maybeInBlocks) {
          const startMs = blockStart(tsMs);
          let held = heldHours[connectorId];
          if (held?.startMs !== startMs) {
            held = { startMs, times: blocks.timesIn(p.deviceId, connectorId, startMs) };
            heldHours[connectorId] = held;
          }
          if (held.times.has(tsMs)) continue;
        }
        const result = stmt.insertTelemetry.run(
          deviceKey,
          connectorId,
          tsMs,
          t.state,
          t.voltage ?? null,
          t.current ?? null,
          t.power ?? null,
          t.energy_delivered ?? null,
          t.soc ?? null,
          t.temperature ?? null,
          t.phase_details ? JSON.stringify(t.phase_details) : null,
          p.receivedMs,
        );
        if (result.changes !== 1) continue;
        n++;
        const seen = newestOf[connectorId];
        if (!seen) newestOf[connectorId] = { p, t, tsMs, id: Number(result.lastInsertRowid) };
        else if (seen.tsMs <= tsMs) {
          seen.t = t;
          seen.tsMs = tsMs;
          seen.id = Number(result.lastInsertRowid);
        }
      }
      for (const record of newestOf) {
        if (!record) continue;
        const key = `${p.deviceId}|${record.t.connector_id}`;
        const seen = newest.get(key);
        if (!seen || seen.tsMs <= record.tsMs) newest.set(key, record);
      }
      return n;
    });
    const rows = [...newest.values()].map(({ p, t, id }) =>
      Object.assign(telemetryRow(p.deviceId, t, p.receivedMs), { id }),
    );
    return { counts, newest: rows, fresh };
  };
  /** After the commit: the new rows' live state, then the callers. */
  const settle = (
    batch: readonly PendingTelemetry[],
    { counts, newest, fresh }: ReturnType<typeof insertTelemetryBatch>,
  ) => {
    keys.committed(fresh);
    for (const row of newest) {
      live.note(row);
      if (row.id > newestTelemetryId) newestTelemetryId = row.id;
    }
    batch.forEach((p, i) => {
      p.resolve(counts[i] ?? 0);
    });
  };
  let pendingTelemetry: PendingTelemetry[] = [];
  const addTelemetry = (deviceId: string, records: readonly TelemetryRecord[], receivedMs: number) =>
    new Promise<number>((resolve, reject) => {
      pendingTelemetry.push({ deviceId, records, receivedMs, resolve, reject });
      if (pendingTelemetry.length > 1) return;
      // The first record of a turn schedules the batch; later ones in the same turn join it.
      const batch = pendingTelemetry;
      batcher
        .write(() => {
          pendingTelemetry = [];
          return insertTelemetryBatch(batch);
        })
        .then(
          (result) => settle(batch, result),
          // One bad record must not fail its neighbours: retry each request on its own.
          () => {
            for (const p of batch) {
              batcher.write(() => insertTelemetryBatch([p])).then((result) => settle([p], result), p.reject);
            }
          },
        );
    });

  /** Writes the live state out, a chunk per write, then notes up to which telemetry row it is written. */
  const writeLiveState = (rows: readonly LiveRow[]) => {
    for (const row of rows) stmt.upsertConnectorState.run(row);
  };
  let persistingLive: Promise<void> | undefined;
  const persistLiveState = (): Promise<void> => {
    persistingLive ??= (async () => {
      const upTo = newestTelemetryId;
      const rows = live.pending();
      for (let i = 0; i < rows.length; i += LIVE_STATE_CHUNK) {
        const chunk = rows.slice(i, i + LIVE_STATE_CHUNK);
        await batcher.write(() => writeLiveState(chunk));
        live.written(chunk);
      }
      // Rows noted meanwhile are newer than `upTo`: they stay in `live`, and are replayed after a crash.
      await batcher.write(() => stmt.setSetting.run(LIVE_STATE_SETTING, String(upTo)));
    })().finally(() => {
      persistingLive = undefined;
    });
    return persistingLive;
  };
  const liveStateTimer = setInterval(() => {
    if (live.size() > 0) persistLiveState().catch(() => undefined);
  }, LIVE_STATE_EVERY_MS);
  liveStateTimer.unref();

  /** What the main table holds of a device's connectors, with their live state from `live` over it. */
  const withLiveState = (rows: RawConnector[], deviceIds: readonly string[]): ConnectorRow[] => {
    const out = rows.map(toConnector);
    const index = new Map(out.map((c) => [`${c.device_id}|${c.connector_id}`, c]));
    let added = false;
    for (const deviceId of deviceIds) {
      for (const l of live.of(deviceId)) {
        const state = { state: l.state, last_telemetry_ms: l.ts_ms } as LiveState;
        for (const m of TELEMETRY_MEASUREMENTS) state[m] = l[m];
        const row = index.get(`${deviceId}|${l.connector_id}`);
        if (row) {
          // A record that arrived late (an outbox replayed after an outage) is older than what was written out.
          if (row.last_telemetry_ms === null || row.last_telemetry_ms <= l.ts_ms) Object.assign(row, state);
        } else {
          // Learned from telemetry and not written yet: not V2G-capable until declared, in service.
          out.push({
            device_id: deviceId,
            connector_id: l.connector_id,
            max_power_kw: null,
            v2g_capable: false,
            available: true,
            ...state,
          });
          added = true;
        }
      }
    }
    if (added) {
      out.sort((a, b) =>
        a.device_id === b.device_id ? a.connector_id - b.connector_id : a.device_id < b.device_id ? -1 : 1,
      );
    }
    return out;
  };

  const telemetry: TelemetryRepository = {
    async listConnectors(deviceId) {
      return withLiveState(stmt.listConnectors.all(deviceId) as RawConnector[], [deviceId]);
    },
    async getConnector(deviceId, connectorId) {
      const raw = stmt.getConnector.get(deviceId, connectorId) as RawConnector | undefined;
      return withLiveState(raw ? [raw] : [], [deviceId]).find((c) => c.connector_id === connectorId);
    },
    async listConnectorsOf(deviceIds) {
      if (deviceIds.length === 0) return [];
      return withLiveState(
        prepared(
          `SELECT * FROM connectors WHERE device_id IN (${placeholders(deviceIds.length)}) ORDER BY device_id, connector_id`,
        ).all(...deviceIds) as RawConnector[],
        deviceIds,
      );
    },
    recordTelemetry(deviceId, records, receivedMs) {
      return addTelemetry(deviceId, records, receivedMs);
    },
    recordHeartbeat(deviceId, hb) {
      return batcher.write(() => {
        stmt.recordHeartbeat.run(hb.atMs, hb.atMs, hb.status, hb.fault_code, deviceId);
      });
    },
    touchDevices(seen) {
      return batcher.write(() => {
        for (const [deviceId, ms] of seen) stmt.touchDevice.run(ms, deviceId);
      });
    },
  };
  /** Stops the live-state timer and writes out what is pending (call after the batcher drained). */
  const close = async () => {
    clearInterval(liveStateTimer);
    await persistingLive?.catch(() => undefined);
    // The live state still pending goes out with the last commit.
    const rows = live.pending();
    if (rows.length > 0) {
      db.transaction(() => {
        writeLiveState(rows);
        stmt.setSetting.run(LIVE_STATE_SETTING, String(newestTelemetryId));
      }).immediate();
    }
  };
  /** Telemetry rows up to this id are reflected in `connectors` (the rest is replayed at start). */
  const liveStateUpTo = () => Number(stmt.setting.get(LIVE_STATE_SETTING) ?? 0);
  return {
    telemetry,
    close,
    liveStateUpTo,
    persistLiveState,
    drainPending: () => persistingLive?.catch(() => undefined),
  };
}
