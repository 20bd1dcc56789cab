/**
 * What one connector may do at one instant, from its stored schedules and flexibility limits (DESIGN.md §6).
 *
 * Pure: the instant is a parameter and nothing here reads the clock, so the agent can re-evaluate after a
 * reboot, a clock jump or a missed timer and always land in the right state.
 *
 * Wall-clock ↔ instant conversion and its DST rules live in zoned-time.ts: a skipped local time starts at
 * the transition instant (the first valid one), a repeated local time means its first occurrence.
 *
 * Decisions where DESIGN.md §6 leaves room (to be recorded in docs/decisions.md):
 * - Several schedules in effect: their slots are united (a car may charge in any schedule's charge slot);
 *   where active slots overlap, the most restrictive wins: any `idle` slot idles, `charge` overlapping
 *   `discharge` idles (conflicting intent, no power flow is the safe reading), otherwise the lowest
 *   `power_limit` and the lowest reached `target_soc` win.
 * - `once`: each slot applies on its own first matching day (its `day_of_week`, or any day) on or after the
 *   local day of `effective_from`; a slot occurrence is clipped to the effective window, so an occurrence on
 *   that day that ended before `effective_from` does nothing. Without `effective_from` the anchor is the
 *   schedule's `received_at` (when the agent stored it); with neither, the schedule cannot be placed in time
 *   and does nothing. A `once` schedule stops being in effect when its last slot occurrence ends, so a spent
 *   one-off plan does not block charging forever.
 * - A slot with `end == start` lasts until the same wall-clock time the next day (23 or 25 hours across a
 *   DST change). A slot whose wall-clock times both fall into a spring-forward gap is empty.
 * - Flexibility limits cap the magnitude of power flow in both directions (a pause also stops discharge).
 * - A result whose allowed power is 0 is reported as mode `idle`.
 */
import type { ChargingSchedule, SlotAction, TimeSlot } from '../../shared/schedule.js';
import {
  instantAtWallClock,
  localDayAt,
  MINUTES_PER_DAY,
  MS_PER_DAY,
  minutesOfClockTime,
  weekdayOf,
} from './zoned-time.js';

/** How far ahead `nextChangeAt` is searched. */
export const NEXT_CHANGE_HORIZON_MS = 8 * MS_PER_DAY;
/** Most answers change within this; searched first because it is much cheaper than the full horizon. */
const SHORT_HORIZON_MS = 36 * 3_600_000;

/** A schedule as the agent stores it: the wire schedule plus when the agent received it. */
export type StoredSchedule = ChargingSchedule & {
  /** ISO time the agent stored the schedule; anchors a `once` schedule that has no `effective_from`. */
  received_at?: string;
};

/** A flexibility control as the agent stores it; it applies to every connector of the charger. */
export interface FlexibilityLimit {
  control_id: string;
  kind: 'power_limit' | 'pause';
  /** For `power_limit`: percent of the connector rating; absent means no cap. */
  power_limit_percent?: number;
  starts_at: string;
  ends_at: string;
}

export interface ConnectorPolicyInput {
  ratingKw: number;
  v2gCapable: boolean;
  schedules: readonly StoredSchedule[];
  limits: readonly FlexibilityLimit[];
  /** Vehicle SOC, percent, when known. */
  soc?: number;
  now: Date | number;
}

export type ConnectorMode = SlotAction;

export interface ActiveSlot {
  scheduleId: string;
  slotIndex: number;
  start: string;
  end: string;
  action: SlotAction;
  powerLimitKw?: number;
  /** This occurrence of the slot, clipped to its schedule's effective window. */
  startsAt: Date;
  endsAt: Date;
}

export interface ConnectorAllowance {
  mode: ConnectorMode;
  /** Largest power flow allowed now, kW (export power while discharging); 0 when idle. */
  maxPowerKw: number;
  reason: string;
  activeScheduleId?: string;
  activeSlot?: ActiveSlot;
  activeLimitIds: string[];
  /** Earliest future instant at which the answer may change; absent when none within the horizon. */
  nextChangeAt?: Date;
}

interface SlotOccurrence {
  schedule: StoredSchedule;
  slotIndex: number;
  slot: TimeSlot;
  startsAt: number;
  endsAt: number;
}

interface EffectiveWindow {
  from: number;
  until: number;
}

export function evaluateConnector(input: ConnectorPolicyInput): ConnectorAllowance {
  const now = typeof input.now === 'number' ? input.now : input.now.getTime();
  const horizon = now + NEXT_CHANGE_HORIZON_MS;
  const shortHorizon = now + SHORT_HORIZON_MS;
  const windowed = input.schedules
    .filter((s) => s.enabled)
    .flatMap((schedule) => {
      const window = effectiveWindowOf(schedule);
      return window ? [{ schedule, window }] : [];
    });

  const inEffect: StoredSchedule[] = [];
  const active: SlotOccurrence[] = [];
  const edges: number[] = [];
  const nearSlotEdges: number[] = [];
  for (const { schedule, window } of windowed) {
    edges.push(window.from, window.until);
    const occurrences = occurrencesBetween(schedule, window, now, shortHorizon);
    for (const o of occurrences) nearSlotEdges.push(o.startsAt, o.endsAt);
    if (window.from <= now && now < window.until) {
      inEffect.push(schedule);
      active.push(...occurrences.filter((o) => o.startsAt <= now && now < o.endsAt));
    }
  }
  for (const limit of input.limits) edges.push(Date.parse(limit.starts_at), Date.parse(limit.ends_at));

  // Slot occurrences are enumerated by local day, and a day's slots start after every instant of the
  // previous day; so the near enumeration holds every slot edge up to the short horizon. Only when nothing
  // changes that soon is the whole horizon (an order of magnitude more time-zone work) enumerated.
  let next = earliestAfter([...edges, ...nearSlotEdges], now, shortHorizon);
  if (next === undefined) {
    const farSlotEdges = windowed.flatMap(({ schedule, window }) =>
      occurrencesBetween(schedule, window, now, horizon).flatMap((o) => [o.startsAt, o.endsAt]),
    );
    next = earliestAfter([...edges, ...farSlotEdges], now, horizon);
  }

  const activeLimits = input.limits.filter(
    (l) => Date.parse(l.starts_at) <= now && now < Date.parse(l.ends_at),
  );

  const decision = decideFromSchedules(inEffect, active, input);
  const { capKw, notes } = capFromLimits(activeLimits, input.ratingKw);

  let maxPowerKw = 0;
  if (decision.mode !== 'idle') {
    maxPowerKw = Math.max(
      0,
      Math.min(input.ratingKw, decision.slotLimitKw ?? Number.POSITIVE_INFINITY, capKw),
    );
  }
  const mode: ConnectorMode = maxPowerKw > 0 ? decision.mode : 'idle';

  const result: ConnectorAllowance = {
    mode,
    maxPowerKw,
    reason: [decision.reason, ...notes].join('; '),
    activeLimitIds: activeLimits.map((l) => l.control_id),
  };
  if (decision.chosen) {
    result.activeScheduleId = decision.chosen.schedule.schedule_id;
    result.activeSlot = describeSlot(decision.chosen);
  }
  if (next !== undefined) result.nextChangeAt = new Date(next);
  return result;
}

interface ScheduleDecision {
  mode: ConnectorMode;
  slotLimitKw?: number;
  chosen?: SlotOccurrence;
  reason: string;
}

function decideFromSchedules(
  inEffect: readonly StoredSchedule[],
  active: readonly SlotOccurrence[],
  input: ConnectorPolicyInput,
): ScheduleDecision {
  if (inEffect.length === 0)
    return { mode: 'charge', reason: 'no schedule in effect: charging unrestricted' };
  if (active.length === 0) {
    const ids = inEffect.map((s) => s.schedule_id).join(', ');
    return { mode: 'idle', reason: `outside the slots of schedule ${ids}` };
  }

  const idle = active.find((o) => o.slot.action === 'idle');
  if (idle) return { mode: 'idle', chosen: idle, reason: `${labelOf(idle)}: idle slot` };
  const charging = active.filter((o) => o.slot.action === 'charge');
  const discharging = active.filter((o) => o.slot.action === 'discharge');
  if (charging.length > 0 && discharging.length > 0) {
    return {
      mode: 'idle',
      chosen: charging[0],
      reason: `${labelOf(charging[0] as SlotOccurrence)} overlaps discharge slot ${labelOf(discharging[0] as SlotOccurrence)}: conflicting slots idle`,
    };
  }

  const chosen = lowestPowerLimit(charging.length > 0 ? charging : discharging);
  const slotLimitKw = chosen.slot.power_limit;
  if (chosen.slot.action === 'discharge') {
    if (!input.v2gCapable) {
      return {
        mode: 'idle',
        chosen,
        reason: `${labelOf(chosen)}: discharge slot but connector is not V2G-capable`,
      };
    }
    return withSlotLimit(
      { mode: 'discharge', chosen, reason: `${labelOf(chosen)}: discharge slot` },
      slotLimitKw,
    );
  }

  const soc = input.soc;
  if (soc !== undefined) {
    // Any active charge slot whose schedule's target is reached stops charging (most restrictive wins).
    const reached = charging.find((o) => o.schedule.target_soc !== undefined && soc >= o.schedule.target_soc);
    if (reached) {
      return {
        mode: 'idle',
        chosen: reached,
        reason: `${labelOf(reached)}: target_soc ${reached.schedule.target_soc}% reached (soc ${soc}%)`,
      };
    }
  }
  return withSlotLimit({ mode: 'charge', chosen, reason: `${labelOf(chosen)}: charge slot` }, slotLimitKw);
}

function withSlotLimit(decision: ScheduleDecision, slotLimitKw: number | undefined): ScheduleDecision {
  if (slotLimitKw !== undefined) decision.slotLimitKw = slotLimitKw;
  return decision;
}

function lowestPowerLimit(occurrences: readonly SlotOccurrence[]): SlotOccurrence {
  let best = occurrences[0] as SlotOccurrence;
  for (const o of occurrences) {
    if (
      (o.slot.power_limit ?? Number.POSITIVE_INFINITY) < (best.slot.power_limit ?? Number.POSITIVE_INFINITY)
    ) {
      best = o;
    }
  }
  return best;
}

function capFromLimits(
  limits: readonly FlexibilityLimit[],
  ratingKw: number,
): { capKw: number; notes: string[] } {
  let capKw = Number.POSITIVE_INFINITY;
  const notes: string[] = [];
  for (const limit of limits) {
    if (limit.kind === 'pause') {
      capKw = 0;
      notes.push(`paused by control ${limit.control_id}`);
    } else if (limit.power_limit_percent !== undefined) {
      capKw = Math.min(capKw, (limit.power_limit_percent * ratingKw) / 100);
      notes.push(`limited to ${limit.power_limit_percent}% by control ${limit.control_id}`);
    }
  }
  return { capKw, notes };
}

function labelOf(o: SlotOccurrence): string {
  return `schedule ${o.schedule.schedule_id} slot ${o.slotIndex} (${o.slot.start}-${o.slot.end})`;
}

function describeSlot(o: SlotOccurrence): ActiveSlot {
  const slot: ActiveSlot = {
    scheduleId: o.schedule.schedule_id,
    slotIndex: o.slotIndex,
    start: o.slot.start,
    end: o.slot.end,
    action: o.slot.action,
    startsAt: new Date(o.startsAt),
    endsAt: new Date(o.endsAt),
  };
  if (o.slot.power_limit !== undefined) slot.powerLimitKw = o.slot.power_limit;
  return slot;
}

function earliestAfter(instants: readonly number[], after: number, horizon: number): number | undefined {
  let earliest: number | undefined;
  for (const t of instants) {
    if (t > after && t <= horizon && (earliest === undefined || t < earliest)) earliest = t;
  }
  return earliest;
}

/**
 * When a schedule is in effect, or undefined when it never is. A `once` schedule ends with its last slot
 * occurrence (see the header).
 */
export function effectiveWindowOf(schedule: StoredSchedule): EffectiveWindow | undefined {
  let from = schedule.effective_from ? Date.parse(schedule.effective_from) : Number.NEGATIVE_INFINITY;
  let until = schedule.effective_until ? Date.parse(schedule.effective_until) : Number.POSITIVE_INFINITY;
  if (schedule.type === 'once') {
    const anchor = schedule.effective_from ?? schedule.received_at;
    if (anchor === undefined) return undefined;
    from = Date.parse(anchor);
    const anchorDay = localDayAt(from, schedule.timezone);
    let lastEnd = Number.NEGATIVE_INFINITY;
    for (const slot of schedule.time_slots) {
      const occurrence = occurrenceOnDay(slot, onceDayOf(slot, anchorDay), schedule.timezone);
      if (occurrence) lastEnd = Math.max(lastEnd, occurrence.endsAt);
    }
    until = Math.min(until, lastEnd);
  }
  if (Number.isNaN(from) || Number.isNaN(until) || until <= from) return undefined;
  return { from, until };
}

/** The local day a `once` slot applies on: the first day on or after `anchorDay` its weekdays allow. */
function onceDayOf(slot: TimeSlot, anchorDay: number): number {
  if (!slot.day_of_week) return anchorDay;
  for (let day = anchorDay; day < anchorDay + 7; day++) {
    if (slot.day_of_week.includes(weekdayOf(day))) return day;
  }
  return anchorDay;
}

function slotAppliesOn(
  schedule: StoredSchedule,
  slot: TimeSlot,
  day: number,
  anchorDay: number | undefined,
): boolean {
  if (schedule.type === 'once') return anchorDay !== undefined && day === onceDayOf(slot, anchorDay);
  // daily: day_of_week, when present, filters; weekly: required by the schema, treated alike if absent.
  return !slot.day_of_week || slot.day_of_week.includes(weekdayOf(day));
}

/**
 * The slot's occurrence starting on local `day`, as instants. `end < start` crosses midnight into the next
 * day; `end == start` runs to the same wall-clock time the next day. Empty when a DST gap swallows it.
 */
function occurrenceOnDay(
  slot: TimeSlot,
  day: number,
  timeZone: string,
): { startsAt: number; endsAt: number } | undefined {
  const startMinute = minutesOfClockTime(slot.start);
  const endMinute = minutesOfClockTime(slot.end);
  const endMinuteFromDayStart = endMinute > startMinute ? endMinute : endMinute + MINUTES_PER_DAY;
  const startsAt = instantAtWallClock(day, startMinute, timeZone);
  const endsAt = instantAtWallClock(day, endMinuteFromDayStart, timeZone);
  return endsAt > startsAt ? { startsAt, endsAt } : undefined;
}

/** Slot occurrences that overlap [`from`, `to`], clipped to the schedule's effective window. */
function occurrencesBetween(
  schedule: StoredSchedule,
  window: EffectiveWindow,
  from: number,
  to: number,
): SlotOccurrence[] {
  const tz = schedule.timezone;
  const anchorDay = schedule.type === 'once' ? localDayAt(window.from, tz) : undefined;
  // A slot lasts at most 25 hours, so one that starts two local days earlier can no longer be running.
  const firstDay = localDayAt(Math.max(from, window.from), tz) - 2;
  const lastDay = localDayAt(Math.min(to, window.until), tz);
  const occurrences: SlotOccurrence[] = [];
  for (let day = firstDay; day <= lastDay; day++) {
    schedule.time_slots.forEach((slot, slotIndex) => {
      if (!slotAppliesOn(schedule, slot, day, anchorDay)) return;
      const occurrence = occurrenceOnDay(slot, day, tz);
      if (!occurrence) return;
      const startsAt = Math.max(occurrence.startsAt, window.from);
      const endsAt = Math.min(occurrence.endsAt, window.until);
      if (endsAt <= startsAt || endsAt < from || startsAt > to) return;
      occurrences.push({ schedule, slotIndex, slot, startsAt, endsAt });
    });
  }
  return occurrences;
}
