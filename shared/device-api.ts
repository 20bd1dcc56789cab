import * as z from 'zod/mini';
import { envelopeOf } from './envelope.js';
import {
  CHARGING_RECORDS_BATCH_MAX,
  COMMAND_POLL_MAX_WAIT_SECONDS,
  COMMAND_RESULT_MAX_BYTES,
  COMMAND_RESULT_MAX_DEPTH,
  CONNECTORS_PER_DEVICE_MAX,
  EVENTS_BATCH_MAX,
  REASON_MAX_LENGTH,
  TELEMETRY_BATCH_MAX,
} from './limits.js';
import {
  freeText,
  HeartbeatStatus,
  Identifier,
  Soc,
  storableText,
  TelemetryState,
  Text,
  Timestamp,
} from './primitives.js';
import { CommandStatus, PendingCommand } from './resources.js';

// POST /v1/device/register
export const ConnectorDeclaration = z.object({
  connector_id: z.int().check(z.minimum(1), z.maximum(CONNECTORS_PER_DEVICE_MAX)),
  max_power_kw: z.number().check(z.positive(), z.maximum(1000)),
  v2g_capable: z._default(z.boolean(), false),
});
export const RegisterRequest = z.object({
  sn: Text.check(z.maxLength(64)),
  model: Text,
  manufacturer: Text,
  firmware_version: Text.check(z.maxLength(64)),
  /** Additive (DESIGN.md §19): the charger agent's own release, for the fleet's inventory. */
  agent_version: z.optional(Text.check(z.maxLength(64))),
  mac: z.optional(
    z
      .string()
      .check(
        z.regex(/^[0-9A-Fa-f]{2}([:-][0-9A-Fa-f]{2}){5}$/, 'must be a MAC address like 00:1A:2B:3C:4D:5E'),
      ),
  ),
  /** Additive (DESIGN.md §3). */
  connectors: z.optional(
    z.array(ConnectorDeclaration).check(
      z.minLength(1),
      z.maxLength(CONNECTORS_PER_DEVICE_MAX),
      z.refine(
        (cs) => new Set(cs.map((c) => c.connector_id)).size === cs.length,
        'connector_id values must be unique',
      ),
    ),
  ),
});
export type RegisterRequest = z.infer<typeof RegisterRequest>;
export const Registration = z.object({
  device_id: z.string(),
  device_secret: z.string(),
  expires_in: z.int(),
});
export const RegisterResponse = envelopeOf(Registration);

// POST /v1/device/token
export const DeviceTokenRequest = z.object({
  device_id: Identifier,
  device_secret: z.string().check(z.minLength(1), z.maxLength(256)),
  grant_type: z.literal('client_credentials'),
});
export const DeviceToken = z.object({
  access_token: z.string(),
  token_type: z.literal('Bearer'),
  expires_in: z.int(),
});
export type DeviceToken = z.infer<typeof DeviceToken>;
export const DeviceTokenResponse = envelopeOf(DeviceToken);

// POST /v1/device/heartbeat
export const HeartbeatRequest = z.object({
  timestamp: Timestamp,
  status: HeartbeatStatus,
  fault_code: z.int().check(z.minimum(0), z.maximum(2_147_483_647)),
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
  voltage: z.optional(z.number()),
  current: z.optional(z.number()),
  power: z.optional(z.number()),
});
export const PhaseDetails = z.object({ l1: z.optional(phase), l2: z.optional(phase), l3: z.optional(phase) });
export const TelemetryRecord = z
  .object({
    timestamp: Timestamp,
    connector_id: z.int().check(z.minimum(1), z.maximum(CONNECTORS_PER_DEVICE_MAX)),
    state: TelemetryState,
    voltage: z.optional(z.number().check(z.minimum(0), z.maximum(2000))),
    current: z.optional(z.number().check(z.minimum(-2000), z.maximum(2000))),
    power: z.optional(z.number().check(z.minimum(-1000), z.maximum(1000))),
    energy_delivered: z.optional(z.number().check(z.minimum(0), z.maximum(1_000_000))),
    soc: z.optional(Soc),
    temperature: z.optional(z.number().check(z.minimum(-100), z.maximum(200))),
    phase_details: z.optional(PhaseDetails),
  })
  .check(
    z.superRefine((t, ctx) => {
      // Spec rule: a connector reporting `discharging` has negative power.
      if (t.state === 'discharging' && !(typeof t.power === 'number' && t.power < 0)) {
        ctx.addIssue({ code: 'custom', path: ['power'], message: 'must be negative while discharging' });
      }
    }),
  );
export type TelemetryRecord = z.infer<typeof TelemetryRecord>;
/**
 * The measurements a telemetry record may carry, each a number or absent: what the platform keeps of every
 * sample and as a connector's live state. Storage types and row mappings are derived from this list, so a new
 * measurement is added here, in the schema above and in each backend's migration and telemetry queries (a unit
 * test holds the list to the schema).
 */
export const TELEMETRY_MEASUREMENTS = [
  'voltage',
  'current',
  'power',
  'energy_delivered',
  'soc',
  'temperature',
] as const satisfies ReadonlyArray<keyof TelemetryRecord>;
export type TelemetryMeasurement = (typeof TELEMETRY_MEASUREMENTS)[number];
export const TelemetryAccepted = z.object({ accepted: z.int() });
export const TelemetryResponse = envelopeOf(TelemetryAccepted);

// POST /v1/device/telemetry/batch (DESIGN.md §9)
export const TelemetryBatchRequest = z.object({
  records: z.array(TelemetryRecord).check(z.minLength(1), z.maxLength(TELEMETRY_BATCH_MAX)),
});
export const TelemetryBatchAccepted = z.object({ accepted: z.int(), duplicates: z.int() });

// ---- Further charger endpoints (DESIGN.md §9) ----

export const CommandPollQuery = z.strictObject({
  /** Seconds to wait for a command, 0-30 (default 0: answer at once). */
  wait: z._default(
    z.pipe(
      z.pipe(
        z.string().check(z.regex(/^\d{1,3}$/, 'must be a whole number of seconds')),
        z.transform(Number),
      ),
      z.int().check(z.minimum(0), z.maximum(COMMAND_POLL_MAX_WAIT_SECONDS)),
    ),
    0,
  ),
});
export const CommandsData = z.object({ commands: z.array(PendingCommand), server_time: Timestamp });

export const ReportedCommandStatus = z.enum(['accepted', 'rejected', 'succeeded', 'failed']);
export type ReportedCommandStatus = z.infer<typeof ReportedCommandStatus>;
/**
 * Whether a command's `result` can be stored: no deeper than COMMAND_RESULT_MAX_DEPTH (PostgreSQL's JSON parser,
 * and JSON.stringify, run out of stack on a hostile nesting long before 64 KiB), no NUL in a key or string
 * (JSONB cannot hold one), at most COMMAND_RESULT_MAX_BYTES of JSON. Walked without recursion, for that reason.
 */
function isStorableResult(result: Record<string, unknown>): boolean {
  const pending: Array<[unknown, number]> = [[result, 1]];
  for (let next = pending.pop(); next; next = pending.pop()) {
    const [value, depth] = next;
    if (typeof value === 'string' && value.includes('\u0000')) return false;
    if (value === null || typeof value !== 'object') continue;
    if (depth > COMMAND_RESULT_MAX_DEPTH) return false;
    for (const [key, inner] of Object.entries(value)) {
      if (key.includes('\u0000')) return false;
      pending.push([inner, depth + 1]);
    }
  }
  return new TextEncoder().encode(JSON.stringify(result)).length <= COMMAND_RESULT_MAX_BYTES;
}

export const CommandStatusReport = z.object({
  status: ReportedCommandStatus,
  reason: z.optional(freeText(REASON_MAX_LENGTH)),
  /** When the charger reached this status (its clock). */
  timestamp: z.optional(Timestamp),
  /**
   * Additive (DESIGN.md §20): what the command produced, e.g. the configuration after a `set_configuration`. At
   * most COMMAND_RESULT_MAX_BYTES of JSON (UTF-8; the body limit of 64 KiB bounds it in practice), nested at most
   * COMMAND_RESULT_MAX_DEPTH deep, with no NUL character: what both storage backends can keep.
   */
  result: z.optional(
    z
      .record(z.string(), z.unknown())
      .check(
        z.refine(
          isStorableResult,
          'must be at most 64 KiB of JSON, nested at most 32 deep, with no NUL character',
        ),
      ),
  ),
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
  kind: z.string().check(z.regex(/^[a-z][a-z0-9_]{0,63}$/, 'must be lower_snake_case')),
  severity: z._default(EventSeverity, 'info'),
  timestamp: Timestamp,
  connector_id: z.optional(z.int().check(z.minimum(1), z.maximum(CONNECTORS_PER_DEVICE_MAX))),
  message: z.optional(freeText(REASON_MAX_LENGTH)),
  data: z.optional(
    z.record(storableText(), z.union([storableText(REASON_MAX_LENGTH), z.number(), z.boolean(), z.null()])),
  ),
});
export type DeviceEvent = z.infer<typeof DeviceEvent>;
export const EventsUpload = z.object({
  events: z.array(DeviceEvent).check(z.minLength(1), z.maxLength(EVENTS_BATCH_MAX)),
});
export const StoredEvent = z.extend(DeviceEvent, { device_id: z.string(), received_at: Timestamp });

export const ChargingRecordUpload = z
  .object({
    record_id: Identifier,
    connector_id: z.int().check(z.minimum(1), z.maximum(CONNECTORS_PER_DEVICE_MAX)),
    start_time: Timestamp,
    end_time: Timestamp,
    energy: z.number().check(z.minimum(0), z.maximum(100_000)),
    max_power: z.optional(z.number().check(z.minimum(-1000), z.maximum(1000))),
    avg_power: z.optional(z.number().check(z.minimum(-1000), z.maximum(1000))),
    cost: z.optional(z.number().check(z.minimum(0))),
    meter_start: z.optional(z.number().check(z.minimum(0))),
    meter_end: z.optional(z.number().check(z.minimum(0))),
    vehicle_info: z.optional(
      z.object({
        vin: z.optional(storableText(32)),
        soc_start: z.optional(Soc),
        soc_end: z.optional(Soc),
      }),
    ),
  })
  .check(
    z.superRefine((r, ctx) => {
      if (Date.parse(r.end_time) < Date.parse(r.start_time)) {
        ctx.addIssue({ code: 'custom', path: ['end_time'], message: 'must not be earlier than start_time' });
      }
      if (r.meter_start !== undefined && r.meter_end !== undefined && r.meter_end < r.meter_start) {
        ctx.addIssue({ code: 'custom', path: ['meter_end'], message: 'must not be below meter_start' });
      }
    }),
  );
export type ChargingRecordUpload = z.infer<typeof ChargingRecordUpload>;
export const ChargingRecordsUpload = z.object({
  records: z.array(ChargingRecordUpload).check(z.minLength(1), z.maxLength(CHARGING_RECORDS_BATCH_MAX)),
});
export const UploadAccepted = z.object({
  /** Newly stored. */
  accepted: z.int(),
  /** Already stored earlier (a replay): ignored. */
  duplicates: z.int(),
});

/** The original six states, then the detailed ones of over-the-air updates (DESIGN.md §19): all valid. */
export const FirmwareState = z.enum([
  'idle',
  'downloading',
  'downloaded',
  'installing',
  'installed',
  'failed',
  'download_scheduled',
  'download_failed',
  'signature_verified',
  'invalid_signature',
  'install_scheduled',
  'install_rebooting',
  'install_failed',
  'install_verification_failed',
  'rolled_back',
]);
export type FirmwareState = z.infer<typeof FirmwareState>;
export const FirmwareStatusReport = z.object({
  status: FirmwareState,
  version: z.optional(Text.check(z.maxLength(64))),
  progress: z.optional(z.int().check(z.minimum(0), z.maximum(100))),
  message: z.optional(freeText(REASON_MAX_LENGTH)),
  timestamp: Timestamp,
  /** Additive (DESIGN.md §19): the update this report is about. */
  update_id: z.optional(Identifier),
  /** Additive: chosen by the charger; a report whose id is already stored for the charger is stored once. */
  report_id: z.optional(Identifier),
});
export type FirmwareStatusReport = z.infer<typeof FirmwareStatusReport>;
/** A stored report, as `GET /v1/operator/devices/{device_id}/firmware` pages them. */
export const StoredFirmwareReport = z.extend(FirmwareStatusReport, { received_at: Timestamp });
export const FirmwareStatusAck = z.object({ status: FirmwareState });

export const SecretRotated = Registration;
