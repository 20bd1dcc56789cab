import type { Connector, Device } from '../../shared/index.js';
import { toTimestamp } from '../../shared/index.js';
import { connectorStatus } from '../domain/connector-status.js';
import type { ConnectorRow, DeviceRow } from '../storage/store.js';

/**
 * The operator's view of a connector: live state, or `unavailable` while its device is offline or while it is out
 * of service with no session on it (domain/connector-status.ts).
 */
export function connectorView(row: ConnectorRow, deviceOnline: boolean): Connector {
  const c: Connector = {
    connector_id: row.connector_id,
    status: connectorStatus(row.state, deviceOnline, row.available),
  };
  if (row.power !== null) c.power = row.power;
  if (row.voltage !== null) c.voltage = row.voltage;
  if (row.current !== null) c.current = row.current;
  c.energy_delivered = row.energy_delivered ?? 0;
  if (row.soc !== null) c.soc = row.soc;
  if (row.temperature !== null) c.temperature = row.temperature;
  if (row.last_telemetry_ms !== null) c.last_telemetry_time = toTimestamp(row.last_telemetry_ms);
  if (row.max_power_kw !== null) c.max_power_kw = row.max_power_kw;
  c.v2g_capable = row.v2g_capable;
  c.available = row.available;
  return c;
}

export function deviceView(row: DeviceRow, connectors: readonly ConnectorRow[], online: boolean): Device {
  const d: Device = {
    device_id: row.device_id,
    sn: row.sn,
    status: online ? 'online' : 'offline',
    connectors: connectors.map((c) => connectorView(c, online)),
  };
  if (row.model !== null) d.model = row.model;
  if (row.manufacturer !== null) d.manufacturer = row.manufacturer;
  if (row.firmware_version !== null) d.firmware_version = row.firmware_version;
  if (row.agent_version !== null) d.agent_version = row.agent_version;
  if (row.last_heartbeat_ms !== null) d.last_heartbeat = toTimestamp(row.last_heartbeat_ms);
  if (row.site_id !== null) d.site_id = row.site_id;
  return d;
}

/** Groups connector rows by device, keeping each device's connector order. */
export function connectorViewsByDevice(rows: readonly ConnectorRow[]): Map<string, ConnectorRow[]> {
  const map = new Map<string, ConnectorRow[]>();
  for (const r of rows) {
    const list = map.get(r.device_id);
    if (list) list.push(r);
    else map.set(r.device_id, [r]);
  }
  return map;
}
