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
 * - Versioned migrations through `PRAGMA user_version`, each in its own transaction (migrations.ts).
 *
 * Readers other than the agent (the technician CLI) may open the same file while the agent runs; see
 * `openAgentStore(..., { readonly: true })`.
 *
 * `openAgentStore(..., { memory: true })` keeps the same schema in an in-memory database instead: nothing is
 * written to disk and nothing survives the process. It exists for simulated chargers (the fleet simulator runs
 * thousands of agents in one process); a real charger always uses the file.
 *
 * The store is one object composed of one part per concern, each in its own module over the same database:
 * identity and token, the pending secret, schedules/limits/overrides, the command journal, sessions,
 * connectors, the agent's state, updates under way, and the outbox.
 */
import { chmodSync, closeSync, existsSync, mkdirSync, openSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import type { DeviceEvent } from '../../shared/device-api.js';
import { iso } from '../clock.js';
import { eventItems } from '../core/outbox-payloads.js';
import type { OutboxCap } from '../core/outbox-policy.js';
import { type AgentStateStore, createAgentStateStore } from './agent-state.js';
import { type CommandJournal, createCommandJournal } from './command-journal.js';
import { type ConnectorStore, createConnectorStore } from './connector-store.js';
import { type ControlStore, createControlStore } from './control-store.js';
import { createIdentityStore, type IdentityStore } from './identity-store.js';
import { migrateAgentStore } from './migrations.js';
import { createOutbox, type Outbox, type OutboxItemInput } from './outbox.js';
import { createPendingSecretStore, type PendingSecretStore } from './pending-secret-store.js';
import { createSessionStore, type SessionStore } from './session-store.js';
import { createUpdateStore, type UpdateStore } from './update-store.js';

export type { StoredLimit } from '../core/limit-policy.js';
export type { SessionRow } from '../core/sessions.js';
export type { AgentStateKey, AgentStateValues } from './agent-state.js';
export { FINAL_STATUSES, type JournalEntry, type JournalStatus } from './command-journal.js';
export type { ConnectorSnapshot } from './connector-store.js';
export type { Identity, StoredToken } from './identity-store.js';
export { AGENT_SCHEMA_VERSION, migrateAgentStore } from './migrations.js';
export type { StoredUpdate, UpdateParams } from './update-store.js';

type Db = Database.Database;

export const AGENT_DB_FILE = 'agent.sqlite';

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

export interface AgentStore
  extends IdentityStore,
    PendingSecretStore,
    ControlStore,
    CommandJournal,
    SessionStore,
    ConnectorStore,
    AgentStateStore,
    UpdateStore {
  readonly db: Db;
  readonly file: string;
  readonly outbox: Outbox;
  transaction<T>(fn: () => T): T;

  enqueueEvents(events: readonly DeviceEvent[]): void;
  enqueue(items: readonly OutboxItemInput[]): void;

  close(): void;
}

export function agentStoreFile(dataDir: string): string {
  return path.join(dataDir, AGENT_DB_FILE);
}

export function openAgentStore(dataDir: string, options: OpenOptions = {}): AgentStore {
  const now = options.now ?? Date.now;
  const file = options.memory ? ':memory:' : agentStoreFile(dataDir);
  const db = openDatabase(dataDir, file, options);
  const nowIso = () => iso(now());
  const outbox = createOutbox(db, {
    ...(options.outboxCap ? { cap: options.outboxCap } : {}),
    now: () => new Date(now()),
  });
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

  return {
    db,
    file,
    outbox,
    transaction: (fn) => db.transaction(fn)(),
    ...createIdentityStore(db, w),
    ...createPendingSecretStore(w),
    ...createConnectorStore(db, w, nowIso),
    ...createControlStore(db, w, nowIso),
    ...createCommandJournal(db, w, outbox),
    ...createSessionStore(db, w, outbox),
    ...createAgentStateStore(db, w, nowIso),
    ...createUpdateStore(db, w, outbox),

    enqueueEvents(events) {
      if (events.length > 0) outbox.enqueue(eventItems(events));
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
}

/** The database behind a store: in memory, read-only, or the private WAL file at its current schema. */
function openDatabase(dataDir: string, file: string, options: OpenOptions): Db {
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
  return db;
}

/** Creates the file 0600 before SQLite does, so the secret is never readable by others, not even briefly. */
function ensurePrivateFile(file: string): void {
  if (!existsSync(file)) closeSync(openSync(file, 'a', 0o600));
  chmodSync(file, 0o600);
  for (const side of [`${file}-wal`, `${file}-shm`]) if (existsSync(side)) chmodSync(side, 0o600);
}
