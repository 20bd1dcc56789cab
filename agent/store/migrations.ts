/**
 * The agent store's schema, one migration per version through `PRAGMA user_version`, each in its own
 * transaction. Never edit a released step: a charger in the field may be at any version.
 */
import type Database from 'better-sqlite3';
import { OUTBOX_KINDS } from '../core/outbox-policy.js';
import { migrateOutbox } from './outbox.js';

type Db = Database.Database;

/** Agent store schema step 2: the pending secret and when it was stored (agent clock). */
function addPendingSecretColumns(db: Db): void {
  db.exec(`
    ALTER TABLE identity ADD COLUMN pending_secret TEXT;
    ALTER TABLE identity ADD COLUMN pending_since TEXT;
  `);
}

/**
 * Agent store schema step 3 (DESIGN.md §19): the outbox takes firmware status reports (its kinds are a CHECK,
 * which SQLite changes only by rebuilding the table; seqs and the AUTOINCREMENT counter are kept, so an ack in
 * flight can never remove a newer item), and the `updates` table holds each update's progress so that a restart
 * at any step resumes it.
 */
function addUpdates(db: Db): void {
  const kinds = OUTBOX_KINDS.map((k) => `'${k}'`).join(', ');
  db.exec(`
    CREATE TABLE outbox_v3 (
      seq INTEGER PRIMARY KEY AUTOINCREMENT,
      kind TEXT NOT NULL CHECK (kind IN (${kinds})),
      payload TEXT NOT NULL,
      bytes INTEGER NOT NULL,
      created_at TEXT NOT NULL
    );
    INSERT INTO outbox_v3 (seq, kind, payload, bytes, created_at)
      SELECT seq, kind, payload, bytes, created_at FROM outbox;
    UPDATE sqlite_sequence SET seq = max(seq, coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'outbox'), 0))
      WHERE name = 'outbox_v3';
    INSERT INTO sqlite_sequence (name, seq)
      SELECT 'outbox_v3', seq FROM sqlite_sequence WHERE name = 'outbox'
      AND NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'outbox_v3');
    DROP TABLE outbox;
    ALTER TABLE outbox_v3 RENAME TO outbox;
    CREATE INDEX outbox_kind_seq ON outbox (kind, seq);
    CREATE TABLE updates (
      update_id TEXT PRIMARY KEY,
      command_id TEXT NOT NULL,
      manifest TEXT NOT NULL,
      phase TEXT NOT NULL,
      progress INTEGER,
      reason TEXT,
      created_at TEXT NOT NULL,
      updated_at TEXT NOT NULL
    );
  `);
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
  addUpdates,
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
