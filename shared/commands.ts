import * as z from 'zod';
import { CONTROL_DURATION_MAX_SECONDS, REASON_MAX_LENGTH } from './limits.js';
import { Identifier, Soc, Timestamp } from './primitives.js';
import { ChargingSchedule } from './schedule.js';

/** Params of each command as the charger receives them (heartbeat `commands[].params`). */
const connector = z.number().int().min(1);
const duration = z.number().int().min(1).max(CONTROL_DURATION_MAX_SECONDS);
const reason = z.string().max(REASON_MAX_LENGTH);

export const StopParams = z.object({ connector_id: connector, reason: reason.optional() });
export const StartParams = z.object({
  connector_id: connector,
  target_soc: Soc.optional(),
  power_limit: z.number().min(0).max(1000).optional(),
});
export const DischargeParams = z.object({
  connector_id: connector,
  /** kW exported, positive. */
  discharge_power: z.number().positive().max(1000),
  /** Seconds. */
  duration,
  min_soc: Soc,
});
export const SetScheduleParams = z.object({ connector_id: connector, schedule: ChargingSchedule });
export const DeleteScheduleParams = z.object({ connector_id: connector, schedule_id: Identifier });
/** Flexibility limits carry their window in absolute time, so a late delivery cannot stretch it. */
export const SetPowerLimitParams = z.object({
  control_id: Identifier,
  power_limit_percent: z.number().int().min(0).max(100),
  duration,
  starts_at: Timestamp,
  ends_at: Timestamp,
  reason: reason.optional(),
});
export const PauseChargingParams = z.object({
  control_id: Identifier,
  duration,
  starts_at: Timestamp,
  ends_at: Timestamp,
  reason: reason.optional(),
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
