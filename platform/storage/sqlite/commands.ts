import type Database from 'better-sqlite3';
import type { ChargingSchedule } from '../../../shared/index.js';
import { decideStatusReport, mayCancel, REASON } from '../../domain/command-lifecycle.js';
import { controlValues, queuedCommandRow, toPendingCommand } from '../command-rows.js';
import { pageOffset } from '../page.js';
import type {
  CommandHistoryRow,
  CommandRepository,
  CommandRow,
  ControlRow,
  ControlWithCommands,
  NewCommand,
  ScheduleRow,
  StatusReportOutcome,
} from '../store.js';
import { createSqliteDeviceCommands } from './device-commands.js';
import type { SqlReader } from './reader.js';
import { type RawCommand, type RawControl, toCommand, toControl } from './rows.js';

/**
 * Commands, schedules and flexibility controls (DESIGN.md §5): every change one transaction. The operator's
 * list of a device's commands reads through `reader` (device-commands.ts).
 */
export interface SqliteCommands extends CommandRepository {
  /**
   * For other aggregates' transactions (updates): queues commands, or cancels those still queued, inside the
   * caller's transaction. Commands are created only through here, so the pending-device set stays true.
   */
  inTransaction: {
    insert(commands: readonly NewCommand[], nowMs: number): CommandRow[];
    cancelQueued(commandIds: readonly string[], reason: string, nowMs: number): CommandRow[];
  };
}

export function createSqliteCommands(db: Database.Database, reader: SqlReader): SqliteCommands {
  const stmt = {
    insertCommand: db.prepare(
      `INSERT INTO commands (command_id, device_id, command, params, status, expiry_ms, created_ms, updated_ms,
         control_id, client_id) VALUES (?, ?, ?, ?, 'queued', ?, ?, ?, ?, ?)`,
    ),
    insertHistory: db.prepare(
      'INSERT INTO command_history (command_id, status, at_ms, reason) VALUES (?, ?, ?, ?)',
    ),
    // Pinned to the partial index of pending commands: the planner would otherwise take the (ordered) index
    // of all a device's commands and walk its whole history on the charger path.
    pendingCommands: db.prepare(
      `SELECT * FROM commands INDEXED BY commands_pending
       WHERE device_id = ? AND status IN ('queued', 'delivered') AND expiry_ms > ?
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
    // A report without a result keeps the one an earlier report stored.
    reportStatus: db.prepare(
      `UPDATE commands SET status = ?, reason = COALESCE(?, reason), result = COALESCE(?, result), updated_ms = ?
       WHERE command_id = ?`,
    ),
    // A connector still only in the live state (learned from telemetry, not written out yet) gets its row here.
    setAvailable: db.prepare(
      `INSERT INTO connectors (device_id, connector_id, available) VALUES (?, ?, ?)
       ON CONFLICT (device_id, connector_id) DO UPDATE SET available = excluded.available`,
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
      `UPDATE controls SET status = 'completed' WHERE status = 'executing' AND ends_ms <= ? RETURNING *`,
    ),
    countSchedules: db.prepare(
      'SELECT COUNT(*) AS n FROM schedules WHERE device_id = ? AND connector_id = ?',
    ),
    listSchedules: db.prepare(
      `SELECT body FROM schedules WHERE device_id = ? AND connector_id = ? ORDER BY schedule_id LIMIT ? OFFSET ?`,
    ),
    deleteSchedule: db.prepare(
      'DELETE FROM schedules WHERE device_id = ? AND connector_id = ? AND schedule_id = ?',
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
      const row = queuedCommandRow(c, nowMs);
      stmt.insertCommand.run(
        row.command_id,
        row.device_id,
        row.command,
        JSON.stringify(row.params),
        row.expiry_ms,
        nowMs,
        nowMs,
        row.control_id,
        row.client_id,
      );
      stmt.insertHistory.run(row.command_id, 'queued', nowMs, null);
      return row;
    });

  const cancelQueuedNow = (commandIds: readonly string[], reason: string, nowMs: number): CommandRow[] =>
    commandIds.flatMap((id) => {
      const raw = stmt.getCommand.get(id) as RawCommand | undefined;
      if (raw?.status !== 'queued') return [];
      stmt.setCommandStatus.run('cancelled', reason, nowMs, id);
      stmt.insertHistory.run(id, 'cancelled', nowMs, reason);
      return [toCommand({ ...raw, status: 'cancelled', reason, updated_ms: nowMs })];
    });

  return {
    inTransaction: { insert: insertCommandsNow, cancelQueued: cancelQueuedNow },
    ...createSqliteDeviceCommands(reader),
    async enqueueCommands(commands, nowMs) {
      return db.transaction(() => insertCommandsNow(commands, nowMs)).immediate();
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
        }).immediate();
      }
      if (onDelivered) for (const c of delivered) onDelivered(c);
      return rows.map(toPendingCommand);
    },
    async saveSchedule(row: ScheduleRow, command) {
      return db
        .transaction(() => {
          stmt.upsertSchedule.run(
            row.device_id,
            row.connector_id,
            row.schedule.schedule_id,
            JSON.stringify(row.schedule),
            row.updated_ms,
          );
          return insertCommandsNow([command], row.updated_ms)[0]!;
        })
        .immediate();
    },
    async createControl(control: ControlRow, commands) {
      return db
        .transaction(() => {
          stmt.insertControl.run(...controlValues(control));
          return insertCommandsNow(commands, control.created_ms);
        })
        .immediate();
    },
    async getCommand(commandId) {
      const raw = stmt.getCommand.get(commandId) as RawCommand | undefined;
      if (!raw) return undefined;
      return { command: toCommand(raw), history: stmt.commandHistory.all(commandId) as CommandHistoryRow[] };
    },
    async reportCommandStatus(deviceId, commandId, report, nowMs, availabilityOf) {
      return db
        .transaction((): StatusReportOutcome => {
          const raw = stmt.getCommand.get(commandId) as RawCommand | undefined;
          if (!raw || raw.device_id !== deviceId) return { outcome: 'not_found' };
          const decision = decideStatusReport(raw.status, report.status);
          if (decision.kind === 'conflict') return { outcome: 'conflict', status: decision.status };
          if (decision.kind === 'unchanged')
            return { outcome: 'ok', command: toCommand(raw), changed: false };
          const result = report.result === undefined ? null : JSON.stringify(report.result);
          stmt.reportStatus.run(report.status, report.reason ?? null, result, nowMs, commandId);
          stmt.insertHistory.run(commandId, report.status, nowMs, report.reason ?? null);
          const command = toCommand({
            ...raw,
            status: report.status,
            updated_ms: nowMs,
            reason: report.reason ?? raw.reason,
            result: result ?? raw.result,
          });
          const availability = availabilityOf?.(command);
          if (availability)
            stmt.setAvailable.run(deviceId, availability.connector_id, availability.available ? 1 : 0);
          return { outcome: 'ok', command, changed: true };
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
      return (stmt.completeControls.all(nowMs) as RawControl[]).map(toControl);
    },
    async listSchedules(deviceId, connectorId, page, size) {
      const total = (stmt.countSchedules.get(deviceId, connectorId) as { n: number }).n;
      const items = (
        stmt.listSchedules.all(deviceId, connectorId, size, pageOffset(page, size)) as Array<{ body: string }>
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
  };
}
