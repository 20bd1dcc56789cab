import type { PendingCommand } from '../../shared/index.js';
import { toTimestamp } from '../../shared/index.js';
import { newId } from '../domain/ids.js';
import type { CommandRow, ControlRow, NewCommand } from './store.js';

/** Command and control rows as both backends make them (`sqlite/commands.ts`, `postgres/commands.ts`). */

/** A new command as it is queued at `nowMs`, with a fresh id; it keeps the caller's params object. */
export function queuedCommandRow(c: NewCommand, nowMs: number): CommandRow {
  return {
    command_id: newId('cmd'),
    device_id: c.device_id,
    command: c.command,
    params: c.params,
    status: 'queued',
    expiry_ms: c.expiry_ms,
    created_ms: nowMs,
    updated_ms: nowMs,
    control_id: c.control_id ?? null,
    client_id: c.client_id ?? null,
    reason: null,
    result: null,
  };
}

/** A command as its charger receives it. */
export function toPendingCommand(r: CommandRow): PendingCommand {
  return {
    command_id: r.command_id,
    command: r.command,
    params: r.params,
    expiry: toTimestamp(r.expiry_ms),
  };
}

/**
 * A control's values in the column order both backends insert them: control_id, client_id, target_type,
 * target_ids, command, params, status, created_ms, ends_ms, operator_ids (lists and params as JSON).
 */
export function controlValues(control: ControlRow): unknown[] {
  return [
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
  ];
}

/**
 * A device's commands, with or without a status filter (GET …/devices/{device_id}/commands): the count and page
 * statements written for each case, built once, and the arguments each takes before LIMIT/OFFSET.
 */
export function deviceCommandStatements(
  countSql: (withStatus: boolean) => string,
  pageSql: (withStatus: boolean) => string,
) {
  const all = { count: countSql(false), page: pageSql(false) };
  const byStatus = { count: countSql(true), page: pageSql(true) };
  return (deviceId: string, status: string | undefined) =>
    status === undefined ? { ...all, args: [deviceId] } : { ...byStatus, args: [deviceId, status] };
}
