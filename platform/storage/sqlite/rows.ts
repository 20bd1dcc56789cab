import {
  type CommandName,
  type CommandStatus,
  TELEMETRY_MEASUREMENTS,
  type TelemetryRecord,
} from '../../../shared/index.js';
import type { DeviceEntry } from '../directory-rows.js';
import type { CommandRow, ConnectorRow, ControlRow, DeviceRow, StoredMeasurements } from '../store.js';

/** Rows as SQLite returns them, and what the repositories make of them. */
export interface RawDevice extends Omit<DeviceRow, 'registered'> {
  registered: number;
}
export interface RawConnector extends Omit<ConnectorRow, 'v2g_capable' | 'available'> {
  v2g_capable: number;
  available: number;
}
export interface RawCommand {
  reason: string | null;
  command_id: string;
  device_id: string;
  command: CommandName;
  params: string;
  status: CommandStatus;
  expiry_ms: number;
  created_ms: number;
  updated_ms: number;
  control_id: string | null;
  client_id: string | null;
  result: string | null;
}

export const DIRECTORY_DEVICE_SQL = `SELECT d.device_id, d.secret_gen, d.secret_sealed, d.pending_since_ms,
  d.require_signature, d.site_id, s.operator_id FROM devices d LEFT JOIN sites s ON s.site_id = d.site_id`;
export interface RawDeviceEntry extends Omit<DeviceEntry, 'require_signature'> {
  require_signature: number;
}
export function toDeviceEntry(raw: RawDeviceEntry): DeviceEntry {
  return { ...raw, require_signature: raw.require_signature === 1 };
}

export function toDevice(raw: RawDevice): DeviceRow {
  return { ...raw, registered: raw.registered === 1 };
}
export function toConnector(raw: RawConnector): ConnectorRow {
  return { ...raw, v2g_capable: raw.v2g_capable === 1, available: raw.available === 1 };
}
export function toCommand(raw: RawCommand): CommandRow {
  return {
    ...raw,
    params: JSON.parse(raw.params) as Record<string, unknown>,
    result: raw.result === null ? null : (JSON.parse(raw.result) as Record<string, unknown>),
  };
}
export interface RawControl {
  control_id: string;
  client_id: string;
  target_type: ControlRow['target_type'];
  target_ids: string;
  command: CommandName;
  params: string;
  status: ControlRow['status'];
  created_ms: number;
  ends_ms: number;
  operator_ids: string;
}
export function toControl(raw: RawControl): ControlRow {
  return {
    ...raw,
    target_ids: JSON.parse(raw.target_ids) as string[],
    params: JSON.parse(raw.params) as Record<string, unknown>,
    operator_ids: JSON.parse(raw.operator_ids) as string[],
  };
}

export type TelemetryRow = StoredMeasurements & {
  device_id: string;
  connector_id: number;
  ts_ms: number;
  state: string;
  phase_details: string | null;
  received_ms: number;
};
export function telemetryRow(deviceId: string, t: TelemetryRecord, receivedMs: number): TelemetryRow {
  const row = {
    device_id: deviceId,
    connector_id: t.connector_id,
    ts_ms: Date.parse(t.timestamp),
    state: t.state,
    phase_details: t.phase_details ? JSON.stringify(t.phase_details) : null,
    received_ms: receivedMs,
  } as TelemetryRow;
  for (const m of TELEMETRY_MEASUREMENTS) row[m] = t[m] ?? null;
  return row;
}
