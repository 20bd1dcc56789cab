/**
 * The agent's outbox: everything waiting to reach the platform, in SQLite so that it survives a reboot and
 * an outage. Bounded by items and bytes; when full, `core/outbox-policy.ts` decides what is given up, and the
 * drops are counted (persistently, for diagnostics).
 *
 * The caller owns the database handle (one agent store, several tables) and calls `migrateOutbox` first.
 * Writes are batched: one `enqueue` is one transaction, which spares the charger's flash.
 */
import type BetterSqlite3 from 'better-sqlite3';
import {
  isOverCap,
  OUTBOX_KINDS,
  type OutboxCap,
  type OutboxKind,
  type OutboxUsage,
  planDrops,
  type QueuedItem,
} from '../core/outbox-policy.js';

type Db = BetterSqlite3.Database;

/** About three days of 5-second telemetry for one busy connector, on a few MiB of flash. */
export const DEFAULT_OUTBOX_CAP: OutboxCap = { maxItems: 50_000, maxBytes: 16 * 1024 * 1024 };

export interface OutboxItemInput {
  kind: OutboxKind;
  payload: unknown;
  /** Defaults to the outbox clock. */
  createdAt?: Date;
}

export interface OutboxItem {
  seq: number;
  kind: OutboxKind;
  payload: unknown;
  createdAt: string;
  bytes: number;
}

export interface EnqueueResult {
  /** Seqs given to the new items, in input order (some may have been dropped at once, see `dropped`). */
  seqs: number[];
  /** Seqs dropped by this enqueue to respect the cap. */
  dropped: number[];
  droppedByKind: Partial<Record<OutboxKind, number>>;
  /** Still over the cap, holding only items that are never dropped. */
  overCap: boolean;
}

export interface Outbox {
  enqueue(items: readonly OutboxItemInput[]): EnqueueResult;
  /** Oldest first, optionally of one kind. */
  peek(limit: number, kind?: OutboxKind): OutboxItem[];
  /** Nothing waits (cheaper than `peek(1)`: asked before every live telemetry send). */
  isEmpty(): boolean;
  /** Removes delivered items; returns how many were still there. */
  ack(seqs: readonly number[]): number;
  size(): OutboxUsage;
  /** Items dropped for space since the outbox was created, by kind (kept across restarts). */
  droppedCounts(): Record<OutboxKind, number>;
  /** Items enqueued through this handle, by kind (in memory: since this process opened the store). */
  enqueuedCounts(): Record<OutboxKind, number>;
}

export interface OutboxOptions {
  cap?: OutboxCap;
  now?: () => Date;
}

export function migrateOutbox(db: Db): void {
  const kinds = OUTBOX_KINDS.map((k) => `'${k}'`).join(', ');
  db.exec(`
    CREATE TABLE IF NOT EXISTS outbox (
      -- AUTOINCREMENT: a seq is never reused, so a late or repeated ack cannot remove a newer item.
      seq INTEGER PRIMARY KEY AUTOINCREMENT,
      kind TEXT NOT NULL CHECK (kind IN (${kinds})),
      payload TEXT NOT NULL,
      bytes INTEGER NOT NULL,
      created_at TEXT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS outbox_kind_seq ON outbox (kind, seq);
    CREATE TABLE IF NOT EXISTS outbox_dropped (
      kind TEXT PRIMARY KEY,
      count INTEGER NOT NULL
    );
  `);
}

interface ItemRow {
  seq: number;
  kind: OutboxKind;
  payload: string;
  bytes: number;
  created_at: string;
}

/** SQLite's default limit on bound parameters is 32766 in current builds; stay far below it. */
const ACK_CHUNK = 500;

export function createOutbox(db: Db, options: OutboxOptions = {}): Outbox {
  const cap = options.cap ?? DEFAULT_OUTBOX_CAP;
  const now = options.now ?? (() => new Date());

  const insert = db.prepare<[OutboxKind, string, number, string]>(
    'INSERT INTO outbox (kind, payload, bytes, created_at) VALUES (?, ?, ?, ?)',
  );
  const usageQuery = db.prepare<[], { items: number; bytes: number }>(
    'SELECT count(*) AS items, coalesce(sum(bytes), 0) AS bytes FROM outbox',
  );
  const oldestOfKind = db.prepare<[OutboxKind], QueuedItem>(
    'SELECT seq, kind, bytes FROM outbox WHERE kind = ? ORDER BY seq',
  );
  const peekAll = db.prepare<[number], ItemRow>('SELECT * FROM outbox ORDER BY seq LIMIT ?');
  const anyQueued = db.prepare<[], number>('SELECT EXISTS (SELECT 1 FROM outbox)').pluck();
  const peekKind = db.prepare<[OutboxKind, number], ItemRow>(
    'SELECT * FROM outbox WHERE kind = ? ORDER BY seq LIMIT ?',
  );
  const countDrops = db.prepare<[OutboxKind, number]>(
    'INSERT INTO outbox_dropped (kind, count) VALUES (?, ?) ON CONFLICT (kind) DO UPDATE SET count = count + excluded.count',
  );
  const dropCounts = db.prepare<[], { kind: OutboxKind; count: number }>(
    'SELECT kind, count FROM outbox_dropped',
  );

  // Whether anything waits is asked before every live telemetry send (and the size by monitoring): answered
  // from memory while nothing was queued since the table was last seen empty. Only this handle writes the
  // outbox; an enqueue clears the flag even if its transaction is later rolled back, which costs one query.
  let knownEmpty = false;

  function size(): OutboxUsage {
    if (knownEmpty) return { items: 0, bytes: 0 };
    const row = usageQuery.get();
    return { items: row?.items ?? 0, bytes: row?.bytes ?? 0 };
  }

  function deleteSeqs(seqs: readonly number[]): number {
    let deleted = 0;
    for (let i = 0; i < seqs.length; i += ACK_CHUNK) {
      const chunk = seqs.slice(i, i + ACK_CHUNK);
      const placeholders = chunk.map(() => '?').join(', ');
      deleted += db.prepare(`DELETE FROM outbox WHERE seq IN (${placeholders})`).run(...chunk).changes;
    }
    return deleted;
  }

  // Streams a kind's items from disk only when the policy asks for them.
  function* queuedOfKind(kind: OutboxKind): Generator<QueuedItem> {
    yield* oldestOfKind.iterate(kind);
  }

  const enqueued = Object.fromEntries(OUTBOX_KINDS.map((k) => [k, 0])) as Record<OutboxKind, number>;

  const enqueueTransaction = db.transaction((items: readonly OutboxItemInput[]): EnqueueResult => {
    const createdDefault = now().toISOString();
    const seqs = items.map((item) => {
      const payload = JSON.stringify(item.payload);
      if (payload === undefined) throw new TypeError(`outbox payload of kind ${item.kind} is not JSON`);
      const createdAt = item.createdAt ? item.createdAt.toISOString() : createdDefault;
      return Number(insert.run(item.kind, payload, Buffer.byteLength(payload), createdAt).lastInsertRowid);
    });
    const plan = planDrops(size(), cap, {
      telemetry: queuedOfKind('telemetry'),
      event: queuedOfKind('event'),
    });
    if (plan.drop.length > 0) {
      deleteSeqs(plan.drop);
      for (const [kind, count] of Object.entries(plan.droppedByKind) as [OutboxKind, number][]) {
        countDrops.run(kind, count);
      }
    }
    return { seqs, dropped: plan.drop, droppedByKind: plan.droppedByKind, overCap: plan.overCap };
  });

  const ackTransaction = db.transaction((seqs: readonly number[]) => deleteSeqs(seqs));

  return {
    enqueue(items) {
      if (items.length === 0)
        return { seqs: [], dropped: [], droppedByKind: {}, overCap: isOverCap(size(), cap) };
      knownEmpty = false;
      const result = enqueueTransaction(items);
      for (const item of items) enqueued[item.kind] += 1;
      return result;
    },
    peek(limit, kind) {
      const rows = kind === undefined ? peekAll.all(limit) : peekKind.all(kind, limit);
      return rows.map((row) => ({
        seq: row.seq,
        kind: row.kind,
        payload: JSON.parse(row.payload) as unknown,
        createdAt: row.created_at,
        bytes: row.bytes,
      }));
    },
    isEmpty() {
      if (!knownEmpty) knownEmpty = anyQueued.get() === 0;
      return knownEmpty;
    },
    ack(seqs) {
      if (seqs.length === 0) return 0;
      return ackTransaction(seqs);
    },
    size,
    droppedCounts() {
      const counts = Object.fromEntries(OUTBOX_KINDS.map((k) => [k, 0])) as Record<OutboxKind, number>;
      for (const row of dropCounts.all()) counts[row.kind] = row.count;
      return counts;
    },
    enqueuedCounts: () => ({ ...enqueued }),
  };
}
