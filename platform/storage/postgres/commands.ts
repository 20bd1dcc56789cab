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
  StatusReportOutcome,
} from '../store.js';
import type { PgDatabase, Sql } from './database.js';
import { createPgDeviceCommands } from './device-commands.js';

/** A `commands` row as PostgreSQL returns it (JSONB parsed, BIGINT as numbers), maybe with extra columns. */
type RawCommand = CommandRow;

/** Just the fields of a command: queries may return helper columns beside them. */
function toCommand(r: RawCommand): CommandRow {
  return {
    command_id: r.command_id,
    device_id: r.device_id,
    command: r.command,
    params: r.params,
    status: r.status,
    expiry_ms: r.expiry_ms,
    created_ms: r.created_ms,
    updated_ms: r.updated_ms,
    control_id: r.control_id,
    client_id: r.client_id,
    reason: r.reason,
    result: r.result,
  };
}

/**
 * Identifiers sort byte-wise, as SQLite's BINARY collation does, whatever the database's collation: pages and
 * lists come out in the same order on both backends.
 */
const C = 'COLLATE "C"';
/**
 * SQLite breaks ties of equal creation times by rowid (insertion order); PostgreSQL has no such order, so
 * ties go by command id: deterministic, though not insertion order (ids are random).
 */
const COMMAND_ORDER = `created_ms, command_id ${C}`;

/**
 * Inserts `commands` as queued at `nowMs`, each with its first history entry, in one statement. Each new
 * command keeps the caller's params object, as the SQLite backend returns it.
 */
export async function insertCommands(
  sql: Sql,
  commands: readonly NewCommand[],
  nowMs: number,
): Promise<CommandRow[]> {
  if (commands.length === 0) return [];
  const rows = commands.map((c) => queuedCommandRow(c, nowMs));
  await sql.query(
    `WITH input AS (
       SELECT * FROM jsonb_to_recordset($1::jsonb) AS r(command_id text, device_id text, command text,
         params jsonb, expiry_ms bigint, control_id text, client_id text)
     ), inserted AS (
       INSERT INTO commands (command_id, device_id, command, params, status, expiry_ms, created_ms, updated_ms,
         control_id, client_id)
       SELECT command_id, device_id, command, params, 'queued', expiry_ms, $2::bigint, $2::bigint, control_id,
         client_id FROM input
       RETURNING command_id
     )
     INSERT INTO command_history (command_id, status, at_ms, reason)
     SELECT command_id, 'queued', $2::bigint, NULL FROM inserted`,
    [JSON.stringify(rows), nowMs],
  );
  return rows;
}

/**
 * Moves every command `lockedSql` selects to `status` with `reason` at `nowMs`, with its history entry, in
 * one statement. `lockedSql` must select `command_id, reason` ordered by command id `FOR UPDATE`: rows are
 * locked in one order by every statement here that locks several (none deadlocks another), and a row changed meanwhile is re-checked
 * against its condition before it moves. Returns the moved rows, with the reason they had before.
 */
async function moveLocked(
  sql: Sql,
  lockedSql: string,
  values: readonly unknown[],
  change: { status: 'expired' | 'cancelled'; reason: string; nowMs: number },
): Promise<Array<RawCommand & { prior_reason: string | null }>> {
  const n = values.length;
  return sql.query(
    `WITH locked AS (${lockedSql}), moved AS (
       UPDATE commands c SET status = $${n + 1}, reason = $${n + 2}, updated_ms = $${n + 3}::bigint
       FROM locked WHERE c.command_id = locked.command_id
       RETURNING c.*, locked.reason AS prior_reason
     ), history AS (
       INSERT INTO command_history (command_id, status, at_ms, reason)
       SELECT command_id, status, updated_ms, reason FROM moved
     )
     SELECT * FROM moved`,
    [...values, change.status, change.reason, change.nowMs],
  );
}

/** Cancels those of `commandIds` still queued, inside the caller's transaction (an update's cancellation). */
export async function cancelQueuedCommands(
  sql: Sql,
  commandIds: readonly string[],
  reason: string,
  nowMs: number,
): Promise<CommandRow[]> {
  if (commandIds.length === 0) return [];
  const moved = await moveLocked(
    sql,
    `SELECT command_id, reason FROM commands WHERE command_id = ANY($1::text[]) AND status = 'queued'
     ORDER BY command_id ${C} FOR UPDATE`,
    [commandIds],
    { status: 'cancelled', reason, nowMs },
  );
  return moved.sort(byCreation).map(toCommand);
}

/** Commands, schedules and flexibility controls on PostgreSQL: each change one atomic compare-and-set. */
export function createPgCommands(db: PgDatabase): CommandRepository {
  // Unlike SQLite, no in-process set of devices that may have pending commands: another instance may queue
  // them. The pending read is one index lookup (`commands_pending`).
  const pendingOf = (deviceId: string, nowMs: number) =>
    db.query<RawCommand>(
      `SELECT * FROM commands WHERE device_id = $1 AND status IN ('queued', 'delivered') AND expiry_ms > $2
       ORDER BY ${COMMAND_ORDER}`,
      [deviceId, nowMs],
    );

  /**
   * Locks the device's pending commands, marks the queued ones delivered and records that, in one statement
   * (retried by `tx` on a deadlock). Returns every pending command as it is after the change, in order, with
   * a flag on those delivered now. A command another instance changed meanwhile is re-checked after the lock.
   */
  const deliver = (deviceId: string, nowMs: number) =>
    db.tx((sql) =>
      sql.query<RawCommand & { delivered_now: boolean }>(
        `WITH locked AS (
           SELECT * FROM commands
           WHERE device_id = $1 AND status IN ('queued', 'delivered') AND expiry_ms > $2
           ORDER BY command_id ${C} FOR UPDATE
         ), delivered AS (
           -- A heartbeat read its time before waiting for its own write; a command queued meanwhile is
           -- delivered by it, but never before it existed: the history stays in time order.
           UPDATE commands c SET status = 'delivered', updated_ms = GREATEST($2::bigint, c.updated_ms)
           FROM locked WHERE c.command_id = locked.command_id AND locked.status = 'queued'
           RETURNING c.command_id, c.status, c.updated_ms
         ), history AS (
           INSERT INTO command_history (command_id, status, at_ms, reason)
           SELECT command_id, 'delivered', updated_ms, NULL FROM delivered
         )
         SELECT locked.command_id, locked.device_id, locked.command, locked.params,
           COALESCE(d.status, locked.status) AS status, locked.expiry_ms, locked.created_ms,
           COALESCE(d.updated_ms, locked.updated_ms) AS updated_ms, locked.control_id, locked.client_id,
           locked.reason, locked.result, d.command_id IS NOT NULL AS delivered_now
         FROM locked LEFT JOIN delivered d USING (command_id)
         ORDER BY locked.created_ms, locked.command_id ${C}`,
        [deviceId, nowMs],
      ),
    );

  return {
    ...createPgDeviceCommands(db),
    async enqueueCommands(commands, nowMs) {
      return insertCommands(db, commands, nowMs);
    },
    async takePendingCommands(deviceId, nowMs, onDelivered) {
      // Most polls find nothing new to deliver: one read, no transaction.
      const seen = await pendingOf(deviceId, nowMs);
      if (!seen.some((r) => r.status === 'queued')) return seen.map(toPendingCommand);
      const rows = await deliver(deviceId, nowMs);
      // After commit: whoever hears of a delivery can already read it.
      if (onDelivered) for (const r of rows) if (r.delivered_now) onDelivered(toCommand(r));
      return rows.map(toPendingCommand);
    },
    async saveSchedule(row, command) {
      return db.tx(async (sql) => {
        await sql.query(
          `INSERT INTO schedules (device_id, connector_id, schedule_id, body, updated_ms)
           VALUES ($1, $2, $3, $4::jsonb, $5)
           ON CONFLICT (device_id, connector_id, schedule_id) DO UPDATE SET body = excluded.body,
             updated_ms = excluded.updated_ms`,
          [
            row.device_id,
            row.connector_id,
            row.schedule.schedule_id,
            JSON.stringify(row.schedule),
            row.updated_ms,
          ],
        );
        const [queued] = await insertCommands(sql, [command], row.updated_ms);
        if (!queued) throw new Error('saveSchedule: no command queued');
        return queued;
      });
    },
    async createControl(control, commands) {
      return db.tx(async (sql) => {
        await sql.query(
          `INSERT INTO controls (control_id, client_id, target_type, target_ids, command, params, status,
             created_ms, ends_ms, operator_ids) VALUES ($1, $2, $3, $4::jsonb, $5, $6::jsonb, $7, $8, $9, $10::jsonb)`,
          controlValues(control),
        );
        return insertCommands(sql, commands, control.created_ms);
      });
    },
    async getCommand(commandId) {
      // One statement: the command and its history from the same snapshot.
      const [raw] = await db.query<RawCommand & { history: CommandHistoryRow[] }>(
        `SELECT c.*, COALESCE((
           SELECT json_agg(json_build_object('status', h.status, 'at_ms', h.at_ms, 'reason', h.reason)
             ORDER BY h.at_ms, h.id)
           FROM command_history h WHERE h.command_id = c.command_id), '[]'::json) AS history
         FROM commands c WHERE c.command_id = $1`,
        [commandId],
      );
      if (!raw) return undefined;
      const history = raw.history.map((h) => ({ status: h.status, at_ms: h.at_ms, reason: h.reason }));
      return { command: toCommand(raw), history };
    },
    async reportCommandStatus(deviceId, commandId, report, nowMs, availabilityOf) {
      return db.tx(async (sql): Promise<StatusReportOutcome> => {
        const [raw] = await sql.query<RawCommand>('SELECT * FROM commands WHERE command_id = $1 FOR UPDATE', [
          commandId,
        ]);
        if (!raw || raw.device_id !== deviceId) return { outcome: 'not_found' };
        const decision = decideStatusReport(raw.status, report.status);
        if (decision.kind === 'conflict') return { outcome: 'conflict', status: decision.status };
        if (decision.kind === 'unchanged') return { outcome: 'ok', command: toCommand(raw), changed: false };
        const reason = report.reason ?? null;
        const result = report.result ?? null;
        await setStatus(sql, commandId, report.status, reason, nowMs, result);
        const command = toCommand({
          ...raw,
          status: report.status,
          updated_ms: nowMs,
          reason: reason ?? raw.reason,
          result: result ?? raw.result,
        });
        const availability = availabilityOf?.(command);
        if (availability) {
          await sql.query(
            `INSERT INTO connectors (device_id, connector_id, available) VALUES ($1, $2, $3)
             ON CONFLICT (device_id, connector_id) DO UPDATE SET available = excluded.available`,
            [deviceId, availability.connector_id, availability.available],
          );
        }
        return { outcome: 'ok', command, changed: true };
      });
    },
    async cancelCommand(commandId, nowMs) {
      return db.tx(async (sql): Promise<CommandRow | 'not_found' | 'conflict'> => {
        const [raw] = await sql.query<RawCommand>('SELECT * FROM commands WHERE command_id = $1 FOR UPDATE', [
          commandId,
        ]);
        if (!raw) return 'not_found';
        if (!mayCancel(raw.status)) return 'conflict';
        await setStatus(sql, commandId, 'cancelled', REASON.cancelledByOperator, nowMs);
        // As SQLite returns it: the new status and time, the reason the row had before.
        return toCommand({ ...raw, status: 'cancelled', updated_ms: nowMs });
      });
    },
    async expireCommands(nowMs) {
      const rows = await db.tx((sql) =>
        moveLocked(
          sql,
          `SELECT command_id, reason FROM commands WHERE status IN ('queued', 'delivered') AND expiry_ms <= $1
           ORDER BY command_id ${C} FOR UPDATE`,
          [nowMs],
          { status: 'expired', reason: REASON.expired, nowMs },
        ),
      );
      // In SQLite's order (its expiry index), and with the reason the row had before, as SQLite returns it.
      return rows
        .sort((a, b) => a.expiry_ms - b.expiry_ms || byCreation(a, b))
        .map((r) => toCommand({ ...r, reason: r.prior_reason }));
    },
    async countCommandsByStatus() {
      const out: Record<string, number> = {};
      const rows = await db.query<{ status: string; n: number }>(
        'SELECT status, COUNT(*) AS n FROM commands GROUP BY status',
      );
      for (const r of rows) out[r.status] = r.n;
      return out;
    },
    async getControl(controlId) {
      // One statement: the control and its commands from the same snapshot.
      const [raw] = await db.query<
        ControlWithCommands['control'] & { commands: ControlWithCommands['commands'] }
      >(
        `SELECT ctl.*, COALESCE((
           SELECT json_agg(json_build_object('device_id', c.device_id, 'command_id', c.command_id,
             'status', c.status) ORDER BY c.device_id ${C}, c.created_ms, c.command_id ${C})
           FROM commands c WHERE c.control_id = ctl.control_id), '[]'::json) AS commands
         FROM controls ctl WHERE ctl.control_id = $1`,
        [controlId],
      );
      if (!raw) return undefined;
      const { commands, ...control } = raw;
      return { control, commands };
    },
    async cancelControl(controlId, reversals, nowMs) {
      return db.tx(async (sql) => {
        const won = await sql.query(
          `UPDATE controls SET status = 'cancelled' WHERE control_id = $1 AND status = 'executing'
           RETURNING control_id`,
          [controlId],
        );
        if (won.length !== 1) return { cancelled: [], queued: [] };
        const moved = await moveLocked(
          sql,
          `SELECT command_id, reason FROM commands WHERE control_id = $1 AND status = 'queued'
           ORDER BY command_id ${C} FOR UPDATE`,
          [controlId],
          { status: 'cancelled', reason: REASON.controlCancelled, nowMs },
        );
        const cancelled = moved.sort(byCreation).map(toCommand);
        const queued = await insertCommands(sql, reversals, nowMs);
        return { cancelled, queued };
      });
    },
    async completeControls(nowMs) {
      return db.query<ControlRow>(
        `UPDATE controls SET status = 'completed' WHERE status = 'executing' AND ends_ms <= $1 RETURNING *`,
        [nowMs],
      );
    },
    async listSchedules(deviceId, connectorId, page, size) {
      const [count] = await db.query<{ n: number }>(
        'SELECT COUNT(*) AS n FROM schedules WHERE device_id = $1 AND connector_id = $2',
        [deviceId, connectorId],
      );
      const rows = await db.query<{ body: ChargingSchedule }>(
        `SELECT body FROM schedules WHERE device_id = $1 AND connector_id = $2 ORDER BY schedule_id ${C}
         LIMIT $3 OFFSET $4`,
        [deviceId, connectorId, size, pageOffset(page, size)],
      );
      return { total: count?.n ?? 0, page, size, items: rows.map((r) => r.body) };
    },
    async deleteSchedule(deviceId, connectorId, scheduleId, command, nowMs) {
      return db.tx(async (sql) => {
        const gone = await sql.query(
          `DELETE FROM schedules WHERE device_id = $1 AND connector_id = $2 AND schedule_id = $3
           RETURNING schedule_id`,
          [deviceId, connectorId, scheduleId],
        );
        if (gone.length === 0) return undefined;
        const [queued] = await insertCommands(sql, [command], nowMs);
        return queued;
      });
    },
  };
}

/** Creation order, ties by command id (byte-wise, as `COLLATE "C"`). */
function byCreation(a: CommandRow, b: CommandRow): number {
  if (a.created_ms !== b.created_ms) return a.created_ms - b.created_ms;
  return a.command_id < b.command_id ? -1 : a.command_id > b.command_id ? 1 : 0;
}

/**
 * Sets a locked command's status (keeping its reason, and its result, when none is given) and records the
 * change.
 */
async function setStatus(
  sql: Sql,
  commandId: string,
  status: string,
  reason: string | null,
  nowMs: number,
  result: Record<string, unknown> | null = null,
) {
  await sql.query(
    `WITH changed AS (
       UPDATE commands SET status = $2, reason = COALESCE($3, reason), updated_ms = $4::bigint,
         result = COALESCE($5::jsonb, result)
       WHERE command_id = $1 RETURNING command_id
     )
     INSERT INTO command_history (command_id, status, at_ms, reason)
     SELECT command_id, $2, $4::bigint, $3 FROM changed`,
    [commandId, status, reason, nowMs, result === null ? null : JSON.stringify(result)],
  );
}
