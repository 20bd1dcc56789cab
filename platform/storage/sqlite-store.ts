import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import type {
  ChargingSchedule,
  CommandName,
  CommandStatus,
  PendingCommand,
  Scope,
  TelemetryRecord,
} from '../../shared/index.js';
import { decideStatusReport, mayCancel, REASON } from '../domain/command-lifecycle.js';
import { bucketsInOrder } from '../domain/energy.js';
import { sumRollups } from '../domain/energy-rollup.js';
import { decideRegistration } from '../domain/registration.js';
import { newId, newSecret } from '../ids.js';
import type { PlatformKeys } from '../platform-keys.js';
import type { DeviceEntry } from '../principal-directory.js';
import { startCheckpointer } from './checkpointer.js';
import { createLiveConnectors, type LiveRow } from './live-connectors.js';
import { migrate } from './migrations.js';
import { createSqliteChargingRecords } from './sqlite-charging-records.js';
import { createSqliteEnergyRollups } from './sqlite-energy-rollups.js';
import { createInlineReader, createWorkerReader } from './sqlite-reader.js';
import {
  createSqliteRetention,
  DEFAULT_RETENTION,
  type RetentionPolicy,
  type SqliteRetention,
} from './sqlite-retention.js';
import { asDataDirError } from './storage-faults.js';
import type {
  ClientRow,
  CommandHistoryRow,
  CommandRow,
  ConnectorRow,
  ControlRow,
  ControlWithCommands,
  DeviceRow,
  EnergyBucketRow,
  NewCommand,
  OperatorRow,
  RegistrationOutcome,
  ScheduleRow,
  SiteRow,
  StatusReportOutcome,
  Store,
  StoredEventRow,
} from './store.js';
import { createWriteBatcher } from './write-batcher.js';

export const DATABASE_FILE = 'platform.sqlite';
/** The setting that says up to which telemetry row the `connectors` table holds the live state. */
const LIVE_STATE_SETTING = 'connector_state_up_to_telemetry_id';
const LIVE_STATE_EVERY_MS = 5_000;
const LIVE_STATE_CHUNK = 250;
const ROLLUP_EVERY_MS = 1_000;
const RETENTION_EVERY_MS = 10 * 60_000;
const RETENTION_FIRST_MS = 30_000;

export function openDatabase(dataDir: string): Database.Database {
  let db: Database.Database | undefined;
  try {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    db = new Database(join(dataDir, DATABASE_FILE));
    db.pragma('journal_mode = WAL');
    // NORMAL in WAL mode: a power cut may lose the last commits but never corrupts the database; a crash of
    // the process alone loses nothing committed.
    db.pragma('synchronous = NORMAL');
    db.pragma('busy_timeout = 5000');
    db.pragma('foreign_keys = ON');
    // Each write of a group commit runs in its own savepoint, whose statement journal would otherwise be a
    // temporary file created, written and deleted for every commit.
    db.pragma('temp_store = MEMORY');
    migrate(db);
    // SQLite quietly opens a file it may not write read-only, and every write would fail later: find out now
    // with a write that changes nothing (SQLITE_READONLY there; it writes no page, so a full disk does not
    // stop a start: the platform serves reads and recovers when space returns).
    db.prepare('DELETE FROM settings WHERE 0').run();
    return db;
  } catch (err) {
    db?.close();
    throw asDataDirError(dataDir, err);
  }
}

interface RawDevice extends Omit<DeviceRow, 'registered'> {
  registered: number;
}
interface RawConnector extends Omit<ConnectorRow, 'v2g_capable'> {
  v2g_capable: number;
}
interface RawCommand {
  reason: string | null;
  command_id: string;
  device_id: string;
  command: CommandName;
  params: string;
  status: CommandStatus;
  expiry_ms: number;
  created_ms: number;
  updated_ms: number;
  control_id: string | null;
  client_id: string | null;
}

const iso = (ms: number) => new Date(ms).toISOString();

const DIRECTORY_DEVICE_SQL = `SELECT d.device_id, d.secret_gen, d.secret_sealed, d.require_signature, d.site_id,
  s.operator_id FROM devices d LEFT JOIN sites s ON s.site_id = d.site_id`;
interface RawDeviceEntry extends Omit<DeviceEntry, 'require_signature'> {
  require_signature: number;
}
function toDeviceEntry(raw: RawDeviceEntry): DeviceEntry {
  return { ...raw, require_signature: raw.require_signature === 1 };
}

function toDevice(raw: RawDevice): DeviceRow {
  return { ...raw, registered: raw.registered === 1 };
}
function toConnector(raw: RawConnector): ConnectorRow {
  return { ...raw, v2g_capable: raw.v2g_capable === 1 };
}
function toCommand(raw: RawCommand): CommandRow {
  return { ...raw, params: JSON.parse(raw.params) as Record<string, unknown> };
}
interface RawControl {
  control_id: string;
  client_id: string;
  target_type: ControlRow['target_type'];
  target_ids: string;
  command: CommandName;
  params: string;
  status: ControlRow['status'];
  created_ms: number;
  ends_ms: number;
  operator_ids: string;
}
function toControl(raw: RawControl): ControlRow {
  return {
    ...raw,
    target_ids: JSON.parse(raw.target_ids) as string[],
    params: JSON.parse(raw.params) as Record<string, unknown>,
    operator_ids: JSON.parse(raw.operator_ids) as string[],
  };
}

interface TelemetryRow {
  device_id: string;
  connector_id: number;
  ts_ms: number;
  state: string;
  voltage: number | null;
  current: number | null;
  power: number | null;
  energy_delivered: number | null;
  soc: number | null;
  temperature: number | null;
  phase_details: string | null;
  received_ms: number;
}
function telemetryRow(deviceId: string, t: TelemetryRecord, receivedMs: number): TelemetryRow {
  return {
    device_id: deviceId,
    connector_id: t.connector_id,
    ts_ms: Date.parse(t.timestamp),
    state: t.state,
    voltage: t.voltage ?? null,
    current: t.current ?? null,
    power: t.power ?? null,
    energy_delivered: t.energy_delivered ?? null,
    soc: t.soc ?? null,
    temperature: t.temperature ?? null,
    phase_details: t.phase_details ? JSON.stringify(t.phase_details) : null,
    received_ms: receivedMs,
  };
}

function placeholders(n: number): string {
  return new Array(n).fill('?').join(',');
}

export interface SqliteStoreOptions {
  /**
   * Checkpoint the WAL from a worker thread instead of inside commits (`checkpointer.ts`): for the server.
   * Short-lived processes (the admin CLI) leave it to SQLite.
   */
  backgroundCheckpoints?: boolean;
  /** Told if the checkpoint worker fails (checkpoints then happen in commits again). */
  onCheckpointerFailure?: (message: string) => void;
  /** Told if the read worker fails (operator reads then run on the main connection again). */
  onReaderFailure?: (message: string) => void;
  /** Group commits at most this often under load, ms (`write-batcher.ts`); default `COMMIT_INTERVAL_MS`. */
  commitIntervalMs?: number;
  /** How long each kind of data is kept (DESIGN.md §12); default `DEFAULT_RETENTION`. */
  retention?: RetentionPolicy;
  /**
   * Keep rollups and retention going on timers: for the server (defaults to `backgroundCheckpoints`).
   * Otherwise they run when asked (`runMaintenance`, and rollups before an energy read).
   */
  backgroundMaintenance?: boolean;
}

/**
 * At most one group commit per 2 ms under load: at fleet rates (a few requests per ms) most commits would
 * otherwise carry a single row, each writing its own WAL frames; idle, a write still commits at once.
 */
export const COMMIT_INTERVAL_MS = 2;

export function createSqliteStore(
  dataDir: string,
  keys: PlatformKeys,
  now: () => number = Date.now,
  options: SqliteStoreOptions = {},
): Store {
  const db = openDatabase(dataDir);
  const batcher = createWriteBatcher(db, {
    minCommitIntervalMs: options.commitIntervalMs ?? COMMIT_INTERVAL_MS,
  });
  const checkpointer = options.backgroundCheckpoints
    ? startCheckpointer(db, join(dataDir, DATABASE_FILE), {
        ...(options.onCheckpointerFailure ? { onFailure: options.onCheckpointerFailure } : {}),
      })
    : undefined;
  // Statements whose SQL depends on how many ids are bound are prepared once per distinct text.
  const dynamic = new Map<string, Database.Statement>();
  const prepared = (sql: string): Database.Statement => {
    let s = dynamic.get(sql);
    if (!s) {
      s = db.prepare(sql);
      dynamic.set(sql, s);
    }
    return s;
  };

  const stmt = {
    insertOperator: db.prepare('INSERT INTO operators (operator_id, name, created_ms) VALUES (?, ?, ?)'),
    listOperators: db.prepare('SELECT operator_id, name FROM operators ORDER BY created_ms, operator_id'),
    getOperator: db.prepare('SELECT operator_id, name FROM operators WHERE operator_id = ?'),
    insertSite: db.prepare(
      'INSERT INTO sites (site_id, operator_id, name, timezone, created_ms) VALUES (?, ?, ?, ?, ?)',
    ),
    listSites: db.prepare(
      'SELECT site_id, operator_id, name, timezone FROM sites ORDER BY created_ms, site_id',
    ),
    listSitesOf: db.prepare(
      'SELECT site_id, operator_id, name, timezone FROM sites WHERE operator_id = ? ORDER BY created_ms, site_id',
    ),
    getSite: db.prepare('SELECT site_id, operator_id, name, timezone FROM sites WHERE site_id = ?'),
    insertClient: db.prepare(
      'INSERT INTO clients (client_id, secret_sealed, scopes, created_ms) VALUES (?, ?, ?, ?)',
    ),
    insertClientOperator: db.prepare('INSERT INTO client_operators (client_id, operator_id) VALUES (?, ?)'),
    getClient: db.prepare('SELECT client_id, secret_sealed, scopes FROM clients WHERE client_id = ?'),
    clientOperators: db.prepare(
      'SELECT operator_id FROM client_operators WHERE client_id = ? ORDER BY operator_id',
    ),
    allowSerial: db.prepare('INSERT OR IGNORE INTO allowed_serials (sn, created_ms) VALUES (?, ?)'),
    isAllowed: db.prepare('SELECT 1 FROM allowed_serials WHERE sn = ?'),
    deviceBySn: db.prepare('SELECT * FROM devices WHERE sn = ?'),
    getDevice: db.prepare('SELECT * FROM devices WHERE device_id = ?'),
    insertDevice: db.prepare(
      `INSERT INTO devices (device_id, sn, model, manufacturer, firmware_version, mac, site_id, registered,
         secret_sealed, secret_gen, registered_ms) VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, 1, ?)`,
    ),
    reregisterDevice: db.prepare(
      `UPDATE devices SET model = ?, manufacturer = ?, firmware_version = ?, mac = ?, registered = 1,
         secret_sealed = ?, secret_gen = secret_gen + 1, registered_ms = ?, site_id = COALESCE(site_id, ?)
       WHERE device_id = ?`,
    ),
    upsertConnectorDeclaration: db.prepare(
      `INSERT INTO connectors (device_id, connector_id, max_power_kw, v2g_capable) VALUES (?, ?, ?, ?)
       ON CONFLICT (device_id, connector_id) DO UPDATE SET max_power_kw = excluded.max_power_kw,
         v2g_capable = excluded.v2g_capable`,
    ),
    assignDevice: db.prepare('UPDATE devices SET site_id = ? WHERE device_id = ?'),
    resetDevice: db.prepare(
      'UPDATE devices SET registered = 0, secret_sealed = NULL, secret_gen = secret_gen + 1 WHERE device_id = ?',
    ),
    directoryDevices: db.prepare(`${DIRECTORY_DEVICE_SQL}`),
    directoryDevice: db.prepare(`${DIRECTORY_DEVICE_SQL} WHERE d.device_id = ?`),
    directoryClients: db.prepare('SELECT client_id, secret_sealed, require_signature FROM clients'),
    directoryClient: db.prepare(
      'SELECT client_id, secret_sealed, require_signature FROM clients WHERE client_id = ?',
    ),
    directoryClientOperators: db.prepare('SELECT client_id, operator_id FROM client_operators'),
    clientRequireSignature: db.prepare('UPDATE clients SET require_signature = ? WHERE client_id = ?'),
    deviceRequireSignature: db.prepare('UPDATE devices SET require_signature = ? WHERE device_id = ?'),
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
    insertTelemetry: db.prepare(
      `INSERT OR IGNORE INTO telemetry (device_id, connector_id, ts_ms, state, voltage, current, power, energy_delivered, soc,
         temperature, phase_details, received_ms) VALUES (@device_id, @connector_id, @ts_ms, @state, @voltage,
         @current, @power, @energy_delivered, @soc, @temperature, @phase_details, @received_ms)`,
    ),
    recordHeartbeat: db.prepare(
      `UPDATE devices SET last_heartbeat_ms = ?, last_seen_ms = MAX(COALESCE(last_seen_ms, 0), ?),
         reported_status = ?, fault_code = ? WHERE device_id = ?`,
    ),
    touchDevice: db.prepare(
      'UPDATE devices SET last_seen_ms = MAX(COALESCE(last_seen_ms, 0), ?) WHERE device_id = ?',
    ),
    insertCommand: db.prepare(
      `INSERT INTO commands (command_id, device_id, command, params, status, expiry_ms, created_ms, updated_ms,
         control_id, client_id) VALUES (?, ?, ?, ?, 'queued', ?, ?, ?, ?, ?)`,
    ),
    insertHistory: db.prepare(
      'INSERT INTO command_history (command_id, status, at_ms, reason) VALUES (?, ?, ?, ?)',
    ),
    pendingCommands: db.prepare(
      `SELECT * FROM commands WHERE device_id = ? AND status IN ('queued', 'delivered') AND expiry_ms > ?
       ORDER BY created_ms, command_id`,
    ),
    markDelivered: db.prepare(
      `UPDATE commands SET status = 'delivered', updated_ms = ? WHERE command_id = ? AND status = 'queued'`,
    ),
    upsertSchedule: db.prepare(
      `INSERT INTO schedules (device_id, connector_id, schedule_id, body, updated_ms) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (device_id, connector_id, schedule_id) DO UPDATE SET body = excluded.body,
         updated_ms = excluded.updated_ms`,
    ),
    getCommand: db.prepare('SELECT * FROM commands WHERE command_id = ?'),
    commandHistory: db.prepare(
      'SELECT status, at_ms, reason FROM command_history WHERE command_id = ? ORDER BY at_ms, rowid',
    ),
    setCommandStatus: db.prepare(
      'UPDATE commands SET status = ?, reason = COALESCE(?, reason), updated_ms = ? WHERE command_id = ?',
    ),
    expiring: db.prepare(`SELECT * FROM commands WHERE status IN ('queued', 'delivered') AND expiry_ms <= ?`),
    commandsByStatus: db.prepare('SELECT status, COUNT(*) AS n FROM commands GROUP BY status'),
    getControl: db.prepare('SELECT * FROM controls WHERE control_id = ?'),
    controlCommands: db.prepare(
      'SELECT device_id, command_id, status FROM commands WHERE control_id = ? ORDER BY device_id, created_ms',
    ),
    queuedOfControl: db.prepare(`SELECT * FROM commands WHERE control_id = ? AND status = 'queued'`),
    setControlStatus: db.prepare('UPDATE controls SET status = ? WHERE control_id = ? AND status = ?'),
    completeControls: db.prepare(
      `UPDATE controls SET status = 'completed' WHERE status = 'executing' AND ends_ms <= ?`,
    ),
    countDevicesInSite: db.prepare('SELECT COUNT(*) AS n FROM devices WHERE site_id = ?'),
    deviceIdsInSite: db.prepare('SELECT device_id FROM devices WHERE site_id = ? ORDER BY device_id'),
    countSchedules: db.prepare(
      'SELECT COUNT(*) AS n FROM schedules WHERE device_id = ? AND connector_id = ?',
    ),
    listSchedules: db.prepare(
      `SELECT body FROM schedules WHERE device_id = ? AND connector_id = ? ORDER BY schedule_id LIMIT ? OFFSET ?`,
    ),
    deleteSchedule: db.prepare(
      'DELETE FROM schedules WHERE device_id = ? AND connector_id = ? AND schedule_id = ?',
    ),
    insertEvent: db.prepare(
      `INSERT OR IGNORE INTO device_events (device_id, event_id, kind, severity, connector_id, ts_ms, message, data,
         received_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    countEvents: db.prepare('SELECT COUNT(*) AS n FROM device_events WHERE device_id = ?'),
    listEvents: db.prepare(
      `SELECT * FROM device_events WHERE device_id = ? ORDER BY ts_ms DESC, id DESC LIMIT ? OFFSET ?`,
    ),
    insertFirmware: db.prepare(
      `INSERT INTO firmware_status (device_id, status, version, progress, message, ts_ms, received_ms)
       VALUES (?, ?, ?, ?, ?, ?, ?)`,
    ),
    firmwareInstalled: db.prepare('UPDATE devices SET firmware_version = ? WHERE device_id = ?'),
    rotateSecret: db.prepare(
      `UPDATE devices SET secret_sealed = ?, secret_gen = secret_gen + 1 WHERE device_id = ? AND registered = 1
       RETURNING secret_gen`,
    ),
    telemetrySince: db.prepare(
      `SELECT id, device_id, connector_id, ts_ms, state, power, voltage, current, energy_delivered, soc, temperature
       FROM telemetry WHERE id > ? ORDER BY id`,
    ),
    getSetting: db.prepare('SELECT value FROM settings WHERE key = ?'),
    setSetting: db.prepare(
      'INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value',
    ),
    insertControl: db.prepare(
      `INSERT INTO controls (control_id, client_id, target_type, target_ids, command, params, status, created_ms,
         ends_ms, operator_ids) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
  };

  /**
   * Devices that may have commands waiting (queued or delivered). Every heartbeat and long poll asks for its
   * charger's commands; for every other charger — most of a fleet, most of the time — the answer is "none"
   * without a query. Commands are created only through `insertCommandsNow`, in this process.
   */
  const mayHavePending = new Set<string>(
    db
      .prepare(`SELECT DISTINCT device_id FROM commands WHERE status IN ('queued', 'delivered')`)
      .pluck()
      .all() as string[],
  );

  const insertCommandsNow = (commands: readonly NewCommand[], nowMs: number): CommandRow[] =>
    commands.map((c) => {
      mayHavePending.add(c.device_id);
      const command_id = newId('cmd');
      stmt.insertCommand.run(
        command_id,
        c.device_id,
        c.command,
        JSON.stringify(c.params),
        c.expiry_ms,
        nowMs,
        nowMs,
        c.control_id ?? null,
        c.client_id ?? null,
      );
      stmt.insertHistory.run(command_id, 'queued', nowMs, null);
      return {
        command_id,
        device_id: c.device_id,
        command: c.command,
        params: c.params,
        status: 'queued' as const,
        expiry_ms: c.expiry_ms,
        created_ms: nowMs,
        updated_ms: nowMs,
        control_id: c.control_id ?? null,
        client_id: c.client_id ?? null,
        reason: null,
      };
    });

  const getClientNow = (clientId: string): ClientRow | undefined => {
    const row = stmt.getClient.get(clientId) as
      | { client_id: string; secret_sealed: string; scopes: string }
      | undefined;
    if (!row) return undefined;
    const operator_ids = (stmt.clientOperators.all(clientId) as Array<{ operator_id: string }>).map(
      (r) => r.operator_id,
    );
    return { ...row, scopes: row.scopes.split(',') as Scope[], operator_ids };
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
  const live = createLiveConnectors();
  let newestTelemetryId = (db.prepare('SELECT MAX(id) FROM telemetry').pluck().get() as number | null) ?? 0;
  {
    // Telemetry rows up to this id are reflected in `connectors`; the rest is replayed into `live`.
    const upTo = db.prepare('SELECT value FROM settings WHERE key = ?').pluck().get(LIVE_STATE_SETTING);
    if (upTo === undefined) stmt.setSetting.run(LIVE_STATE_SETTING, String(newestTelemetryId));
    else for (const row of stmt.telemetrySince.iterate(Number(upTo)) as Iterable<LiveRow>) live.note(row);
  }
  const insertTelemetryBatch = (batch: readonly PendingTelemetry[]) => {
    const newest = new Map<string, LiveRow>();
    const counts = batch.map((p) => {
      let n = 0;
      for (const t of p.records) {
        const row = telemetryRow(p.deviceId, t, p.receivedMs);
        const result = stmt.insertTelemetry.run(row);
        if (result.changes !== 1) continue;
        n++;
        const key = `${p.deviceId}|${t.connector_id}`;
        const seen = newest.get(key);
        if (!seen || seen.ts_ms <= row.ts_ms)
          newest.set(key, Object.assign(row, { id: Number(result.lastInsertRowid) }));
      }
      return n;
    });
    return { counts, newest: [...newest.values()] };
  };
  /** After the commit: the new rows' live state, then the callers. */
  const settle = (
    batch: readonly PendingTelemetry[],
    { counts, newest }: ReturnType<typeof insertTelemetryBatch>,
  ) => {
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

  // Heavy operator reads run on a read-only connection in a worker thread in the server (sqlite-reader.ts).
  const reader = options.backgroundCheckpoints
    ? createWorkerReader(db, join(dataDir, DATABASE_FILE), options.onReaderFailure)
    : createInlineReader(db);
  const records = createSqliteChargingRecords(db, reader);
  // Retention reads the rollups' watermark and rollups read retention's horizon: each through a function.
  let retention: SqliteRetention | undefined;
  const rollups = createSqliteEnergyRollups(
    db,
    (run) => batcher.write(run),
    () => retention?.telemetryHorizonMs() ?? Number.NEGATIVE_INFINITY,
  );
  retention = createSqliteRetention(
    db,
    (run) => batcher.write(run),
    options.retention ?? DEFAULT_RETENTION,
    now,
    () => rollups.watermark(),
  );
  const maintenance = options.backgroundMaintenance ?? options.backgroundCheckpoints ?? false;
  // The server keeps rollups close behind ingest, so that an energy read has little left to do, and prunes
  // in the background.
  const rollupTimer = maintenance
    ? setInterval(() => {
        rollups.catchUp().catch(() => undefined);
      }, ROLLUP_EVERY_MS)
    : undefined;
  rollupTimer?.unref();
  const pruneRetention = () => retention!.prune().catch(() => undefined);
  const retentionTimer = maintenance ? setInterval(pruneRetention, RETENTION_EVERY_MS) : undefined;
  retentionTimer?.unref();
  const firstPrune = maintenance ? setTimeout(pruneRetention, RETENTION_FIRST_MS) : undefined;
  firstPrune?.unref();
  /** What the main table holds of a device's connectors, with their live state from `live` over it. */
  const withLiveState = (rows: RawConnector[], deviceIds: readonly string[]): ConnectorRow[] => {
    const out = rows.map(toConnector);
    const index = new Map(out.map((c) => [`${c.device_id}|${c.connector_id}`, c]));
    let added = false;
    for (const deviceId of deviceIds) {
      for (const l of live.of(deviceId)) {
        const state = {
          state: l.state,
          power: l.power,
          voltage: l.voltage,
          current: l.current,
          energy_delivered: l.energy_delivered,
          soc: l.soc,
          temperature: l.temperature,
          last_telemetry_ms: l.ts_ms,
        };
        const row = index.get(`${deviceId}|${l.connector_id}`);
        if (row) {
          // A record that arrived late (an outbox replayed after an outage) is older than what was written out.
          if (row.last_telemetry_ms === null || row.last_telemetry_ms <= l.ts_ms) Object.assign(row, state);
        } else {
          // Learned from telemetry and not written yet: not V2G-capable until declared.
          out.push({
            device_id: deviceId,
            connector_id: l.connector_id,
            max_power_kw: null,
            v2g_capable: false,
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

  // The admin CLI writes from another process; data_version changes when it commits. Admin changes made
  // through this connection (tests, an embedded admin API) bump `localChanges` instead.
  const dataVersion = db.prepare('PRAGMA data_version').pluck();
  let localChanges = 0;

  const store: Store = {
    async createOperator(name) {
      const row: OperatorRow = { operator_id: newId('op'), name };
      stmt.insertOperator.run(row.operator_id, name, now());
      return row;
    },
    async listOperators() {
      return stmt.listOperators.all() as OperatorRow[];
    },
    async getOperator(operatorId) {
      return stmt.getOperator.get(operatorId) as OperatorRow | undefined;
    },
    async createSite({ operator_id, name, timezone, site_id }) {
      const row: SiteRow = { site_id: site_id ?? newId('site'), operator_id, name, timezone };
      stmt.insertSite.run(row.site_id, operator_id, name, timezone, now());
      return row;
    },
    async listSites(operatorId) {
      return (operatorId ? stmt.listSitesOf.all(operatorId) : stmt.listSites.all()) as SiteRow[];
    },
    async getSite(siteId) {
      return stmt.getSite.get(siteId) as SiteRow | undefined;
    },
    async createClient({ operator_ids, scopes }) {
      localChanges++;
      const secret = newSecret();
      const client_id = newId('cli');
      const sealed = keys.sealSecret(secret);
      db.transaction(() => {
        stmt.insertClient.run(client_id, sealed, scopes.join(','), now());
        for (const op of new Set(operator_ids)) stmt.insertClientOperator.run(client_id, op);
      })();
      return {
        client: { client_id, secret_sealed: sealed, scopes, operator_ids: [...new Set(operator_ids)] },
        secret,
      };
    },
    async getClient(clientId) {
      return getClientNow(clientId);
    },

    async allowSerial(sn) {
      stmt.allowSerial.run(sn, now());
    },
    async registerDevice(input, policy) {
      return db
        .transaction((): RegistrationOutcome => {
          const existing = stmt.deviceBySn.get(input.sn) as RawDevice | undefined;
          const decision = decideRegistration({
            policy: policy.registration,
            allowed: policy.registration === 'open' || stmt.isAllowed.get(input.sn) !== undefined,
            existing: existing && { registered: existing.registered === 1 },
          });
          if (decision === 'not_allowed' || decision === 'already_registered') return { kind: decision };
          const secret = newSecret();
          const sealed = keys.sealSecret(secret);
          const t = now();
          let deviceId: string;
          if (decision === 'register_again' && existing) {
            deviceId = existing.device_id;
            stmt.reregisterDevice.run(
              input.model,
              input.manufacturer,
              input.firmware_version,
              input.mac ?? null,
              sealed,
              t,
              policy.defaultSiteId ?? null,
              deviceId,
            );
          } else {
            deviceId = newId('dev');
            stmt.insertDevice.run(
              deviceId,
              input.sn,
              input.model,
              input.manufacturer,
              input.firmware_version,
              input.mac ?? null,
              policy.defaultSiteId ?? null,
              sealed,
              t,
            );
          }
          for (const c of input.connectors ?? []) {
            stmt.upsertConnectorDeclaration.run(
              deviceId,
              c.connector_id,
              c.max_power_kw,
              c.v2g_capable ? 1 : 0,
            );
          }
          const device = toDevice(stmt.getDevice.get(deviceId) as RawDevice);
          return { kind: 'registered', device, secret };
        })
        .immediate();
    },
    async getDevice(deviceId) {
      const raw = stmt.getDevice.get(deviceId) as RawDevice | undefined;
      return raw ? toDevice(raw) : undefined;
    },
    async getDeviceForOperators(deviceId, operatorIds) {
      if (operatorIds.length === 0) return undefined;
      const raw = prepared(
        `SELECT d.* FROM devices d JOIN sites s ON s.site_id = d.site_id
           WHERE d.device_id = ? AND s.operator_id IN (${placeholders(operatorIds.length)})`,
      ).get(deviceId, ...operatorIds) as RawDevice | undefined;
      return raw ? toDevice(raw) : undefined;
    },
    async listDeviceIdsForTargets(operatorIds, target) {
      if (operatorIds.length === 0) return [];
      const ops = placeholders(operatorIds.length);
      let sql = `SELECT d.device_id FROM devices d JOIN sites s ON s.site_id = d.site_id
                 WHERE s.operator_id IN (${ops}) AND d.registered = 1`;
      const args: string[] = [...operatorIds];
      if (target.type === 'site') {
        sql += ` AND s.site_id IN (${placeholders(target.ids.length)})`;
        args.push(...target.ids);
      } else if (target.type === 'operator') {
        sql += ` AND s.operator_id IN (${placeholders(target.ids.length)})`;
        args.push(...target.ids);
      }
      sql += ' ORDER BY d.device_id';
      return prepared(sql)
        .all(...args)
        .map((r) => (r as { device_id: string }).device_id);
    },
    async assignDevice(deviceId, siteId) {
      localChanges++;
      return db.transaction(() => {
        if (stmt.assignDevice.run(siteId, deviceId).changes !== 1) return false;
        records.deviceMoved(deviceId);
        return true;
      })();
    },
    async resetDevice(deviceId) {
      localChanges++;
      return stmt.resetDevice.run(deviceId).changes === 1;
    },
    async loadDirectory() {
      const devices = (stmt.directoryDevices.all() as RawDeviceEntry[]).map(toDeviceEntry);
      const ops = new Map<string, string[]>();
      for (const r of stmt.directoryClientOperators.all() as Array<{
        client_id: string;
        operator_id: string;
      }>) {
        const list = ops.get(r.client_id) ?? [];
        list.push(r.operator_id);
        ops.set(r.client_id, list);
      }
      const clients = (
        stmt.directoryClients.all() as Array<{
          client_id: string;
          secret_sealed: string;
          require_signature: number;
        }>
      ).map((c) => ({
        client_id: c.client_id,
        secret_sealed: c.secret_sealed,
        require_signature: c.require_signature === 1,
        operator_ids: ops.get(c.client_id) ?? [],
      }));
      return { devices, clients };
    },
    async loadDeviceEntry(deviceId) {
      const raw = stmt.directoryDevice.get(deviceId) as RawDeviceEntry | undefined;
      return raw ? toDeviceEntry(raw) : undefined;
    },
    async loadClientEntry(clientId) {
      const c = stmt.directoryClient.get(clientId) as
        | { client_id: string; secret_sealed: string; require_signature: number }
        | undefined;
      if (!c) return undefined;
      const operator_ids = (stmt.clientOperators.all(clientId) as Array<{ operator_id: string }>).map(
        (r) => r.operator_id,
      );
      return { ...c, require_signature: c.require_signature === 1, operator_ids };
    },
    async setRequireSignature(kind, id, required) {
      localChanges++;
      const s = kind === 'client' ? stmt.clientRequireSignature : stmt.deviceRequireSignature;
      return s.run(required ? 1 : 0, id).changes === 1;
    },

    async listConnectors(deviceId) {
      return withLiveState(stmt.listConnectors.all(deviceId) as RawConnector[], [deviceId]);
    },
    async getConnector(deviceId, connectorId) {
      const raw = stmt.getConnector.get(deviceId, connectorId) as RawConnector | undefined;
      return withLiveState(raw ? [raw] : [], [deviceId]).find((c) => c.connector_id === connectorId);
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

    async listChargingRecords(operatorIds, q) {
      return records.list(operatorIds, q);
    },
    async insertChargingRecords(rows) {
      return db.transaction(() => records.insert(rows, now()))();
    },

    async enqueueCommands(commands, nowMs) {
      return db.transaction(() => insertCommandsNow(commands, nowMs))();
    },
    async takePendingCommands(deviceId, nowMs, onDelivered) {
      if (!mayHavePending.has(deviceId)) return [];
      const rows = (stmt.pendingCommands.all(deviceId, nowMs) as RawCommand[]).map(toCommand);
      if (rows.length === 0) mayHavePending.delete(deviceId);
      const delivered: CommandRow[] = [];
      if (rows.some((r) => r.status === 'queued')) {
        db.transaction(() => {
          for (const r of rows) {
            // A heartbeat read its time before waiting for its own write; a command queued meanwhile is
            // delivered by it, but never before it existed: the history stays in time order.
            const at = Math.max(nowMs, r.updated_ms);
            if (r.status === 'queued' && stmt.markDelivered.run(at, r.command_id).changes === 1) {
              stmt.insertHistory.run(r.command_id, 'delivered', at, null);
              delivered.push({ ...r, status: 'delivered', updated_ms: at });
            }
          }
        })();
      }
      if (onDelivered) for (const c of delivered) onDelivered(c);
      return rows.map(
        (r): PendingCommand => ({
          command_id: r.command_id,
          command: r.command,
          params: r.params,
          expiry: iso(r.expiry_ms),
        }),
      );
    },
    async saveSchedule(row: ScheduleRow, command) {
      return db.transaction(() => {
        stmt.upsertSchedule.run(
          row.device_id,
          row.connector_id,
          row.schedule.schedule_id,
          JSON.stringify(row.schedule),
          row.updated_ms,
        );
        return insertCommandsNow([command], row.updated_ms)[0]!;
      })();
    },
    async createControl(control: ControlRow, commands) {
      return db.transaction(() => {
        stmt.insertControl.run(
          control.control_id,
          control.client_id,
          control.target_type,
          JSON.stringify(control.target_ids),
          control.command,
          JSON.stringify(control.params),
          control.status,
          control.created_ms,
          control.ends_ms,
          JSON.stringify(control.operator_ids),
        );
        return insertCommandsNow(commands, control.created_ms);
      })();
    },

    async getCommand(commandId) {
      const raw = stmt.getCommand.get(commandId) as RawCommand | undefined;
      if (!raw) return undefined;
      return { command: toCommand(raw), history: stmt.commandHistory.all(commandId) as CommandHistoryRow[] };
    },
    async reportCommandStatus(deviceId, commandId, report, nowMs) {
      return db
        .transaction((): StatusReportOutcome => {
          const raw = stmt.getCommand.get(commandId) as RawCommand | undefined;
          if (!raw || raw.device_id !== deviceId) return { outcome: 'not_found' };
          const decision = decideStatusReport(raw.status, report.status);
          if (decision.kind === 'conflict') return { outcome: 'conflict', status: decision.status };
          if (decision.kind === 'unchanged')
            return { outcome: 'ok', command: toCommand(raw), changed: false };
          stmt.setCommandStatus.run(report.status, report.reason ?? null, nowMs, commandId);
          stmt.insertHistory.run(commandId, report.status, nowMs, report.reason ?? null);
          return {
            outcome: 'ok',
            command: toCommand({
              ...raw,
              status: report.status,
              updated_ms: nowMs,
              reason: report.reason ?? raw.reason,
            }),
            changed: true,
          };
        })
        .immediate();
    },
    async cancelCommand(commandId, nowMs) {
      return db
        .transaction((): CommandRow | 'not_found' | 'conflict' => {
          const raw = stmt.getCommand.get(commandId) as RawCommand | undefined;
          if (!raw) return 'not_found';
          if (!mayCancel(raw.status)) return 'conflict';
          stmt.setCommandStatus.run('cancelled', REASON.cancelledByOperator, nowMs, commandId);
          stmt.insertHistory.run(commandId, 'cancelled', nowMs, REASON.cancelledByOperator);
          return toCommand({ ...raw, status: 'cancelled', updated_ms: nowMs });
        })
        .immediate();
    },
    async expireCommands(nowMs) {
      return db
        .transaction(() => {
          const rows = stmt.expiring.all(nowMs) as RawCommand[];
          for (const r of rows) {
            stmt.setCommandStatus.run('expired', REASON.expired, nowMs, r.command_id);
            stmt.insertHistory.run(r.command_id, 'expired', nowMs, REASON.expired);
          }
          return rows.map((r) => toCommand({ ...r, status: 'expired', updated_ms: nowMs }));
        })
        .immediate();
    },
    async countCommandsByStatus() {
      const out: Record<string, number> = {};
      for (const r of stmt.commandsByStatus.all() as Array<{ status: string; n: number }>)
        out[r.status] = r.n;
      return out;
    },
    async getControl(controlId) {
      const raw = stmt.getControl.get(controlId) as RawControl | undefined;
      if (!raw) return undefined;
      return {
        control: toControl(raw),
        commands: stmt.controlCommands.all(controlId) as ControlWithCommands['commands'],
      };
    },
    async cancelControl(controlId, reversals, nowMs) {
      return db
        .transaction(() => {
          if (stmt.setControlStatus.run('cancelled', controlId, 'executing').changes !== 1) {
            return { cancelled: [], queued: [] };
          }
          const pending = stmt.queuedOfControl.all(controlId) as RawCommand[];
          for (const r of pending) {
            stmt.setCommandStatus.run('cancelled', REASON.controlCancelled, nowMs, r.command_id);
            stmt.insertHistory.run(r.command_id, 'cancelled', nowMs, REASON.controlCancelled);
          }
          const queued = insertCommandsNow(reversals, nowMs);
          const cancelled = pending.map((r) =>
            toCommand({ ...r, status: 'cancelled', reason: REASON.controlCancelled, updated_ms: nowMs }),
          );
          return { cancelled, queued };
        })
        .immediate();
    },
    async completeControls(nowMs) {
      return stmt.completeControls.run(nowMs).changes;
    },

    async listDevices(operatorIds, q, onlineSinceMs) {
      if (operatorIds.length === 0) return { total: 0, page: q.page, size: q.size, items: [] };
      const where = [`s.operator_id IN (${placeholders(operatorIds.length)})`];
      const args: Array<string | number> = [...operatorIds];
      if (q.site_id !== undefined) {
        where.push('d.site_id = ?');
        args.push(q.site_id);
      }
      // Same rule as Liveness.isOnline: seen within the window, and not offline by a heartbeat unless the
      // device made a request after that heartbeat.
      const online = `(d.last_seen_ms >= ? AND (COALESCE(d.reported_status, '') <> 'offline'
        OR d.last_seen_ms > COALESCE(d.last_heartbeat_ms, 0)))`;
      if (q.status === 'online') {
        where.push(online);
        args.push(onlineSinceMs);
      } else if (q.status === 'offline') {
        where.push(`NOT ${online.replace('d.last_seen_ms >= ?', 'COALESCE(d.last_seen_ms, 0) >= ?')}`);
        args.push(onlineSinceMs);
      }
      const from = `FROM devices d JOIN sites s ON s.site_id = d.site_id WHERE ${where.join(' AND ')}`;
      const total = (prepared(`SELECT COUNT(*) AS n ${from}`).get(...args) as { n: number }).n;
      const rows = prepared(`SELECT d.* ${from} ORDER BY d.device_id LIMIT ? OFFSET ?`).all(
        ...args,
        q.size,
        (q.page - 1) * q.size,
      ) as RawDevice[];
      return { total, page: q.page, size: q.size, items: rows.map(toDevice) };
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
    async listSitesFor(operatorIds, page, size) {
      if (operatorIds.length === 0) return { total: 0, page, size, items: [] };
      const ops = placeholders(operatorIds.length);
      const total = (
        prepared(`SELECT COUNT(*) AS n FROM sites WHERE operator_id IN (${ops})`).get(...operatorIds) as {
          n: number;
        }
      ).n;
      const items = prepared(
        `SELECT s.site_id, s.operator_id, s.name, s.timezone,
           (SELECT COUNT(*) FROM devices d WHERE d.site_id = s.site_id) AS device_count
         FROM sites s WHERE s.operator_id IN (${ops}) ORDER BY s.created_ms, s.site_id LIMIT ? OFFSET ?`,
      ).all(...operatorIds, size, (page - 1) * size) as Array<SiteRow & { device_count: number }>;
      return { total, page, size, items };
    },
    async countDevicesInSite(siteId) {
      return (stmt.countDevicesInSite.get(siteId) as { n: number }).n;
    },
    async listSchedules(deviceId, connectorId, page, size) {
      const total = (stmt.countSchedules.get(deviceId, connectorId) as { n: number }).n;
      const items = (
        stmt.listSchedules.all(deviceId, connectorId, size, (page - 1) * size) as Array<{ body: string }>
      ).map((r) => JSON.parse(r.body) as ChargingSchedule);
      return { total, page, size, items };
    },
    async deleteSchedule(deviceId, connectorId, scheduleId, command, nowMs) {
      return db
        .transaction(() => {
          if (stmt.deleteSchedule.run(deviceId, connectorId, scheduleId).changes === 0) return undefined;
          return insertCommandsNow([command], nowMs)[0];
        })
        .immediate();
    },
    async deviceIdsInSite(siteId) {
      return (stmt.deviceIdsInSite.all(siteId) as Array<{ device_id: string }>).map((r) => r.device_id);
    },
    async energyBuckets(deviceIds, startMs, endMs, intervalMs) {
      // Answered from the 15-minute rollups (domain/energy-rollup.ts), after they took in every row stored.
      // If that write fails (a full disk), the answer is what is rolled up: at most a second behind.
      await rollups.catchUp().catch(() => undefined);
      const rows: EnergyBucketRow[] = [];
      for (let i = 0; i < deviceIds.length; i += 500) {
        const ids = deviceIds.slice(i, i + 500);
        rows.push(
          ...(await reader.all<EnergyBucketRow>(
            `SELECT bucket_ms AS start_ms, SUM(imported_kwh) AS imported_kwh, SUM(exported_kwh) AS exported_kwh,
               SUM(power_sum) AS power_sum, MAX(max_power) AS max_power, SUM(samples) AS samples
             FROM energy_rollups WHERE device_id IN (${placeholders(ids.length)}) AND bucket_ms >= ? AND bucket_ms < ?
             GROUP BY bucket_ms`,
            [...ids, startMs, endMs],
          )),
        );
      }
      return bucketsInOrder(sumRollups(rows, { startMs, endMs, intervalMs }));
    },

    async insertEvents(deviceId, events, nowMs) {
      return db.transaction(() => {
        let accepted = 0;
        for (const e of events) {
          accepted += stmt.insertEvent.run(
            deviceId,
            e.event_id,
            e.kind,
            e.severity,
            e.connector_id,
            e.ts_ms,
            e.message,
            e.data ? JSON.stringify(e.data) : null,
            nowMs,
          ).changes;
        }
        return { accepted, duplicates: events.length - accepted };
      })();
    },
    async listEvents(deviceId, page, size) {
      const total = (stmt.countEvents.get(deviceId) as { n: number }).n;
      const items = (
        stmt.listEvents.all(deviceId, size, (page - 1) * size) as Array<
          Omit<StoredEventRow, 'data'> & { data: string | null }
        >
      ).map((r) => ({ ...r, data: r.data ? (JSON.parse(r.data) as Record<string, unknown>) : null }));
      return { total, page, size, items };
    },
    async recordFirmwareStatus(deviceId, r, nowMs) {
      db.transaction(() => {
        stmt.insertFirmware.run(
          deviceId,
          r.status,
          r.version ?? null,
          r.progress ?? null,
          r.message ?? null,
          r.ts_ms,
          nowMs,
        );
        if (r.status === 'installed' && r.version) stmt.firmwareInstalled.run(r.version, deviceId);
      })();
    },
    async rotateSecret(deviceId) {
      const secret = newSecret();
      const row = stmt.rotateSecret.get(keys.sealSecret(secret), deviceId) as
        | { secret_gen: number }
        | undefined;
      return row ? { secret, generation: row.secret_gen } : undefined;
    },
    async getSetting(key) {
      return (stmt.getSetting.get(key) as { value: string } | undefined)?.value;
    },
    async setSetting(key, value) {
      stmt.setSetting.run(key, value);
    },
    externalChangeVersion() {
      return (dataVersion.get() as number) * 1_000_000 + localChanges;
    },
    async runMaintenance() {
      await rollups.catchUp();
      await retention!.prune();
    },
    maintenanceStats() {
      const r = retention!.stats();
      return {
        pruned: r.pruned,
        retentionPasses: r.passes,
        lastRetentionPassMs: r.lastPassMs,
        lastRetentionPassDurationMs: r.lastPassDurationMs,
        rollupLagRows: rollups.lagRows(),
      };
    },
    async close() {
      clearInterval(liveStateTimer);
      clearInterval(rollupTimer);
      clearInterval(retentionTimer);
      clearTimeout(firstPrune);
      await rollups.idle();
      await retention!.idle();
      await persistingLive?.catch(() => undefined);
      batcher.drain();
      // The live state still pending goes out with the last commit.
      const rows = live.pending();
      if (rows.length > 0) {
        db.transaction(() => {
          writeLiveState(rows);
          stmt.setSetting.run(LIVE_STATE_SETTING, String(newestTelemetryId));
        })();
      }
      await reader.close();
      await checkpointer?.close();
      db.close();
    },
  };
  return store;
}
