/**
 * The agent's local store: one SQLite file in the data directory that holds everything the charger needs to
 * keep doing the right thing without the platform, and everything it still owes the platform.
 *
 * Durability choices (a charger loses power without warning):
 * - WAL journal: readers (the technician's `status`/`diag`) never block the running agent, and a crash can
 *   never leave a half-written page in the database.
 * - `synchronous=FULL`: every commit is fsynced before it returns. With NORMAL, a power cut may roll back the
 *   last commits even though the agent already acted on them — and the agent acknowledges to the platform
 *   from what it committed (a command `accepted`, a rotated secret). A rolled-back `accepted` would lose the
 *   command for good (the platform no longer redelivers it); a rolled-back secret would lock the charger
 *   out. The cost, one fsync per commit, is kept small by committing rarely: live telemetry goes straight to
 *   the platform and touches the disk only when it must wait in the outbox, and every tick's writes share
 *   one transaction.
 * - File mode 0600 (the secret and token live here); the directory is created 0700.
 * - Versioned migrations through `PRAGMA user_version`, each in its own transaction.
 *
 * Readers other than the agent (the technician CLI) may open the same file while the agent runs; see
 * `openAgentStore(..., { readonly: true })`.
 *
 * `openAgentStore(..., { memory: true })` keeps the same schema in an in-memory database instead: nothing is
 * written to disk and nothing survives the process. It exists for simulated chargers (the fleet simulator runs
 * thousands of agents in one process); a real charger always uses the file.
 */
import { chmodSync, closeSync, existsSync, mkdirSync, openSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import type { ChargingRecordUpload, DeviceEvent, ReportedCommandStatus } from '../../shared/device-api.js';
import { iso } from '../clock.js';
import type { ConnectorOverride } from '../core/connector-policy.js';
import type { OutboxCap } from '../core/outbox-policy.js';
import type { FlexibilityLimit, StoredSchedule } from '../core/schedule-engine.js';
import type { ConnectorHardwareState, ConnectorInfo } from '../hal.js';
import { createOutbox, migrateOutbox, type Outbox, type OutboxItemInput } from './outbox.js';
import {
  addPendingSecretColumns,
  createPendingSecretStore,
  type PendingSecretStore,
} from './pending-secret-store.js';

type Db = Database.Database;

export const AGENT_DB_FILE = 'agent.sqlite';

export interface Identity {
  deviceId: string;
  secret: string;
  sn: string;
  platformUrl: string;
  registeredAt: string;
  secretRotatedAt?: string;
  /** A rotation's new secret, stored before it is used; `secret` stays until this one has worked. */
  pendingSecret?: string;
  pendingSince?: string;
}

export interface StoredToken {
  accessToken: string;
  /** ISO time, agent clock. */
  expiresAt: string;
  obtainedAt: string;
}

/** The journal's statuses: `received` until the agent decided, then what it reported. */
export type JournalStatus = 'received' | ReportedCommandStatus;
export const FINAL_STATUSES: readonly JournalStatus[] = ['rejected', 'succeeded', 'failed'];

export interface JournalEntry {
  commandId: string;
  command: string;
  params: unknown;
  expiry: string;
  status: JournalStatus;
  reason?: string;
  receivedAt: string;
  updatedAt: string;
}

export interface StoredLimit extends FlexibilityLimit {
  commandId: string;
  receivedAt: string;
  reason?: string;
}

/** A charging session as the agent persists it: enough to write its charging record after a power cut. */
export interface SessionRow {
  recordId: string;
  connectorId: number;
  startedAt: string;
  endedAt?: string;
  meterStart: number;
  meterLast: number;
  exportStart: number;
  exportLast: number;
  socStart?: number;
  socLast?: number;
  /** Largest import power seen, kW (≥ 0). */
  maxPowerKw: number;
  /** Largest export power seen, as a negative kW (≤ 0). */
  minPowerKw: number;
  /** When the progress fields were last written. */
  updatedAt: string;
}

/** The latest known state of a connector, for the technician's `status` (written on change and every minute). */
export interface ConnectorSnapshot {
  connectorId: number;
  state: ConnectorHardwareState;
  powerKw: number;
  voltageV?: number;
  currentA?: number;
  /** kWh delivered in the current session (0 without one). */
  energyDeliveredKwh?: number;
  soc?: number;
  temperatureC?: number;
  vehiclePresent: boolean;
  faultCode: number;
  /** What the control loop decided, and why. */
  mode?: string;
  maxPowerKw?: number;
  reason?: string;
  nextChangeAt?: string;
  updatedAt: string;
}

/** Keys of the small key-value table; values are JSON. */
export interface AgentStateValues {
  last_heartbeat: {
    at: string;
    ok: boolean;
    status?: string;
    roundTripMs?: number;
    error?: string;
  };
  clock_skew: { ms: number; at: string };
  last_error: { at: string; where: string; message: string };
  run_config: Record<string, unknown>;
  agent_process: { pid: number; startedAt: string; version: string; stoppedAt?: string };
}
export type AgentStateKey = keyof AgentStateValues;

export interface OpenOptions {
  now?: () => number;
  outboxCap?: OutboxCap;
  /** Open an existing store without writing (technician CLI while the agent runs). */
  readonly?: boolean;
  /**
   * An in-memory database (`:memory:`) instead of `DIR/agent.sqlite`: same schema and behaviour, no file, no
   * durability — for simulated chargers only. Small pages and a small page cache keep it to about 0.1 MiB.
   */
  memory?: boolean;
}

/** In-memory stores: 1 KiB pages (a near-empty table costs a page), and a page cache of 64 KiB. */
const MEMORY_PAGE_SIZE = 1024;
const MEMORY_CACHE_KIB = 64;

export interface AgentStore extends PendingSecretStore {
  readonly db: Db;
  readonly file: string;
  readonly outbox: Outbox;
  transaction<T>(fn: () => T): T;

  getIdentity(): Identity | undefined;
  /** A new identity (registration): drops the token and any pending secret. */
  saveIdentity(identity: Identity): void;
  updatePlatformUrl(url: string): void;

  getToken(): StoredToken | undefined;
  saveToken(token: StoredToken): void;
  clearToken(): void;

  listConnectors(): ConnectorInfo[];
  saveConnectors(connectors: readonly ConnectorInfo[]): void;

  listSchedules(connectorId?: number): Array<{ connectorId: number; schedule: StoredSchedule }>;
  upsertSchedule(connectorId: number, schedule: StoredSchedule, commandId: string): void;
  deleteSchedule(connectorId: number, scheduleId: string): boolean;

  listLimits(): StoredLimit[];
  /** Stores a limit keyed by control_id; a repeat can shorten a control (a reversal) but never extend it. */
  upsertLimit(limit: StoredLimit): StoredLimit;
  pruneLimits(endedBefore: string): number;

  listOverrides(): Map<number, ConnectorOverride>;
  setOverride(connectorId: number, override: ConnectorOverride | undefined): void;

  /** Journals a command the first time it is seen; false when it was seen before (a redelivery). */
  journalInsert(
    entry: { commandId: string; command: string; params: unknown; expiry: string },
    at: string,
  ): boolean;
  journalGet(commandId: string): JournalEntry | undefined;
  journalUnfinished(): JournalEntry[];
  journalRecent(limit: number): JournalEntry[];
  /**
   * Moves a command to `status` and queues the reports in the same transaction: the agent acknowledges only
   * what it has stored. `also` runs inside the transaction (the command's own effect on the store).
   */
  recordCommandStatus(
    commandId: string,
    reports: ReadonlyArray<{ status: ReportedCommandStatus; reason?: string }>,
    at: string,
    also?: () => void,
  ): void;
  pruneJournal(expiredBefore: string): number;

  openSessions(): SessionRow[];
  listSessions(limit: number): SessionRow[];
  insertSession(session: SessionRow): void;
  updateSessionProgress(session: SessionRow): void;
  /** Closes the session and queues its charging record, atomically: a record is never lost or doubled. */
  closeSession(session: SessionRow, endedAt: string, record: ChargingRecordUpload): void;
  pruneSessions(endedBefore: string): number;

  listSnapshots(): ConnectorSnapshot[];
  saveSnapshots(snapshots: readonly ConnectorSnapshot[]): void;

  getState<K extends AgentStateKey>(key: K): AgentStateValues[K] | undefined;
  setState<K extends AgentStateKey>(key: K, value: AgentStateValues[K]): void;

  enqueueEvents(events: readonly DeviceEvent[]): void;
  enqueue(items: readonly OutboxItemInput[]): void;

  close(): void;
}

/** Each entry moves the schema one version up; never edit a released entry, append a new one. */
const MIGRATIONS: ReadonlyArray<(db: Db) => void> = [
  (db) => {
    db.exec(`
      CREATE TABLE identity (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        device_id TEXT NOT NULL,
        secret TEXT NOT NULL,
        sn TEXT NOT NULL,
        platform_url TEXT NOT NULL,
        registered_at TEXT NOT NULL,
        secret_rotated_at TEXT
      );
      CREATE TABLE token (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        access_token TEXT NOT NULL,
        expires_at TEXT NOT NULL,
        obtained_at TEXT NOT NULL
      );
      CREATE TABLE connectors (
        connector_id INTEGER PRIMARY KEY,
        rated_power_kw REAL NOT NULL,
        v2g_capable INTEGER NOT NULL,
        updated_at TEXT NOT NULL
      );
      CREATE TABLE schedules (
        connector_id INTEGER NOT NULL,
        schedule_id TEXT NOT NULL,
        schedule TEXT NOT NULL,
        received_at TEXT NOT NULL,
        command_id TEXT NOT NULL,
        PRIMARY KEY (connector_id, schedule_id)
      );
      CREATE TABLE limits (
        control_id TEXT PRIMARY KEY,
        kind TEXT NOT NULL CHECK (kind IN ('power_limit', 'pause')),
        power_limit_percent INTEGER,
        starts_at TEXT NOT NULL,
        ends_at TEXT NOT NULL,
        reason TEXT,
        command_id TEXT NOT NULL,
        received_at TEXT NOT NULL
      );
      CREATE TABLE overrides (
        connector_id INTEGER PRIMARY KEY,
        override TEXT NOT NULL,
        updated_at TEXT NOT NULL
      );
      CREATE TABLE commands (
        command_id TEXT PRIMARY KEY,
        command TEXT NOT NULL,
        params TEXT NOT NULL,
        expiry TEXT NOT NULL,
        status TEXT NOT NULL
          CHECK (status IN ('received', 'accepted', 'rejected', 'succeeded', 'failed')),
        reason TEXT,
        received_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
      );
      CREATE INDEX commands_unfinished ON commands (status) WHERE status IN ('received', 'accepted');
      CREATE INDEX commands_by_received ON commands (received_at);
      CREATE TABLE sessions (
        record_id TEXT PRIMARY KEY,
        connector_id INTEGER NOT NULL,
        started_at TEXT NOT NULL,
        ended_at TEXT,
        meter_start REAL NOT NULL,
        meter_last REAL NOT NULL,
        export_start REAL NOT NULL,
        export_last REAL NOT NULL,
        soc_start INTEGER,
        soc_last INTEGER,
        max_power_kw REAL NOT NULL,
        min_power_kw REAL NOT NULL,
        updated_at TEXT NOT NULL
      );
      -- At most one open session per connector, whatever happens around a crash.
      CREATE UNIQUE INDEX sessions_one_open ON sessions (connector_id) WHERE ended_at IS NULL;
      CREATE TABLE connector_status (
        connector_id INTEGER PRIMARY KEY,
        snapshot TEXT NOT NULL,
        updated_at TEXT NOT NULL
      );
      CREATE TABLE agent_state (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL,
        updated_at TEXT NOT NULL
      );
    `);
    migrateOutbox(db);
  },
  addPendingSecretColumns,
];
export const AGENT_SCHEMA_VERSION = MIGRATIONS.length;

export function migrateAgentStore(db: Db): void {
  const current = db.pragma('user_version', { simple: true }) as number;
  if (current > MIGRATIONS.length) {
    throw new Error(
      `agent store schema version ${current} is newer than this agent (${MIGRATIONS.length}): upgrade the agent`,
    );
  }
  for (let version = current; version < MIGRATIONS.length; version++) {
    const step = MIGRATIONS[version]!;
    db.transaction(() => {
      step(db);
      db.pragma(`user_version = ${version + 1}`);
    })();
  }
}

/** Creates the file 0600 before SQLite does, so the secret is never readable by others, not even briefly. */
function ensurePrivateFile(file: string): void {
  if (!existsSync(file)) closeSync(openSync(file, 'a', 0o600));
  chmodSync(file, 0o600);
  for (const side of [`${file}-wal`, `${file}-shm`]) if (existsSync(side)) chmodSync(side, 0o600);
}

interface JournalRow {
  command_id: string;
  command: string;
  params: string;
  expiry: string;
  status: JournalStatus;
  reason: string | null;
  received_at: string;
  updated_at: string;
}
interface SessionDbRow {
  record_id: string;
  connector_id: number;
  started_at: string;
  ended_at: string | null;
  meter_start: number;
  meter_last: number;
  export_start: number;
  export_last: number;
  soc_start: number | null;
  soc_last: number | null;
  max_power_kw: number;
  min_power_kw: number;
  updated_at: string;
}
interface LimitRow {
  control_id: string;
  kind: 'power_limit' | 'pause';
  power_limit_percent: number | null;
  starts_at: string;
  ends_at: string;
  reason: string | null;
  command_id: string;
  received_at: string;
}

function toJournal(row: JournalRow): JournalEntry {
  const entry: JournalEntry = {
    commandId: row.command_id,
    command: row.command,
    params: JSON.parse(row.params) as unknown,
    expiry: row.expiry,
    status: row.status,
    receivedAt: row.received_at,
    updatedAt: row.updated_at,
  };
  if (row.reason !== null) entry.reason = row.reason;
  return entry;
}

function toSession(row: SessionDbRow): SessionRow {
  const s: SessionRow = {
    recordId: row.record_id,
    connectorId: row.connector_id,
    startedAt: row.started_at,
    meterStart: row.meter_start,
    meterLast: row.meter_last,
    exportStart: row.export_start,
    exportLast: row.export_last,
    maxPowerKw: row.max_power_kw,
    minPowerKw: row.min_power_kw,
    updatedAt: row.updated_at,
  };
  if (row.ended_at !== null) s.endedAt = row.ended_at;
  if (row.soc_start !== null) s.socStart = row.soc_start;
  if (row.soc_last !== null) s.socLast = row.soc_last;
  return s;
}

function toLimit(row: LimitRow): StoredLimit {
  const limit: StoredLimit = {
    control_id: row.control_id,
    kind: row.kind,
    starts_at: row.starts_at,
    ends_at: row.ends_at,
    commandId: row.command_id,
    receivedAt: row.received_at,
  };
  if (row.power_limit_percent !== null) limit.power_limit_percent = row.power_limit_percent;
  if (row.reason !== null) limit.reason = row.reason;
  return limit;
}

export function agentStoreFile(dataDir: string): string {
  return path.join(dataDir, AGENT_DB_FILE);
}

export function openAgentStore(dataDir: string, options: OpenOptions = {}): AgentStore {
  const now = options.now ?? Date.now;
  const file = options.memory ? ':memory:' : agentStoreFile(dataDir);
  let db: Db;
  if (options.memory) {
    if (options.readonly) throw new Error('an in-memory agent store cannot be opened read-only');
    db = new Database(':memory:');
    // Set before the first table exists; an in-memory database has no journal file and nothing to sync.
    db.pragma(`page_size = ${MEMORY_PAGE_SIZE}`);
    db.pragma(`cache_size = -${MEMORY_CACHE_KIB}`);
    db.pragma('foreign_keys = ON');
    migrateAgentStore(db);
  } else if (options.readonly) {
    if (!existsSync(file))
      throw new Error(`no agent store at ${file}: has the agent run with this --data-dir?`);
    db = new Database(file, { readonly: true, fileMustExist: true });
  } else {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    ensurePrivateFile(file);
    db = new Database(file);
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    db.pragma('foreign_keys = ON');
    migrateAgentStore(db);
    ensurePrivateFile(file); // the -wal and -shm files now exist too
  }
  db.pragma('busy_timeout = 5000');
  const nowIso = () => iso(now());
  const outbox = createOutbox(db, {
    ...(options.outboxCap ? { cap: options.outboxCap } : {}),
    now: () => new Date(now()),
  });

  const q = {
    identity: db.prepare('SELECT * FROM identity WHERE id = 1'),
    token: db.prepare('SELECT * FROM token WHERE id = 1'),
    connectors: db.prepare('SELECT * FROM connectors ORDER BY connector_id'),
    schedulesAll: db.prepare('SELECT * FROM schedules ORDER BY connector_id, schedule_id'),
    schedulesOf: db.prepare('SELECT * FROM schedules WHERE connector_id = ? ORDER BY schedule_id'),
    limits: db.prepare('SELECT * FROM limits ORDER BY starts_at, control_id'),
    limit: db.prepare('SELECT * FROM limits WHERE control_id = ?'),
    overrides: db.prepare('SELECT * FROM overrides ORDER BY connector_id'),
    journal: db.prepare('SELECT * FROM commands WHERE command_id = ?'),
    unfinished: db.prepare(
      "SELECT * FROM commands WHERE status IN ('received', 'accepted') ORDER BY received_at, command_id",
    ),
    recent: db.prepare('SELECT * FROM commands ORDER BY received_at DESC, command_id DESC LIMIT ?'),
    openSessions: db.prepare('SELECT * FROM sessions WHERE ended_at IS NULL ORDER BY connector_id'),
    sessions: db.prepare('SELECT * FROM sessions ORDER BY started_at DESC LIMIT ?'),
    snapshots: db.prepare('SELECT snapshot FROM connector_status ORDER BY connector_id'),
    state: db.prepare('SELECT value FROM agent_state WHERE key = ?'),
  };
  // Write statements cannot be prepared on a read-only connection; prepare them on first use.
  const writes = new Map<string, Database.Statement>();
  const w = (sql: string): Database.Statement => {
    let stmt = writes.get(sql);
    if (!stmt) {
      stmt = db.prepare(sql);
      writes.set(sql, stmt);
    }
    return stmt;
  };

  const store: AgentStore = {
    db,
    file,
    outbox,
    transaction: (fn) => db.transaction(fn)(),

    getIdentity() {
      const row = q.identity.get() as
        | {
            device_id: string;
            secret: string;
            sn: string;
            platform_url: string;
            registered_at: string;
            secret_rotated_at: string | null;
            // Absent in a schema-1 store opened read-only (a technician's newer CLI beside an older agent).
            pending_secret?: string | null;
            pending_since?: string | null;
          }
        | undefined;
      if (!row) return undefined;
      const identity: Identity = {
        deviceId: row.device_id,
        secret: row.secret,
        sn: row.sn,
        platformUrl: row.platform_url,
        registeredAt: row.registered_at,
      };
      if (row.secret_rotated_at) identity.secretRotatedAt = row.secret_rotated_at;
      if (row.pending_secret) identity.pendingSecret = row.pending_secret;
      if (row.pending_since) identity.pendingSince = row.pending_since;
      return identity;
    },
    saveIdentity(identity) {
      db.transaction(() => {
        w(
          `INSERT INTO identity (id, device_id, secret, sn, platform_url, registered_at, secret_rotated_at)
           VALUES (1, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (id) DO UPDATE SET device_id = excluded.device_id, secret = excluded.secret,
             sn = excluded.sn, platform_url = excluded.platform_url, registered_at = excluded.registered_at,
             secret_rotated_at = excluded.secret_rotated_at, pending_secret = NULL, pending_since = NULL`,
        ).run(
          identity.deviceId,
          identity.secret,
          identity.sn,
          identity.platformUrl,
          identity.registeredAt,
          identity.secretRotatedAt ?? null,
        );
        // A token belongs to the credentials it was issued for.
        w('DELETE FROM token').run();
      })();
    },
    ...createPendingSecretStore(w),
    updatePlatformUrl(url) {
      w('UPDATE identity SET platform_url = ? WHERE id = 1').run(url);
    },

    getToken() {
      const row = q.token.get() as
        | { access_token: string; expires_at: string; obtained_at: string }
        | undefined;
      return row
        ? { accessToken: row.access_token, expiresAt: row.expires_at, obtainedAt: row.obtained_at }
        : undefined;
    },
    saveToken(token) {
      w(
        `INSERT INTO token (id, access_token, expires_at, obtained_at) VALUES (1, ?, ?, ?)
         ON CONFLICT (id) DO UPDATE SET access_token = excluded.access_token,
           expires_at = excluded.expires_at, obtained_at = excluded.obtained_at`,
      ).run(token.accessToken, token.expiresAt, token.obtainedAt);
    },
    clearToken() {
      w('DELETE FROM token').run();
    },

    listConnectors() {
      return (
        q.connectors.all() as Array<{ connector_id: number; rated_power_kw: number; v2g_capable: number }>
      ).map((r) => ({
        connectorId: r.connector_id,
        ratedPowerKw: r.rated_power_kw,
        v2gCapable: r.v2g_capable === 1,
      }));
    },
    saveConnectors(connectors) {
      const at = nowIso();
      db.transaction(() => {
        w('DELETE FROM connectors').run();
        const insert = w(
          'INSERT INTO connectors (connector_id, rated_power_kw, v2g_capable, updated_at) VALUES (?, ?, ?, ?)',
        );
        for (const c of connectors) insert.run(c.connectorId, c.ratedPowerKw, c.v2gCapable ? 1 : 0, at);
      })();
    },

    listSchedules(connectorId) {
      const rows = (
        connectorId === undefined ? q.schedulesAll.all() : q.schedulesOf.all(connectorId)
      ) as Array<{
        connector_id: number;
        schedule: string;
        received_at: string;
      }>;
      return rows.map((r) => ({
        connectorId: r.connector_id,
        schedule: { ...(JSON.parse(r.schedule) as StoredSchedule), received_at: r.received_at },
      }));
    },
    upsertSchedule(connectorId, schedule, commandId) {
      const { received_at, ...wire } = schedule;
      w(
        `INSERT INTO schedules (connector_id, schedule_id, schedule, received_at, command_id) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (connector_id, schedule_id) DO UPDATE SET schedule = excluded.schedule,
           received_at = excluded.received_at, command_id = excluded.command_id`,
      ).run(connectorId, wire.schedule_id, JSON.stringify(wire), received_at ?? nowIso(), commandId);
    },
    deleteSchedule(connectorId, scheduleId) {
      return (
        w('DELETE FROM schedules WHERE connector_id = ? AND schedule_id = ?').run(connectorId, scheduleId)
          .changes === 1
      );
    },

    listLimits() {
      return (q.limits.all() as LimitRow[]).map(toLimit);
    },
    upsertLimit(limit) {
      const existing = q.limit.get(limit.control_id) as LimitRow | undefined;
      const stored: StoredLimit = { ...limit };
      if (existing && Date.parse(existing.ends_at) < Date.parse(limit.ends_at))
        stored.ends_at = existing.ends_at;
      w(
        `INSERT INTO limits (control_id, kind, power_limit_percent, starts_at, ends_at, reason, command_id, received_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (control_id) DO UPDATE SET kind = excluded.kind,
           power_limit_percent = excluded.power_limit_percent, starts_at = excluded.starts_at,
           ends_at = excluded.ends_at, reason = excluded.reason, command_id = excluded.command_id,
           received_at = excluded.received_at`,
      ).run(
        stored.control_id,
        stored.kind,
        stored.power_limit_percent ?? null,
        stored.starts_at,
        stored.ends_at,
        stored.reason ?? null,
        stored.commandId,
        stored.receivedAt,
      );
      return stored;
    },
    pruneLimits(endedBefore) {
      // ISO strings of one format compare like instants; every stored time comes from toISOString.
      return w('DELETE FROM limits WHERE ends_at < ?').run(endedBefore).changes;
    },

    listOverrides() {
      const map = new Map<number, ConnectorOverride>();
      for (const row of q.overrides.all() as Array<{ connector_id: number; override: string }>) {
        map.set(row.connector_id, JSON.parse(row.override) as ConnectorOverride);
      }
      return map;
    },
    setOverride(connectorId, override) {
      if (override === undefined) {
        w('DELETE FROM overrides WHERE connector_id = ?').run(connectorId);
        return;
      }
      w(
        `INSERT INTO overrides (connector_id, override, updated_at) VALUES (?, ?, ?)
         ON CONFLICT (connector_id) DO UPDATE SET override = excluded.override, updated_at = excluded.updated_at`,
      ).run(connectorId, JSON.stringify(override), nowIso());
    },

    journalInsert(entry, at) {
      return (
        w(
          `INSERT INTO commands (command_id, command, params, expiry, status, received_at, updated_at)
           VALUES (?, ?, ?, ?, 'received', ?, ?) ON CONFLICT (command_id) DO NOTHING`,
        ).run(entry.commandId, entry.command, JSON.stringify(entry.params ?? null), entry.expiry, at, at)
          .changes === 1
      );
    },
    journalGet(commandId) {
      const row = q.journal.get(commandId) as JournalRow | undefined;
      return row ? toJournal(row) : undefined;
    },
    journalUnfinished() {
      return (q.unfinished.all() as JournalRow[]).map(toJournal);
    },
    journalRecent(limit) {
      return (q.recent.all(limit) as JournalRow[]).map(toJournal);
    },
    recordCommandStatus(commandId, reports, at, also) {
      const last = reports[reports.length - 1];
      if (!last) return;
      db.transaction(() => {
        also?.();
        w('UPDATE commands SET status = ?, reason = ?, updated_at = ? WHERE command_id = ?').run(
          last.status,
          last.reason ?? null,
          at,
          commandId,
        );
        outbox.enqueue(
          reports.map((r) => ({
            kind: 'command_status' as const,
            payload: {
              command_id: commandId,
              status: r.status,
              ...(r.reason !== undefined ? { reason: r.reason } : {}),
              timestamp: at,
            },
          })),
        );
      })();
    },
    pruneJournal(expiredBefore) {
      return w(`DELETE FROM commands WHERE expiry < ? AND status IN ('rejected', 'succeeded', 'failed')`).run(
        expiredBefore,
      ).changes;
    },

    openSessions() {
      return (q.openSessions.all() as SessionDbRow[]).map(toSession);
    },
    listSessions(limit) {
      return (q.sessions.all(limit) as SessionDbRow[]).map(toSession);
    },
    insertSession(s) {
      w(
        `INSERT INTO sessions (record_id, connector_id, started_at, meter_start, meter_last, export_start,
           export_last, soc_start, soc_last, max_power_kw, min_power_kw, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      ).run(
        s.recordId,
        s.connectorId,
        s.startedAt,
        s.meterStart,
        s.meterLast,
        s.exportStart,
        s.exportLast,
        s.socStart ?? null,
        s.socLast ?? null,
        s.maxPowerKw,
        s.minPowerKw,
        s.updatedAt,
      );
    },
    updateSessionProgress(s) {
      w(
        `UPDATE sessions SET meter_last = ?, export_last = ?, soc_last = ?, max_power_kw = ?, min_power_kw = ?,
           updated_at = ? WHERE record_id = ? AND ended_at IS NULL`,
      ).run(
        s.meterLast,
        s.exportLast,
        s.socLast ?? null,
        s.maxPowerKw,
        s.minPowerKw,
        s.updatedAt,
        s.recordId,
      );
    },
    closeSession(s, endedAt, record) {
      db.transaction(() => {
        const closed = w(
          `UPDATE sessions SET meter_last = ?, export_last = ?, soc_last = ?, max_power_kw = ?, min_power_kw = ?,
             updated_at = ?, ended_at = ? WHERE record_id = ? AND ended_at IS NULL`,
        ).run(
          s.meterLast,
          s.exportLast,
          s.socLast ?? null,
          s.maxPowerKw,
          s.minPowerKw,
          endedAt,
          endedAt,
          s.recordId,
        );
        // Closed already (a repeat after a crash between two callers): its record is queued once.
        if (closed.changes === 1) outbox.enqueue([{ kind: 'charging_record', payload: record }]);
      })();
    },
    pruneSessions(endedBefore) {
      return w('DELETE FROM sessions WHERE ended_at IS NOT NULL AND ended_at < ?').run(endedBefore).changes;
    },

    listSnapshots() {
      return (q.snapshots.all() as Array<{ snapshot: string }>).map(
        (r) => JSON.parse(r.snapshot) as ConnectorSnapshot,
      );
    },
    saveSnapshots(snapshots) {
      if (snapshots.length === 0) return;
      db.transaction(() => {
        const upsert = w(
          `INSERT INTO connector_status (connector_id, snapshot, updated_at) VALUES (?, ?, ?)
           ON CONFLICT (connector_id) DO UPDATE SET snapshot = excluded.snapshot, updated_at = excluded.updated_at`,
        );
        for (const s of snapshots) upsert.run(s.connectorId, JSON.stringify(s), s.updatedAt);
      })();
    },

    getState(key) {
      const row = q.state.get(key) as { value: string } | undefined;
      return row ? (JSON.parse(row.value) as AgentStateValues[typeof key]) : undefined;
    },
    setState(key, value) {
      w(
        `INSERT INTO agent_state (key, value, updated_at) VALUES (?, ?, ?)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
      ).run(key, JSON.stringify(value), nowIso());
    },

    enqueueEvents(events) {
      if (events.length > 0) outbox.enqueue(events.map((e) => ({ kind: 'event' as const, payload: e })));
    },
    enqueue(items) {
      if (items.length > 0) outbox.enqueue(items);
    },

    close() {
      if (!db.open) return;
      if (!options.readonly && !options.memory) {
        // Fold the WAL back into the database so the file on flash is complete on its own.
        try {
          db.pragma('wal_checkpoint(TRUNCATE)');
        } catch {
          // Another reader holds the WAL; the next open checkpoints instead.
        }
      }
      db.close();
    },
  };
  return store;
}
