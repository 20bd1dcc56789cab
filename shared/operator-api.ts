import { z } from 'zod';
import { envelopeOf } from './envelope.js';
import { CONTROL_DURATION_MAX_SECONDS, FLEXIBILITY_TARGET_IDS_MAX, REASON_MAX_LENGTH } from './limits.js';
import { ConnectorIdParam, Identifier, PageQuery, pageOf, Soc, Timestamp } from './primitives.js';
import { ChargingRecord, Device, QueuedCommand } from './resources.js';
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
    device_id: Identifier.optional(),
    connector_id: ConnectorIdParam.optional(),
    start_time: Timestamp.optional(),
    end_time: Timestamp.optional(),
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
  reason: z.string().min(1).max(64).optional(),
});
export type StopRequest = z.infer<typeof StopRequest>;

// POST .../connectors/{connector_id}/discharge
export const DischargeRequest = z.strictObject({
  /** kW exported, required, positive. */
  discharge_power: z.number().positive().max(1000),
  /** Seconds, required. */
  duration: z.number().int().min(1).max(CONTROL_DURATION_MAX_SECONDS),
  /** Discharging stops at this SOC; default 20. */
  min_soc: Soc.default(20),
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
const flexReason = z.string().max(REASON_MAX_LENGTH).optional();
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
  });
export type FlexibilityRequest = z.infer<typeof FlexibilityRequest>;
export const FlexibilityAccepted = z.object({
  control_id: z.string(),
  status: z.literal('executing'),
  /** Additive: how many chargers the control fanned out to. */
  device_count: z.number().int(),
});
export const FlexibilityResponse = envelopeOf(FlexibilityAccepted);
