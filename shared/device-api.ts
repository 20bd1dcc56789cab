import { z } from 'zod';
import { envelopeOf } from './envelope.js';
import { CONNECTORS_PER_DEVICE_MAX, TELEMETRY_BATCH_MAX } from './limits.js';
import { HeartbeatStatus, Identifier, Soc, TelemetryState, Text, Timestamp } from './primitives.js';
import { PendingCommand } from './resources.js';

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
