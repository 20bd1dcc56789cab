import * as z from 'zod/mini';
import { ConnectorState, DeviceStatus, Identifier, Soc, Timestamp } from './primitives.js';

export const Connector = z.object({
  connector_id: z.int().check(z.minimum(1)),
  status: ConnectorState,
  power: z.optional(z.number()),
  voltage: z.optional(z.number()),
  current: z.optional(z.number()),
  energy_delivered: z.optional(z.number()),
  soc: z.optional(Soc),
  temperature: z.optional(z.number()),
  last_telemetry_time: z.optional(Timestamp),
  /** Additive: rating and V2G capability as registered. */
  max_power_kw: z.optional(z.number()),
  v2g_capable: z.optional(z.boolean()),
  /**
   * Additive (DESIGN.md §20): false once an operator took the connector out of service. It then starts nothing
   * and shows `status: "unavailable"` as soon as no session runs on it.
   */
  available: z.optional(z.boolean()),
});
export type Connector = z.infer<typeof Connector>;

export const Device = z.object({
  device_id: z.string(),
  sn: z.optional(z.string()),
  model: z.optional(z.string()),
  manufacturer: z.optional(z.string()),
  firmware_version: z.optional(z.string()),
  /** Additive (DESIGN.md §19): the charger agent's release, once the charger said it. */
  agent_version: z.optional(z.string()),
  status: z.optional(DeviceStatus),
  connectors: z.optional(z.array(Connector)),
  last_heartbeat: z.optional(Timestamp),
  site_id: z.optional(z.string()),
});
export type Device = z.infer<typeof Device>;

export const VehicleInfo = z.object({
  vin: z.optional(z.string()),
  soc_start: z.optional(Soc),
  soc_end: z.optional(Soc),
});

export const ChargingRecord = z.object({
  record_id: z.string(),
  device_id: z.string(),
  connector_id: z.int().check(z.minimum(1)),
  start_time: Timestamp,
  end_time: Timestamp,
  energy: z.number(),
  max_power: z.optional(z.number()),
  avg_power: z.optional(z.number()),
  cost: z.optional(z.number()),
  meter_start: z.optional(z.number()),
  meter_end: z.optional(z.number()),
  vehicle_info: z.optional(VehicleInfo),
});
export type ChargingRecord = z.infer<typeof ChargingRecord>;

export const CommandName = z.enum([
  'stop',
  'start',
  'discharge',
  'set_schedule',
  'delete_schedule',
  'set_power_limit',
  'pause_charging',
  'update',
  'reset',
  'set_availability',
  'unlock_connector',
  'set_configuration',
  'upload_diagnostics',
]);
export type CommandName = z.infer<typeof CommandName>;

export const CommandStatus = z.enum([
  'queued',
  'delivered',
  'accepted',
  'succeeded',
  'failed',
  'rejected',
  'expired',
  'cancelled',
]);
export type CommandStatus = z.infer<typeof CommandStatus>;

export const PendingCommand = z.object({
  command_id: Identifier,
  command: CommandName,
  params: z.record(z.string(), z.unknown()),
  expiry: Timestamp,
});
export type PendingCommand = z.infer<typeof PendingCommand>;

export const QueuedCommand = z.object({
  command_id: z.string(),
  status: z.literal('queued'),
});

export const Site = z.object({
  site_id: z.string(),
  operator_id: z.string(),
  name: z.string(),
  timezone: z.string(),
});
export type Site = z.infer<typeof Site>;
