import type { UpdateDeviceState } from '../../shared/index.js';
import type { UpdateDeviceObservation, UpdateDeviceRow, UpdateRow } from './update-repository.js';

/** Update rows as both backends store and read them (`sqlite/updates.ts`, `postgres/updates.ts`). */

export const UPDATE_COLUMNS =
  'update_id, operator_id, client_id, artifact_id, artifact_kind, artifact_version, target_type, target_ids, ' +
  'install, install_window, rollout, status, reason, current_batch, waived_batch, created_ms, updated_ms';

export const UPDATE_DEVICE_COLUMNS =
  'update_id, device_id, batch, state, command_id, version_before, version_after, reason, state_ms, updated_ms';

/** An `updates` row as read: its JSON columns as text (SQLite) or parsed (PostgreSQL's JSONB). */
export type RawUpdate = Omit<UpdateRow, 'target_ids' | 'window' | 'rollout'> & {
  target_ids: string | string[];
  install_window: string | UpdateRow['window'];
  rollout: string | UpdateRow['rollout'];
};

const parsed = <T>(value: string | T): T => (typeof value === 'string' ? (JSON.parse(value) as T) : value);

export function toUpdate(raw: RawUpdate): UpdateRow {
  return {
    update_id: raw.update_id,
    operator_id: raw.operator_id,
    client_id: raw.client_id,
    artifact_id: raw.artifact_id,
    artifact_kind: raw.artifact_kind,
    artifact_version: raw.artifact_version,
    target_type: raw.target_type,
    target_ids: parsed(raw.target_ids),
    install: raw.install,
    window: raw.install_window === null ? null : parsed(raw.install_window),
    rollout: parsed(raw.rollout),
    status: raw.status,
    reason: raw.reason,
    current_batch: Number(raw.current_batch),
    waived_batch: Number(raw.waived_batch),
    created_ms: Number(raw.created_ms),
    updated_ms: Number(raw.updated_ms),
  };
}

/** The update's values in UPDATE_COLUMNS order, JSON as text. */
export function updateValues(u: UpdateRow): unknown[] {
  return [
    u.update_id,
    u.operator_id,
    u.client_id,
    u.artifact_id,
    u.artifact_kind,
    u.artifact_version,
    u.target_type,
    JSON.stringify(u.target_ids),
    u.install,
    u.window === null ? null : JSON.stringify(u.window),
    JSON.stringify(u.rollout),
    u.status,
    u.reason,
    u.current_batch,
    u.waived_batch,
    u.created_ms,
    u.updated_ms,
  ];
}

/** A charger's values in UPDATE_DEVICE_COLUMNS order. */
export function updateDeviceValues(d: UpdateDeviceRow): unknown[] {
  return [
    d.update_id,
    d.device_id,
    d.batch,
    d.state,
    d.command_id,
    d.version_before,
    d.version_after,
    d.reason,
    d.state_ms,
    d.updated_ms,
  ];
}

export function toUpdateDevice(raw: UpdateDeviceRow): UpdateDeviceRow {
  return {
    ...raw,
    batch: Number(raw.batch),
    state_ms: Number(raw.state_ms),
    updated_ms: Number(raw.updated_ms),
  };
}

export function toObservation(raw: UpdateDeviceObservation): UpdateDeviceObservation {
  return {
    ...raw,
    last_seen_ms: raw.last_seen_ms === null ? null : Number(raw.last_seen_ms),
    last_heartbeat_ms: raw.last_heartbeat_ms === null ? null : Number(raw.last_heartbeat_ms),
    bad_events: Number(raw.bad_events),
  };
}

/** Chargers that are no longer anything but their outcome. */
export const FINAL_UPDATE_STATES: readonly UpdateDeviceState[] = [
  'succeeded',
  'skipped',
  'failed',
  'rolled_back',
  'cancelled',
];

/** Reason stored on a charger and on its command when an operator cancels the update. */
export const UPDATE_CANCELLED_REASON = 'the update was cancelled';

/**
 * The observation query's select list and joins, the same on both backends but for the placeholders
 * (`$n` or `?`): the charger's command, its latest report about the update, its liveness and the error
 * events it sent since it entered its state. `p(i)` is the i-th placeholder (1: update id);
 * `key` the firmware report's insertion order (SQLite's rowid, PostgreSQL's identity).
 */
export function observationSql(p: (i: number) => string, stateList: string, key: 'rowid' | 'id'): string {
  return `SELECT ud.device_id,
      c.status AS command_status, c.reason AS command_reason,
      r.status AS report_status, r.version AS report_version, r.message AS report_message,
      d.last_seen_ms, d.last_heartbeat_ms, d.reported_status,
      (SELECT COUNT(*) FROM device_events e WHERE e.device_id = ud.device_id
         AND e.severity IN ('error', 'critical') AND e.received_ms >= ud.state_ms) AS bad_events
    FROM update_devices ud
    LEFT JOIN commands c ON c.command_id = ud.command_id
    LEFT JOIN devices d ON d.device_id = ud.device_id
    LEFT JOIN firmware_status r ON r.${key} = (
      SELECT f.${key} FROM firmware_status f WHERE f.update_id = ud.update_id AND f.device_id = ud.device_id
      ORDER BY f.ts_ms DESC, f.received_ms DESC, f.${key} DESC LIMIT 1)
    WHERE ud.update_id = ${p(1)} AND ud.state IN (${stateList})`;
}
