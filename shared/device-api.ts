import * as z from 'zod';
import { envelopeOf } from './envelope.js';
import {
  CHARGING_RECORDS_BATCH_MAX,
  COMMAND_POLL_MAX_WAIT_SECONDS,
  CONNECTORS_PER_DEVICE_MAX,
  EVENTS_BATCH_MAX,
  REASON_MAX_LENGTH,
  TELEMETRY_BATCH_MAX,
} from './limits.js';
import { HeartbeatStatus, Identifier, Soc, TelemetryState, Text, Timestamp } from './primitives.js';
import { CommandStatus, PendingCommand } from './resources.js';

// POST /v1/device/register
export const ConnectorDeclaration = z.object({
  connector_id: z.number().int().min(1).max(CONNECTORS_PER_DEVICE_MAX),
  max_power_kw: z.number().positive().max(1000),
  v2g_capable: z.boolean().default(false),
});
export const RegisterRequest = z.object({
  sn: Text.max(64),
  model: Text,
  manufacturer: Text,
  firmware_version: Text.max(64),
  mac: z
    .string()
    .regex(/^[0-9A-Fa-f]{2}([:-][0-9A-Fa-f]{2}){5}$/, 'must be a MAC address like 00:1A:2B:3C:4D:5E')
    .optional(),
  /** Additive (DESIGN.md §3). */
  connectors: z
    .array(ConnectorDeclaration)
    .min(1)
    .max(CONNECTORS_PER_DEVICE_MAX)
    .refine(
      (cs) => new Set(cs.map((c) => c.connector_id)).size === cs.length,
      'connector_id values must be unique',
    )
    .optional(),
});
export type RegisterRequest = z.infer<typeof RegisterRequest>;
export const Registration = z.object({
  device_id: z.string(),
  device_secret: z.string(),
  expires_in: z.number().int(),
});
export const RegisterResponse = envelopeOf(Registration);

// POST /v1/device/token
export const DeviceTokenRequest = z.object({
  device_id: Identifier,
  device_secret: z.string().min(1).max(256),
  grant_type: z.literal('client_credentials'),
});
export const DeviceToken = z.object({
  access_token: z.string(),
  token_type: z.literal('Bearer'),
  expires_in: z.number().int(),
});
export type DeviceToken = z.infer<typeof DeviceToken>;
export const DeviceTokenResponse = envelopeOf(DeviceToken);

// POST /v1/device/heartbeat
export const HeartbeatRequest = z.object({
  timestamp: Timestamp,
  status: HeartbeatStatus,
  fault_code: z.number().int().min(0).max(2_147_483_647),
});
export type HeartbeatRequest = z.infer<typeof HeartbeatRequest>;
export const HeartbeatData = z.object({
  commands: z.array(PendingCommand),
  /** Additive: the platform's clock, for the agent's skew check (DESIGN.md §7). */
  server_time: Timestamp,
});
export type HeartbeatData = z.infer<typeof HeartbeatData>;
export const HeartbeatResponse = envelopeOf(HeartbeatData);

// POST /v1/device/telemetry
const phase = z.object({
  voltage: z.number().finite().optional(),
  current: z.number().finite().optional(),
  power: z.number().finite().optional(),
});
export const PhaseDetails = z.object({ l1: phase.optional(), l2: phase.optional(), l3: phase.optional() });
export const TelemetryRecord = z
  .object({
    timestamp: Timestamp,
    connector_id: z.number().int().min(1).max(CONNECTORS_PER_DEVICE_MAX),
    state: TelemetryState,
    voltage: z.number().min(0).max(2000).optional(),
    current: z.number().min(-2000).max(2000).optional(),
    power: z.number().min(-1000).max(1000).optional(),
    energy_delivered: z.number().min(0).max(1_000_000).optional(),
    soc: Soc.optional(),
    temperature: z.number().min(-100).max(200).optional(),
    phase_details: PhaseDetails.optional(),
  })
  .superRefine((t, ctx) => {
    // Spec rule: a connector reporting `discharging` has negative power.
    if (t.state === 'discharging' && !(typeof t.power === 'number' && t.power < 0)) {
      ctx.addIssue({ code: 'custom', path: ['power'], message: 'must be negative while discharging' });
    }
  });
export type TelemetryRecord = z.infer<typeof TelemetryRecord>;
export const TelemetryAccepted = z.object({ accepted: z.number().int() });
export const TelemetryResponse = envelopeOf(TelemetryAccepted);

// POST /v1/device/telemetry/batch (DESIGN.md §9)
export const TelemetryBatchRequest = z.object({
  records: z.array(TelemetryRecord).min(1).max(TELEMETRY_BATCH_MAX),
});
export const TelemetryBatchAccepted = z.object({ accepted: z.number().int(), duplicates: z.number().int() });

// ---- Further charger endpoints (DESIGN.md §9) ----

export const CommandPollQuery = z.strictObject({
  /** Seconds to wait for a command, 0-30 (default 0: answer at once). */
  wait: z
    .string()
    .regex(/^\d{1,3}$/, 'must be a whole number of seconds')
    .transform(Number)
    .pipe(z.number().int().min(0).max(COMMAND_POLL_MAX_WAIT_SECONDS))
    .default(0),
});
export const CommandsData = z.object({ commands: z.array(PendingCommand), server_time: Timestamp });

export const ReportedCommandStatus = z.enum(['accepted', 'rejected', 'succeeded', 'failed']);
export type ReportedCommandStatus = z.infer<typeof ReportedCommandStatus>;
export const CommandStatusReport = z.object({
  status: ReportedCommandStatus,
  reason: z.string().max(REASON_MAX_LENGTH).optional(),
  /** When the charger reached this status (its clock). */
  timestamp: Timestamp.optional(),
});
export type CommandStatusReport = z.infer<typeof CommandStatusReport>;
export const CommandStatusAck = z.object({
  command_id: z.string(),
  status: CommandStatus,
  /** False when the report did not move the command (a repeat, or an older status arriving late). */
  changed: z.boolean(),
});

export const EventSeverity = z.enum(['info', 'warning', 'error', 'critical']);
export const DeviceEvent = z.object({
  /** Chosen by the charger; repeats of the same id are ignored. */
  event_id: Identifier,
  /** e.g. boot, vehicle_plugged, vehicle_unplugged, fault_raised, fault_cleared, session_started, session_ended. */
  kind: z.string().regex(/^[a-z][a-z0-9_]{0,63}$/, 'must be lower_snake_case'),
  severity: EventSeverity.default('info'),
  timestamp: Timestamp,
  connector_id: z.number().int().min(1).max(CONNECTORS_PER_DEVICE_MAX).optional(),
  message: z.string().max(REASON_MAX_LENGTH).optional(),
  data: z
    .record(z.string(), z.union([z.string().max(REASON_MAX_LENGTH), z.number(), z.boolean(), z.null()]))
    .optional(),
});
export type DeviceEvent = z.infer<typeof DeviceEvent>;
export const EventsUpload = z.object({ events: z.array(DeviceEvent).min(1).max(EVENTS_BATCH_MAX) });
export const StoredEvent = DeviceEvent.extend({ device_id: z.string(), received_at: Timestamp });

export const ChargingRecordUpload = z
  .object({
    record_id: Identifier,
    connector_id: z.number().int().min(1).max(CONNECTORS_PER_DEVICE_MAX),
    start_time: Timestamp,
    end_time: Timestamp,
    energy: z.number().min(0).max(100_000),
    max_power: z.number().min(-1000).max(1000).optional(),
    avg_power: z.number().min(-1000).max(1000).optional(),
    cost: z.number().min(0).optional(),
    meter_start: z.number().min(0).optional(),
    meter_end: z.number().min(0).optional(),
    vehicle_info: z
      .object({ vin: z.string().max(32).optional(), soc_start: Soc.optional(), soc_end: Soc.optional() })
      .optional(),
  })
  .superRefine((r, ctx) => {
    if (Date.parse(r.end_time) < Date.parse(r.start_time)) {
      ctx.addIssue({ code: 'custom', path: ['end_time'], message: 'must not be earlier than start_time' });
    }
    if (r.meter_start !== undefined && r.meter_end !== undefined && r.meter_end < r.meter_start) {
      ctx.addIssue({ code: 'custom', path: ['meter_end'], message: 'must not be below meter_start' });
    }
  });
export type ChargingRecordUpload = z.infer<typeof ChargingRecordUpload>;
export const ChargingRecordsUpload = z.object({
  records: z.array(ChargingRecordUpload).min(1).max(CHARGING_RECORDS_BATCH_MAX),
});
export const UploadAccepted = z.object({
  /** Newly stored. */
  accepted: z.number().int(),
  /** Already stored earlier (a replay): ignored. */
  duplicates: z.number().int(),
});

export const FirmwareState = z.enum([
  'idle',
  'downloading',
  'downloaded',
  'installing',
  'installed',
  'failed',
]);
export const FirmwareStatusReport = z.object({
  status: FirmwareState,
  version: Text.max(64).optional(),
  progress: z.number().int().min(0).max(100).optional(),
  message: z.string().max(REASON_MAX_LENGTH).optional(),
  timestamp: Timestamp,
});
export type FirmwareStatusReport = z.infer<typeof FirmwareStatusReport>;
export const FirmwareStatusAck = z.object({ status: FirmwareState });

export const SecretRotated = Registration;
