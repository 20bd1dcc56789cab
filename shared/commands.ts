import * as z from 'zod/mini';
import { ConfigurationChange } from './configuration.js';
import { UploadDiagnosticsParams } from './diagnostics.js';
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

/** `HH:MM`, 00:00 to 23:59: a time of day in a site's local time. */
export const TIME_OF_DAY = /^([01]\d|2[0-3]):[0-5]\d$/;
export const UPDATE_INSTALL_MODES = ['when_idle', 'immediate'] as const;
/**
 * An install window in the site's local time (DESIGN.md §19). `end` before `start` runs past midnight; equal
 * start and end is refused. The platform adds the site's IANA `timezone`, which the charger does not know.
 */
export const UpdateWindowParams = z.object({
  start: z.string().check(z.regex(TIME_OF_DAY, 'must be HH:MM (00:00 to 23:59)')),
  end: z.string().check(z.regex(TIME_OF_DAY, 'must be HH:MM (00:00 to 23:59)')),
  timezone: z.string().check(z.minLength(1), z.maxLength(64)),
});
/**
 * The `update` command (DESIGN.md §19): the artifact's signed manifest and how to install it. Only an update
 * (`POST /v1/operator/updates`) sends it; the charger checks the manifest itself (agent/core/update-manifest.ts),
 * so its fields are typed loosely here and refused there with a reason per field.
 */
export const UpdateParams = z.object({
  update_id: Identifier,
  artifact_id: Identifier,
  kind: z.string(),
  version: z.string(),
  target: z.string(),
  sha256: z.string(),
  size: z.number(),
  signature: z.string(),
  install: z.enum(UPDATE_INSTALL_MODES),
  window: z.optional(UpdateWindowParams),
  /** The update's health time (rollout.health_seconds): an agent release on trial commits within it or goes back. */
  health_seconds: z.optional(z.int().check(z.minimum(0), z.maximum(86_400))),
});

/** Remote maintenance (DESIGN.md §20). */
export const RESET_MODES = ['when_idle', 'immediate'] as const;
export const RESET_TARGETS = ['agent', 'charger'] as const;
/** `agent` restarts the agent process; `charger` reboots the hardware through the HAL's `reboot()`. */
export const ResetParams = z.object({ mode: z.enum(RESET_MODES), target: z.enum(RESET_TARGETS) });
export const SetAvailabilityParams = z.object({ connector_id: connector, available: z.boolean() });
export const UnlockConnectorParams = z.object({ connector_id: connector });
export const SetConfigurationParams = z.object({ values: ConfigurationChange });

export const CommandParams = {
  stop: StopParams,
  start: StartParams,
  discharge: DischargeParams,
  set_schedule: SetScheduleParams,
  delete_schedule: DeleteScheduleParams,
  set_power_limit: SetPowerLimitParams,
  pause_charging: PauseChargingParams,
  update: UpdateParams,
  reset: ResetParams,
  set_availability: SetAvailabilityParams,
  unlock_connector: UnlockConnectorParams,
  set_configuration: SetConfigurationParams,
  upload_diagnostics: UploadDiagnosticsParams,
} as const;
export type CommandParamsOf<K extends keyof typeof CommandParams> = z.infer<(typeof CommandParams)[K]>;
