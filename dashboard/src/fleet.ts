import type { Device } from '../../shared/resources.js';

/**
 * The dashboard's picture of the fleet: devices as the API answered them, kept current by the stream's messages.
 * Pure functions over plain data (no DOM, no fetch) so that the rules — what counts as charging, how a telemetry
 * message changes a connector, what an offline charger shows — are tested by table (test/unit/dashboard/).
 */

export interface TelemetryMessage {
  type: 'telemetry';
  device_id: string;
  site_id?: string;
  timestamp: string;
  connector_id: number;
  state: 'idle' | 'charging' | 'discharging' | 'fault';
  power?: number;
  voltage?: number;
  current?: number;
  energy_delivered?: number;
  soc?: number;
  temperature?: number;
}

export interface DeviceStatusMessage {
  type: 'device_status';
  device_id: string;
  status: 'online' | 'offline';
  at: string;
}

export interface CommandStatusMessage {
  type: 'command_status';
  command_id: string;
  device_id: string;
  command: string;
  status: string;
  at: string;
  reason?: string;
}

export type StreamMessage =
  | TelemetryMessage
  | DeviceStatusMessage
  | CommandStatusMessage
  | { type: 'subscribed' | 'pong' }
  | { type: 'error'; code: number; message: string };

export type Devices = ReadonlyMap<string, Device>;

export interface FleetSummary {
  total: number;
  online: number;
  offline: number;
  /** Chargers with at least one connector in that state (a charger may count in several). */
  charging: number;
  discharging: number;
  faulted: number;
  /** kW drawn by charging connectors of online chargers, and kW exported by discharging ones (positive). */
  importKw: number;
  exportKw: number;
}

/** Connectors' live values mean nothing once the charger is offline: it shows their last state, not power. */
export function livePower(device: Device, connector: NonNullable<Device['connectors']>[number]): number {
  if (device.status !== 'online') return 0;
  if (connector.status !== 'charging' && connector.status !== 'discharging') return 0;
  return connector.power ?? 0;
}

export function summarize(devices: Devices): FleetSummary {
  const s: FleetSummary = {
    total: 0,
    online: 0,
    offline: 0,
    charging: 0,
    discharging: 0,
    faulted: 0,
    importKw: 0,
    exportKw: 0,
  };
  for (const d of devices.values()) {
    s.total++;
    if (d.status === 'online') s.online++;
    else s.offline++;
    const connectors = d.connectors ?? [];
    if (connectors.some((c) => c.status === 'fault')) s.faulted++;
    if (d.status !== 'online') continue;
    if (connectors.some((c) => c.status === 'charging')) s.charging++;
    if (connectors.some((c) => c.status === 'discharging')) s.discharging++;
    for (const c of connectors) {
      const p = livePower(d, c);
      if (p > 0) s.importKw += p;
      else s.exportKw -= p;
    }
  }
  s.importKw = round(s.importKw);
  s.exportKw = round(s.exportKw);
  return s;
}

/**
 * A telemetry message applied to its device: the connector takes the message's values (older messages than what
 * is shown are ignored, so a late batch after an outage does not rewind the page), and a charger that sends
 * telemetry is online. Returns the same device when nothing changed.
 */
export function applyTelemetry(device: Device, m: TelemetryMessage): Device {
  const connectors = [...(device.connectors ?? [])];
  const i = connectors.findIndex((c) => c.connector_id === m.connector_id);
  const before = i >= 0 ? connectors[i] : undefined;
  if (before?.last_telemetry_time && Date.parse(before.last_telemetry_time) > Date.parse(m.timestamp)) {
    return device;
  }
  const after = {
    ...(before ?? { connector_id: m.connector_id }),
    connector_id: m.connector_id,
    status: connectorStatus(m.state, before?.available),
    power: m.power,
    voltage: m.voltage,
    current: m.current,
    energy_delivered: m.energy_delivered ?? before?.energy_delivered,
    soc: m.soc,
    temperature: m.temperature,
    last_telemetry_time: m.timestamp,
  };
  if (i >= 0) connectors[i] = after;
  else connectors.push(after);
  connectors.sort((a, b) => a.connector_id - b.connector_id);
  return { ...device, status: 'online', connectors };
}

/**
 * A connector's status from its telemetry state, as the API shows it (DESIGN.md §20): one an operator took out of
 * service (`available: false`) reads `unavailable` while idle; a session still running shows until it ends.
 */
export function connectorStatus(
  state: TelemetryMessage['state'],
  available: boolean | undefined,
): TelemetryMessage['state'] | 'unavailable' {
  return available === false && state === 'idle' ? 'unavailable' : state;
}

export function applyDeviceStatus(device: Device, m: DeviceStatusMessage): Device {
  if (device.status === m.status) return device;
  return { ...device, status: m.status };
}

/** One stream message applied to the fleet; `unknown` names a device the page has not loaded yet. */
export function applyMessage(devices: Devices, m: StreamMessage): { devices: Devices; unknown?: string } {
  if (m.type !== 'telemetry' && m.type !== 'device_status') return { devices };
  const device = devices.get(m.device_id);
  if (!device) return { devices, unknown: m.device_id };
  const next = m.type === 'telemetry' ? applyTelemetry(device, m) : applyDeviceStatus(device, m);
  if (next === device) return { devices };
  const copy = new Map(devices);
  copy.set(m.device_id, next);
  return { devices: copy };
}

export type DeviceActivity = 'charging' | 'discharging' | 'fault' | 'idle' | 'offline';

/** The one word a device table shows for a charger. */
export function activityOf(device: Device): DeviceActivity {
  if (device.status !== 'online') return 'offline';
  const states = (device.connectors ?? []).map((c) => c.status);
  if (states.includes('fault')) return 'fault';
  if (states.includes('discharging')) return 'discharging';
  if (states.includes('charging')) return 'charging';
  return 'idle';
}

const round = (x: number) => Math.round(x * 100) / 100;
