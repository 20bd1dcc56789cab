/**
 * Each update's progress on the charger (DESIGN.md §19), one row per update: the `update` command's params as it
 * came, and the phase it reached. A phase moves in the same transaction that queues its firmware status report,
 * so the charger reports only what it stored and a restart at any step resumes from what it reported.
 */
import type Database from 'better-sqlite3';
import type { CommandParamsOf } from '../../shared/commands.js';
import type { FirmwareStatusReport } from '../../shared/device-api.js';
import type { UpdatePhase } from '../core/update-progress.js';
import type { Outbox } from './outbox.js';

type Db = Database.Database;

export type UpdateParams = CommandParamsOf<'update'>;

export interface StoredUpdate {
  updateId: string;
  commandId: string;
  params: UpdateParams;
  phase: UpdatePhase;
  /** Last download progress reported, percent. */
  progress?: number;
  reason?: string;
  createdAt: string;
  updatedAt: string;
}

export interface UpdateStore {
  updateGet(updateId: string): StoredUpdate | undefined;
  updateOfCommand(commandId: string): StoredUpdate | undefined;
  /** Updates not at a final phase, oldest first. */
  updatesUnfinished(finalPhases: readonly UpdatePhase[]): StoredUpdate[];
  /** Stores a new update at `report.status`, queuing the report; false (nothing stored) when it exists already. */
  updateInsert(
    update: { updateId: string; commandId: string; params: UpdateParams },
    report: FirmwareStatusReport,
  ): boolean;
  /** Moves the update to `report.status` and queues the report, in one transaction. */
  updateMove(updateId: string, report: FirmwareStatusReport, extra?: { reason?: string }): void;
}

interface UpdateRow {
  update_id: string;
  command_id: string;
  manifest: string;
  phase: UpdatePhase;
  progress: number | null;
  reason: string | null;
  created_at: string;
  updated_at: string;
}

function rowToUpdate(row: UpdateRow): StoredUpdate {
  return {
    updateId: row.update_id,
    commandId: row.command_id,
    params: JSON.parse(row.manifest) as UpdateParams,
    phase: row.phase,
    ...(row.progress !== null ? { progress: row.progress } : {}),
    ...(row.reason !== null ? { reason: row.reason } : {}),
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

export function createUpdateStore(
  db: Db,
  write: (sql: string) => Database.Statement,
  outbox: Outbox,
): UpdateStore {
  // Prepared on first use: a technician may open an older store (without the table) read-only.
  const read = (sql: string) => write(sql) as Database.Statement<unknown[], UpdateRow>;
  const byId = (id: string) => read('SELECT * FROM updates WHERE update_id = ?').get(id);
  const byCommand = (id: string) => read('SELECT * FROM updates WHERE command_id = ?').get(id);
  const all = () => read('SELECT * FROM updates ORDER BY created_at, update_id').all();
  const queue = (report: FirmwareStatusReport) =>
    outbox.enqueue([{ kind: 'firmware_status', payload: report, createdAt: new Date(report.timestamp) }]);

  return {
    updateGet(updateId) {
      const row = byId(updateId);
      return row ? rowToUpdate(row) : undefined;
    },
    updateOfCommand(commandId) {
      const row = byCommand(commandId);
      return row ? rowToUpdate(row) : undefined;
    },
    updatesUnfinished(finalPhases) {
      return all()
        .filter((row) => !finalPhases.includes(row.phase))
        .map(rowToUpdate);
    },
    updateInsert(update, report) {
      return db.transaction(() => {
        const inserted = write(
          `INSERT INTO updates (update_id, command_id, manifest, phase, progress, reason, created_at, updated_at)
           VALUES (?, ?, ?, ?, NULL, NULL, ?, ?) ON CONFLICT (update_id) DO NOTHING`,
        ).run(
          update.updateId,
          update.commandId,
          JSON.stringify(update.params),
          report.status,
          report.timestamp,
          report.timestamp,
        ).changes;
        if (inserted === 0) return false;
        queue(report);
        return true;
      })();
    },
    updateMove(updateId, report, extra = {}) {
      db.transaction(() => {
        write(
          `UPDATE updates SET phase = ?, progress = coalesce(?, progress), reason = ?, updated_at = ?
           WHERE update_id = ?`,
        ).run(report.status, report.progress ?? null, extra.reason ?? null, report.timestamp, updateId);
        queue(report);
      })();
    },
  };
}
