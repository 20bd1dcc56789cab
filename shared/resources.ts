import * as z from 'zod';
import { ConnectorState, DeviceStatus, Identifier, Soc, Timestamp } from './primitives.js';

export const Connector = z.object({
  connector_id: z.number().int().min(1),
  status: ConnectorState,
  power: z.number().optional(),
  voltage: z.number().optional(),
  current: z.number().optional(),
  energy_delivered: z.number().optional(),
  soc: Soc.optional(),
  temperature: z.number().optional(),
  last_telemetry_time: Timestamp.optional(),
  /** Additive: rating and V2G capability as registered. */
  max_power_kw: z.number().optional(),
  v2g_capable: z.boolean().optional(),
});
export type Connector = z.infer<typeof Connector>;

export const Device = z.object({
  device_id: z.string(),
  sn: z.string().optional(),
  model: z.string().optional(),
  manufacturer: z.string().optional(),
  firmware_version: z.string().optional(),
  status: DeviceStatus.optional(),
  connectors: z.array(Connector).optional(),
  last_heartbeat: Timestamp.optional(),
  site_id: z.string().optional(),
});
export type Device = z.infer<typeof Device>;

export const VehicleInfo = z.object({
  vin: z.string().optional(),
  soc_start: Soc.optional(),
  soc_end: Soc.optional(),
});

export const ChargingRecord = z.object({
  record_id: z.string(),
  device_id: z.string(),
  connector_id: z.number().int().min(1),
  start_time: Timestamp,
  end_time: Timestamp,
  energy: z.number(),
  max_power: z.number().optional(),
  avg_power: z.number().optional(),
  cost: z.number().optional(),
  meter_start: z.number().optional(),
  meter_end: z.number().optional(),
  vehicle_info: VehicleInfo.optional(),
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
