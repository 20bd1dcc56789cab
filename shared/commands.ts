import * as z from 'zod/mini';
import { CONTROL_DURATION_MAX_SECONDS, REASON_MAX_LENGTH } from './limits.js';
import { Identifier, Soc, Timestamp } from './primitives.js';
import { ChargingSchedule } from './schedule.js';

/** Params of each command as the charger receives them (heartbeat `commands[].params`). */
const connector = z.int().check(z.minimum(1));
const duration = z.int().check(z.minimum(1), z.maximum(CONTROL_DURATION_MAX_SECONDS));
const reason = z.string().check(z.maxLength(REASON_MAX_LENGTH));

export const StopParams = z.object({ connector_id: connector, reason: z.optional(reason) });
export const StartParams = z.object({
  connector_id: connector,
  target_soc: z.optional(Soc),
  power_limit: z.optional(z.number().check(z.minimum(0), z.maximum(1000))),
});
export const DischargeParams = z.object({
  connector_id: connector,
  /** kW exported, positive. */
  discharge_power: z.number().check(z.positive(), z.maximum(1000)),
  /** Seconds. */
  duration,
  min_soc: Soc,
});
export const SetScheduleParams = z.object({ connector_id: connector, schedule: ChargingSchedule });
export const DeleteScheduleParams = z.object({ connector_id: connector, schedule_id: Identifier });
/** Flexibility limits carry their window in absolute time, so a late delivery cannot stretch it. */
export const SetPowerLimitParams = z.object({
  control_id: Identifier,
  power_limit_percent: z.int().check(z.minimum(0), z.maximum(100)),
  duration,
  starts_at: Timestamp,
  ends_at: Timestamp,
  reason: z.optional(reason),
});
export const PauseChargingParams = z.object({
  control_id: Identifier,
  duration,
  starts_at: Timestamp,
  ends_at: Timestamp,
  reason: z.optional(reason),
});

export const CommandParams = {
  stop: StopParams,
  start: StartParams,
  discharge: DischargeParams,
  set_schedule: SetScheduleParams,
  delete_schedule: DeleteScheduleParams,
  set_power_limit: SetPowerLimitParams,
  pause_charging: PauseChargingParams,
} as const;
export type CommandParamsOf<K extends keyof typeof CommandParams> = z.infer<(typeof CommandParams)[K]>;
