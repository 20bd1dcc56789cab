/**
 * What one connector should be doing now, and which HAL calls get it there. Pure: the control loop feeds it
 * the stored state, the latest reading and the instant, and carries out the actions it returns.
 *
 * Remote commands become *overrides* stored per connector, not one-off HAL calls, so that the control loop
 * (which re-evaluates on every change) does not undo them a moment later and a reboot does not forget them:
 * - `stop`: no power flow until the vehicle leaves (or another command replaces it);
 * - `start`: charge now even outside the schedule's charge slots, until the vehicle leaves; stops at
 *   `target_soc`, capped by `power_limit`;
 * - `discharge`: export until `until` (acceptance + duration), stopping at `min_soc`.
 * Flexibility limits (grid operator's caps and pauses) still apply to every override: they are the reason the
 * platform can promise a site or a fleet a ceiling.
 */
import type { ConnectorInfo, ConnectorReading } from '../hal.js';
import { type OutOfService, outOfServiceReason } from './availability.js';
import {
  type ConnectorAllowance,
  evaluateConnector,
  type FlexibilityLimit,
  type StoredSchedule,
} from './schedule-engine.js';

export type ConnectorOverride =
  | { kind: 'stop'; commandId: string; since: string }
  | { kind: 'start'; commandId: string; since: string; targetSoc?: number; powerLimitKw?: number }
  | { kind: 'discharge'; commandId: string; since: string; until: string; powerKw: number; minSoc: number };

export type TargetMode = 'charge' | 'discharge' | 'idle';

export interface ConnectorTarget {
  mode: TargetMode;
  /** The cap set on the hardware, kW: the allowed charge or export power; 0 when idle. */
  powerLimitKw: number;
  reason: string;
  /** Where the decision came from. */
  source: 'schedule' | 'override' | 'out_of_service';
  activeScheduleId?: string;
  activeLimitIds: string[];
  /** Earliest instant at which the answer may change, ms. */
  nextChangeAt?: number;
}

export interface ConnectorDecisionInput {
  connector: ConnectorInfo;
  schedules: readonly StoredSchedule[];
  limits: readonly FlexibilityLimit[];
  override?: ConnectorOverride;
  /** Taken out of service by the operator (core/availability.ts): idle whatever else says. */
  outOfService?: OutOfService;
  /** Latest reading; absent when the hardware could not be read. */
  reading?: ConnectorReading;
  now: number;
}

/** An override that no longer applies at `now` (a discharge whose window ended). */
export function overrideExpired(override: ConnectorOverride, now: number): boolean {
  return override.kind === 'discharge' && Date.parse(override.until) <= now;
}

export function decideConnector(input: ConnectorDecisionInput): ConnectorTarget {
  const { connector, reading, now } = input;
  const outOfService = outOfServiceReason(input.outOfService);
  if (outOfService) {
    return {
      mode: 'idle',
      powerLimitKw: 0,
      reason: outOfService,
      source: 'out_of_service',
      activeLimitIds: [],
    };
  }
  const soc = reading?.soc;
  const override = input.override && !overrideExpired(input.override, now) ? input.override : undefined;
  if (!override) {
    return fromAllowance(
      evaluateConnector({
        ratingKw: connector.ratedPowerKw,
        v2gCapable: connector.v2gCapable,
        schedules: input.schedules,
        limits: input.limits,
        ...(soc !== undefined ? { soc } : {}),
        now,
      }),
    );
  }

  // Overrides replace the schedule but not the flexibility limits: evaluate the limits alone.
  const limitsOnly = evaluateConnector({
    ratingKw: connector.ratedPowerKw,
    v2gCapable: connector.v2gCapable,
    schedules: [],
    limits: input.limits,
    now,
  });
  const capKw = limitsOnly.mode === 'idle' ? 0 : limitsOnly.maxPowerKw;
  const base = {
    source: 'override' as const,
    activeLimitIds: limitsOnly.activeLimitIds,
    ...(limitsOnly.nextChangeAt ? { nextChangeAt: limitsOnly.nextChangeAt.getTime() } : {}),
  };
  // The engine's reason starts with its (empty) schedule verdict; keep only what the limits add.
  const limitNotes = limitsOnly.reason.split('; ').slice(1).join('; ');
  const limitNote = limitNotes ? `; ${limitNotes}` : '';

  switch (override.kind) {
    case 'stop':
      return { ...base, mode: 'idle', powerLimitKw: 0, reason: `stopped by command ${override.commandId}` };
    case 'start': {
      if (override.targetSoc !== undefined && soc !== undefined && soc >= override.targetSoc) {
        return {
          ...base,
          mode: 'idle',
          powerLimitKw: 0,
          reason: `command ${override.commandId}: target_soc ${override.targetSoc}% reached (soc ${soc}%)`,
        };
      }
      const kw = Math.min(capKw, override.powerLimitKw ?? Number.POSITIVE_INFINITY);
      if (kw <= 0) {
        return {
          ...base,
          mode: 'idle',
          powerLimitKw: 0,
          reason: `started by command ${override.commandId}${limitNote}`,
        };
      }
      return {
        ...base,
        mode: 'charge',
        powerLimitKw: kw,
        reason: `started by command ${override.commandId}${limitNote}`,
      };
    }
    case 'discharge': {
      const until = Date.parse(override.until);
      const nextChangeAt = Math.min(base.nextChangeAt ?? Number.POSITIVE_INFINITY, until);
      const timed = { ...base, nextChangeAt };
      if (!connector.v2gCapable) {
        return { ...timed, mode: 'idle', powerLimitKw: 0, reason: 'discharge requested but no V2G hardware' };
      }
      if (soc !== undefined && soc <= override.minSoc) {
        return {
          ...timed,
          mode: 'idle',
          powerLimitKw: 0,
          reason: `command ${override.commandId}: min_soc ${override.minSoc}% reached (soc ${soc}%)`,
        };
      }
      const kw = Math.min(capKw, override.powerKw);
      if (kw <= 0) {
        return {
          ...timed,
          mode: 'idle',
          powerLimitKw: 0,
          reason: `discharge by command ${override.commandId}${limitNote}`,
        };
      }
      return {
        ...timed,
        mode: 'discharge',
        powerLimitKw: kw,
        reason: `discharging by command ${override.commandId}${limitNote}`,
      };
    }
  }
}

function fromAllowance(a: ConnectorAllowance): ConnectorTarget {
  const target: ConnectorTarget = {
    mode: a.mode,
    powerLimitKw: a.mode === 'idle' ? 0 : a.maxPowerKw,
    reason: a.reason,
    source: 'schedule',
    activeLimitIds: a.activeLimitIds,
  };
  if (a.activeScheduleId) target.activeScheduleId = a.activeScheduleId;
  if (a.nextChangeAt) target.nextChangeAt = a.nextChangeAt.getTime();
  return target;
}

export type HalAction =
  | { type: 'setPowerLimit'; kw: number }
  | { type: 'startCharging' }
  | { type: 'stopCharging' }
  | { type: 'startDischarging'; kw: number };

/** What the control loop last told the hardware, remembered in memory (a reboot re-applies everything). */
export interface AppliedState {
  powerLimitKw?: number;
  dischargeKw?: number;
}

/**
 * HAL calls that move the connector from `reading` to `target`. The power cap goes first, so that a session
 * never starts above the new cap. An idle target also sets the cap to 0: if hardware or vehicle begin a
 * session on their own, still no power flows.
 */
export function planActions(
  target: ConnectorTarget,
  reading: ConnectorReading | undefined,
  applied: AppliedState,
): HalAction[] {
  const actions: HalAction[] = [];
  if (applied.powerLimitKw !== target.powerLimitKw) {
    actions.push({ type: 'setPowerLimit', kw: target.powerLimitKw });
  }
  if (!reading) return actions;
  const flowing = reading.state === 'charging' || reading.state === 'discharging';
  if (target.mode === 'idle' || !reading.vehiclePresent || reading.faultCode !== 0) {
    if (flowing) actions.push({ type: 'stopCharging' });
    return actions;
  }
  if (target.mode === 'charge' && reading.state !== 'charging') {
    actions.push({ type: 'startCharging' });
  } else if (
    target.mode === 'discharge' &&
    (reading.state !== 'discharging' || applied.dischargeKw !== target.powerLimitKw)
  ) {
    actions.push({ type: 'startDischarging', kw: target.powerLimitKw });
  }
  return actions;
}

/** True when two targets ask the same of the hardware and say so for the same reason. */
export function sameTarget(a: ConnectorTarget | undefined, b: ConnectorTarget): boolean {
  return a !== undefined && a.mode === b.mode && a.powerLimitKw === b.powerLimitKw && a.reason === b.reason;
}
