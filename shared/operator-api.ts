import * as z from 'zod';
import { RESET_MODES, RESET_TARGETS } from './commands.js';
import { ConfigurationChange } from './configuration.js';
import { DIAGNOSTICS_STATUSES } from './diagnostics.js';
import { envelopeOf } from './envelope.js';
import { CONTROL_DURATION_MAX_SECONDS, FLEXIBILITY_TARGET_IDS_MAX, REASON_MAX_LENGTH } from './limits.js';
import {
  CONTROL_CHARACTERS_MESSAGE,
  ConnectorIdParam,
  Identifier,
  PageQuery,
  pageOf,
  Soc,
  Timestamp,
  WITHOUT_CONTROL_CHARACTERS,
} from './primitives.js';
import { ChargingRecord, CommandName, CommandStatus, Device, QueuedCommand, Site } from './resources.js';
import { ChargingSchedule } from './schedule.js';

// POST /v1/operator/oauth/token
export const OperatorTokenRequest = z.object({
  client_id: z.string().min(1).max(128),
  client_secret: z.string().min(1).max(256),
  grant_type: z.literal('client_credentials'),
  /** Optional OAuth `scope`: a space-separated subset of the client's scopes. */
  scope: z.string().max(64).optional(),
});
export type OperatorTokenRequest = z.infer<typeof OperatorTokenRequest>;
/**
 * The token request's body as a client sends it: the credentials may come as HTTP Basic instead (RFC 6749
 * §2.3.1), and the platform validates the two merged (`OperatorTokenRequest`).
 */
export const OperatorTokenRequestBody = z.object({
  ...OperatorTokenRequest.shape,
  client_id: OperatorTokenRequest.shape.client_id.optional().meta({
    description: 'Required unless sent as HTTP Basic (clientBasic); when both are sent they must be the same',
  }),
  client_secret: OperatorTokenRequest.shape.client_secret.optional().meta({
    description: 'Required unless sent as HTTP Basic (clientBasic)',
  }),
});
/** Not enveloped (spec). */
export const OperatorTokenResponse = z.object({
  access_token: z.string(),
  token_type: z.literal('Bearer'),
  expires_in: z.number().int(),
  /** Additive, as OAuth defines it. */
  scope: z.string().optional(),
});
export type OperatorTokenResponse = z.infer<typeof OperatorTokenResponse>;

// Path parameters
export const DeviceParams = z.object({ device_id: Identifier });
export const ConnectorParams = z.object({ device_id: Identifier, connector_id: ConnectorIdParam });

// GET /v1/operator/devices/{device_id}
export const DeviceResponse = envelopeOf(Device);

// GET /v1/operator/charging-records
export const ChargingRecordsQuery = z
  .strictObject({
    device_id: z.optional(Identifier),
    connector_id: z.optional(ConnectorIdParam),
    start_time: z.optional(Timestamp),
    end_time: z.optional(Timestamp),
    ...PageQuery,
  })
  .superRefine((q, ctx) => {
    if (q.start_time && q.end_time && Date.parse(q.end_time) <= Date.parse(q.start_time)) {
      ctx.addIssue({ code: 'custom', path: ['end_time'], message: 'must be later than start_time' });
    }
  });
export type ChargingRecordsQuery = z.infer<typeof ChargingRecordsQuery>;
export const ChargingRecordsPage = pageOf(ChargingRecord);
export const ChargingRecordsResponse = envelopeOf(ChargingRecordsPage);

// POST .../connectors/{connector_id}/stop
export const StopRequest = z.strictObject({
  /** Optional; defaults to `user_request`. */
  reason: z.string().min(1).max(64).regex(WITHOUT_CONTROL_CHARACTERS, CONTROL_CHARACTERS_MESSAGE).optional(),
});
export type StopRequest = z.infer<typeof StopRequest>;

// POST .../connectors/{connector_id}/discharge
export const DischargeRequest = z.strictObject({
  /** kW exported, required, positive. */
  discharge_power: z.number().positive().max(1000),
  /** Seconds, required. */
  duration: z.number().int().min(1).max(CONTROL_DURATION_MAX_SECONDS),
  /** Discharging stops at this SOC; default 20. */
  min_soc: z._default(Soc, 20),
});
export type DischargeRequest = z.infer<typeof DischargeRequest>;

export const QueuedCommandResponse = envelopeOf(QueuedCommand);

// POST .../connectors/{connector_id}/schedule
export const ScheduleRequest = ChargingSchedule;
export const ScheduleStored = z.object({
  device_id: z.string(),
  connector_id: z.number().int(),
  schedule: ChargingSchedule,
  /** The set_schedule command that carries it to the charger. */
  command_id: z.string(),
  status: z.literal('queued'),
});
export const ScheduleResponse = envelopeOf(ScheduleStored);

// POST /v1/operator/control/flexibility
const flexTarget = {
  target_type: z.enum(['site', 'operator', 'all']),
  target_ids: z.array(Identifier).min(1).max(FLEXIBILITY_TARGET_IDS_MAX).optional(),
};
const flexDuration = z.number().int().min(1).max(CONTROL_DURATION_MAX_SECONDS);
const flexReason = z
  .string()
  .max(REASON_MAX_LENGTH)
  .regex(WITHOUT_CONTROL_CHARACTERS, CONTROL_CHARACTERS_MESSAGE)
  .optional();
export const FlexibilityRequest = z
  .discriminatedUnion('command', [
    z.strictObject({
      ...flexTarget,
      command: z.literal('set_power_limit'),
      params: z.strictObject({
        power_limit_percent: z.number().int().min(0).max(100),
        duration: flexDuration,
        reason: flexReason,
      }),
    }),
    z.strictObject({
      ...flexTarget,
      command: z.literal('pause_charging'),
      params: z.strictObject({ duration: flexDuration, reason: flexReason }),
    }),
  ])
  .superRefine((r, ctx) => {
    if (r.target_type !== 'all' && !r.target_ids) {
      ctx.addIssue({
        code: 'custom',
        path: ['target_ids'],
        message: `required when target_type is ${r.target_type}`,
      });
    }
  })
  // What the union and the refinement mean, for the OpenAPI document (zod's JSON Schema carries neither).
  .meta({
    discriminator: { propertyName: 'command' },
    if: { properties: { target_type: { enum: ['site', 'operator'] } }, required: ['target_type'] },
    // biome-ignore lint/suspicious/noThenProperty: JSON Schema's if/then, never awaited
    then: { required: ['target_ids'] },
  });
export type FlexibilityRequest = z.infer<typeof FlexibilityRequest>;
export const FlexibilityAccepted = z.object({
  control_id: z.string(),
  status: z.literal('executing'),
  /** Additive: how many chargers the control fanned out to. */
  device_count: z.number().int(),
});
export const FlexibilityResponse = envelopeOf(FlexibilityAccepted);

// ---- Further operator endpoints (DESIGN.md §9) ----

export const CommandParamsPath = z.object({ command_id: Identifier });
export const ControlParamsPath = z.object({ control_id: Identifier });
export const SiteParamsPath = z.object({ site_id: Identifier });
export const ScheduleParamsPath = z.object({
  device_id: Identifier,
  connector_id: ConnectorIdParam,
  schedule_id: Identifier,
});

export const CommandHistoryEntry = z.object({
  status: CommandStatus,
  at: Timestamp,
  reason: z.string().optional(),
});
export const CommandView = z.object({
  command_id: z.string(),
  device_id: z.string(),
  command: CommandName,
  params: z.record(z.string(), z.unknown()),
  status: CommandStatus,
  reason: z.string().optional(),
  expiry: Timestamp,
  created_at: Timestamp,
  updated_at: Timestamp,
  control_id: z.string().optional(),
  /** Additive (DESIGN.md §20): what the charger reported the command produced, when it did. */
  result: z.record(z.string(), z.unknown()).optional(),
  history: z.array(CommandHistoryEntry),
});
export type CommandView = z.infer<typeof CommandView>;
export const CommandCancelled = z.object({ command_id: z.string(), status: z.literal('cancelled') });

export const ControlStatus = z.enum(['executing', 'completed', 'cancelled']);
export const ControlView = z.object({
  control_id: z.string(),
  status: ControlStatus,
  command: CommandName,
  params: z.record(z.string(), z.unknown()),
  target_type: z.enum(['site', 'operator', 'all']),
  target_ids: z.array(z.string()),
  created_at: Timestamp,
  ends_at: Timestamp,
  device_count: z.number().int(),
  /** How many of the control's per-charger commands are in each status. */
  progress: z.record(z.string(), z.number().int()),
  devices: z.array(z.object({ device_id: z.string(), command_id: z.string(), status: CommandStatus })),
});
export type ControlView = z.infer<typeof ControlView>;

export const DevicesQuery = z.strictObject({
  site_id: z.optional(Identifier),
  status: z.enum(['online', 'offline']).optional(),
  /** Exact matches (DESIGN.md §19): the chargers on one release. */
  firmware_version: z.string().min(1).max(64).optional(),
  agent_version: z.string().min(1).max(64).optional(),
  ...PageQuery,
});
export type DevicesQuery = z.infer<typeof DevicesQuery>;
export const DevicesPage = pageOf(Device);

export const SiteView = z.object({ ...Site.shape, device_count: z.number().int() });
export const SitesQuery = z.strictObject({ ...PageQuery });
export const SitesPage = pageOf(SiteView);

export const StartRequest = z.strictObject({
  /** Stop charging when the vehicle reaches this SOC. */
  target_soc: z.optional(Soc),
  /** kW cap for this session. */
  power_limit: z.number().min(0).max(1000).optional(),
});

export const SchedulesQuery = z.strictObject({ ...PageQuery });
export const SchedulesPage = pageOf(ChargingSchedule);
export const ScheduleDeleted = z.object({
  schedule_id: z.string(),
  command_id: z.string(),
  status: z.literal('queued'),
});

export const EnergyInterval = z.enum(['15m', '1h', '1d']);
export const ENERGY_INTERVAL_MS = { '15m': 900_000, '1h': 3_600_000, '1d': 86_400_000 } as const;
export const ENERGY_MAX_BUCKETS = 3000;
export const EnergyQuery = z
  .strictObject({
    // The rules across parameters are the refinement's; OpenAPI states them only in words.
    device_id: z
      .optional(Identifier)
      .meta({ description: 'One charger: give exactly one of device_id and site_id' }),
    site_id: z
      .optional(Identifier)
      .meta({ description: 'One site: give exactly one of device_id and site_id' }),
    start_time: Timestamp,
    end_time: Timestamp,
    interval: EnergyInterval.default('1h'),
  })
  .superRefine((q, ctx) => {
    if ((q.device_id === undefined) === (q.site_id === undefined)) {
      ctx.addIssue({
        code: 'custom',
        path: ['device_id'],
        message: 'give exactly one of device_id and site_id',
      });
      return;
    }
    const span = Date.parse(q.end_time) - Date.parse(q.start_time);
    if (span <= 0) {
      ctx.addIssue({ code: 'custom', path: ['end_time'], message: 'must be later than start_time' });
    } else if (span / ENERGY_INTERVAL_MS[q.interval] > ENERGY_MAX_BUCKETS) {
      ctx.addIssue({
        code: 'custom',
        path: ['interval'],
        message: `at most ${ENERGY_MAX_BUCKETS} buckets per query; choose a longer interval or a shorter range`,
      });
    }
  });
export type EnergyQuery = z.infer<typeof EnergyQuery>;
export const EnergyBucket = z.object({
  start_time: Timestamp,
  end_time: Timestamp,
  /** kWh drawn from the grid in the bucket (integrated from telemetry power). */
  energy_imported: z.number(),
  /** kWh exported by V2G discharging in the bucket. */
  energy_exported: z.number(),
  avg_power: z.number(),
  max_power: z.number(),
  samples: z.number().int(),
});
export const EnergySeries = z.object({
  device_id: z.string().optional(),
  site_id: z.string().optional(),
  interval: EnergyInterval,
  start_time: Timestamp,
  end_time: Timestamp,
  items: z.array(EnergyBucket),
});

export const EventsQuery = z.strictObject({ ...PageQuery });
// GET /v1/operator/devices/{device_id}/firmware: the charger's firmware reports, newest first.
export const FirmwareReportsQuery = z.strictObject({ ...PageQuery });

// GET /v1/operator/devices/{device_id}/commands: newest first, optionally of one status.
export const DeviceCommandsQuery = z.strictObject({ status: z.optional(CommandStatus), ...PageQuery });
export type DeviceCommandsQuery = z.infer<typeof DeviceCommandsQuery>;
export const DeviceCommandsPage = pageOf(CommandView);

// Remote maintenance (DESIGN.md §20)

// POST /v1/operator/devices/{device_id}/reset
export const ResetRequest = z.strictObject({
  /** `when_idle` (default) waits until no connector charges or discharges; `immediate` does not wait. */
  mode: z.enum(RESET_MODES).default('when_idle'),
  /** `agent` (default) restarts the charger's agent; `charger` reboots the charger through its HAL. */
  target: z.enum(RESET_TARGETS).default('agent'),
});
export type ResetRequest = z.infer<typeof ResetRequest>;

// PUT /v1/operator/devices/{device_id}/connectors/{connector_id}/availability
export const AvailabilityRequest = z.strictObject({ available: z.boolean() });
export type AvailabilityRequest = z.infer<typeof AvailabilityRequest>;

// GET and PATCH /v1/operator/devices/{device_id}/configuration
export const ConfigurationView = z.object({
  device_id: z.string(),
  /** Every key as the charger last reported it; empty until it has. */
  values: z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])),
  /** When the charger reported them (its clock); null until it has. */
  reported_at: z.nullable(Timestamp),
});
export type ConfigurationView = z.infer<typeof ConfigurationView>;
export const ConfigurationPatch = z.strictObject({ values: ConfigurationChange });
export type ConfigurationPatch = z.infer<typeof ConfigurationPatch>;

// POST /v1/operator/devices/{device_id}/diagnostics
export const DiagnosticsRequest = z
  .strictObject({
    /** Start of the log window; default DIAGNOSTICS_DEFAULT_WINDOW_HOURS before end_time. */
    start_time: z.optional(Timestamp),
    /** End of the log window; default now. */
    end_time: z.optional(Timestamp),
  })
  .superRefine((q, ctx) => {
    if (q.start_time && q.end_time && Date.parse(q.end_time) <= Date.parse(q.start_time)) {
      ctx.addIssue({ code: 'custom', path: ['end_time'], message: 'must be later than start_time' });
    }
  });
export type DiagnosticsRequest = z.infer<typeof DiagnosticsRequest>;
export const DiagnosticsRequested = z.object({
  diagnostics_id: z.string(),
  command_id: z.string(),
  status: z.literal('requested'),
});
// GET /v1/operator/diagnostics/{diagnostics_id}
export const DiagnosticsParams = z.object({ diagnostics_id: Identifier });
export const DiagnosticsView = z.object({
  diagnostics_id: z.string(),
  device_id: z.string(),
  command_id: z.string(),
  status: z.enum(DIAGNOSTICS_STATUSES),
  start_time: Timestamp,
  end_time: Timestamp,
  /** Bytes of the archive once available; while uploading, what has arrived; 0 before. */
  size: z.number().int(),
  /** Lowercase hex of the archive's SHA-256, once available. */
  sha256: z.string().nullable(),
  /** Why it failed (the charger's reason, an expired command, a corrupt archive). */
  reason: z.string().optional(),
  created_at: Timestamp,
  updated_at: Timestamp,
  /** When the platform deletes it (DIAGNOSTICS_RETENTION_DAYS after the request). */
  expires_at: Timestamp,
});
export type DiagnosticsView = z.infer<typeof DiagnosticsView>;
