/**
 * The command journal: every command the platform delivered, from `received` to the status the agent
 * reported. A command is journaled before it is acted on, and its status moves in the same transaction that
 * queues the report, so the agent acknowledges only what it has stored and a redelivery is recognised.
 */
import type Database from 'better-sqlite3';
import type { ReportedCommandStatus } from '../../shared/device-api.js';
import { type CommandReport, commandStatusItems } from '../core/outbox-payloads.js';
import type { Outbox } from './outbox.js';

type Db = Database.Database;

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

export interface CommandJournal {
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
    reports: readonly CommandReport[],
    at: string,
    also?: () => void,
  ): void;
  pruneJournal(expiredBefore: string): number;
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

/** `write` prepares a statement on first use (a read-only store never gets that far). */
export function createCommandJournal(
  db: Db,
  write: (sql: string) => Database.Statement,
  outbox: Outbox,
): CommandJournal {
  const q = {
    journal: db.prepare('SELECT * FROM commands WHERE command_id = ?'),
    unfinished: db.prepare(
      "SELECT * FROM commands WHERE status IN ('received', 'accepted') ORDER BY received_at, command_id",
    ),
    recent: db.prepare('SELECT * FROM commands ORDER BY received_at DESC, command_id DESC LIMIT ?'),
  };
  return {
    journalInsert(entry, at) {
      return (
        write(
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
        write('UPDATE commands SET status = ?, reason = ?, updated_at = ? WHERE command_id = ?').run(
          last.status,
          last.reason ?? null,
          at,
          commandId,
        );
        outbox.enqueue(commandStatusItems(commandId, reports, at));
      })();
    },
    pruneJournal(expiredBefore) {
      return write(
        `DELETE FROM commands WHERE expiry < ? AND status IN ('rejected', 'succeeded', 'failed')`,
      ).run(expiredBefore).changes;
    },
  };
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
