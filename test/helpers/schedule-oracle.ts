import { DateTime } from 'luxon';

/**
 * An independent oracle for the agent's schedule engine (DESIGN.md §6 and the decisions recorded in the header of
 * agent/core/schedule-engine.ts), written from the rules on top of Luxon: what a connector may do at an instant, and
 * the earliest later instant at which that answer may change.
 *
 * It shares no code with the agent (no import from agent/): calendar days are Luxon dates, weekdays Luxon's,
 * wall-clock times are resolved with `DateTime.fromObject` and `getPossibleOffsets`, and a wall-clock time that
 * a spring-forward gap skips is walked back to the transition minute by minute. It is slow and plain on purpose:
 * tests compare the engine with it (test/unit/agent/schedule-oracle.property.test.ts) and take their expected
 * power caps from it (test/integration/agent-30-days-offline.test.ts).
 */

export type OracleAction = 'charge' | 'discharge' | 'idle';
export type OracleWeekday = 'mon' | 'tue' | 'wed' | 'thu' | 'fri' | 'sat' | 'sun';

export interface OracleSlot {
  day_of_week?: OracleWeekday[];
  /** HH:MM */
  start: string;
  end: string;
  power_limit?: number;
  action: OracleAction;
}

export interface OracleSchedule {
  schedule_id: string;
  enabled: boolean;
  type: 'once' | 'daily' | 'weekly';
  time_slots: OracleSlot[];
  target_soc?: number;
  effective_from?: string;
  effective_until?: string;
  timezone: string;
  /** When the agent stored it: anchors a `once` schedule without `effective_from`. */
  received_at?: string;
}

export interface OracleLimit {
  control_id: string;
  kind: 'power_limit' | 'pause';
  power_limit_percent?: number;
  starts_at: string;
  ends_at: string;
}

export interface OracleInput {
  ratingKw: number;
  v2gCapable: boolean;
  schedules: readonly OracleSchedule[];
  limits: readonly OracleLimit[];
  soc?: number;
  now: number;
}

export interface OracleOccurrence {
  scheduleId: string;
  slotIndex: number;
  slot: OracleSlot;
  /** The schedule's `target_soc`. */
  targetSoc?: number;
  /** Instants (ms), clipped to the schedule's effective window. */
  startsAt: number;
  endsAt: number;
}

export interface OracleAnswer {
  mode: OracleAction;
  maxPowerKw: number;
  /** Limits in force, sorted by id. */
  activeLimitIds: string[];
  /** The slot occurrences in force (of schedules in effect). */
  active: OracleOccurrence[];
  /** Whether at least one enabled schedule is in effect. */
  restricted: boolean;
  /** Earliest edge after `now` and no later than `now + horizonMs`. */
  nextChangeAt?: number;
}

/** How far ahead the engine looks for its next change (8 days). */
export const ORACLE_HORIZON_MS = 8 * 86_400_000;

const WEEKDAYS: readonly OracleWeekday[] = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'];

/** A calendar date (no zone): Luxon in UTC, used for calendar arithmetic only. */
type CalendarDate = DateTime;

function calendarDate(year: number, month: number, day: number): CalendarDate {
  return DateTime.utc(year, month, day);
}

/** The local calendar date of `instant` in `zone`. */
export function localDateOf(instant: number, zone: string): CalendarDate {
  const local = DateTime.fromMillis(instant, { zone });
  return calendarDate(local.year, local.month, local.day);
}

function weekdayOf(date: CalendarDate): OracleWeekday {
  return WEEKDAYS[date.weekday - 1] as OracleWeekday;
}

function minutesOf(hhmm: string): number {
  const [h, m] = hhmm.split(':');
  return Number(h) * 60 + Number(m);
}

/** Naive wall-clock reading as a number, for comparing local times. */
function wallNumber(dt: DateTime): number {
  return Date.UTC(dt.year, dt.month - 1, dt.day, dt.hour, dt.minute, dt.second, dt.millisecond);
}

/**
 * The instant the wall clock in `zone` reads `minutes` after midnight of `date` (minutes may exceed a day).
 * DESIGN.md §6: a time that does not exist (spring forward) is the first valid instant after it — the
 * transition; a time that occurs twice (fall back) is its first occurrence.
 */
export function wallClockInstant(date: CalendarDate, minutes: number, zone: string): number {
  const wall = date.plus({ minutes }); // calendar arithmetic in UTC: the wall-clock fields wanted
  const fields = {
    year: wall.year,
    month: wall.month,
    day: wall.day,
    hour: wall.hour,
    minute: wall.minute,
  };
  const resolved = DateTime.fromObject(fields, { zone });
  const wanted = wallNumber(wall);
  if (wallNumber(resolved) === wanted) {
    return Math.min(...resolved.getPossibleOffsets().map((d) => d.toMillis()), resolved.toMillis());
  }
  // Skipped: Luxon moved it forward past the gap. The first valid instant is the transition: walk back while
  // the minute before still reads later than the wanted time.
  let t = resolved.toMillis();
  while (wallNumber(DateTime.fromMillis(t - 60_000, { zone })) > wanted) t -= 60_000;
  return t;
}

interface Window {
  from: number;
  until: number;
}

/** The first local date on or after `anchor` that the slot's weekdays allow (the anchor itself without any). */
function onceDate(slot: OracleSlot, anchor: CalendarDate): CalendarDate {
  if (!slot.day_of_week) return anchor;
  for (let i = 0; i < 7; i++) {
    const date = anchor.plus({ days: i });
    if (slot.day_of_week.includes(weekdayOf(date))) return date;
  }
  return anchor;
}

// Resolving wall-clock times is the oracle's cost; the same slot on the same date resolves the same way.
const occurrenceCache = new Map<string, Window | undefined>();

/** The slot's occurrence starting on `date` (unclipped), or undefined when a gap swallows it. */
function occurrenceOn(slot: OracleSlot, date: CalendarDate, zone: string): Window | undefined {
  const key = `${zone}|${date.toMillis()}|${slot.start}|${slot.end}`;
  if (occurrenceCache.has(key)) return occurrenceCache.get(key);
  if (occurrenceCache.size >= 100_000) occurrenceCache.clear();
  const occurrence = resolveOccurrence(slot, date, zone);
  occurrenceCache.set(key, occurrence);
  return occurrence;
}

function resolveOccurrence(slot: OracleSlot, date: CalendarDate, zone: string): Window | undefined {
  const start = minutesOf(slot.start);
  const end = minutesOf(slot.end);
  // end < start crosses midnight; end == start lasts until the same wall-clock time the next day.
  const endMinutes = end > start ? end : end + 24 * 60;
  const from = wallClockInstant(date, start, zone);
  const until = wallClockInstant(date, endMinutes, zone);
  return until > from ? { from, until } : undefined;
}

/** When the schedule is in effect, or undefined when never. */
export function effectiveWindow(schedule: OracleSchedule): Window | undefined {
  let from = schedule.effective_from ? Date.parse(schedule.effective_from) : Number.NEGATIVE_INFINITY;
  let until = schedule.effective_until ? Date.parse(schedule.effective_until) : Number.POSITIVE_INFINITY;
  if (schedule.type === 'once') {
    const anchor = schedule.effective_from ?? schedule.received_at;
    if (anchor === undefined) return undefined;
    from = Date.parse(anchor);
    const anchorDate = localDateOf(from, schedule.timezone);
    // A once schedule is spent when its last slot occurrence ends.
    let lastEnd = Number.NEGATIVE_INFINITY;
    for (const slot of schedule.time_slots) {
      const o = occurrenceOn(slot, onceDate(slot, anchorDate), schedule.timezone);
      if (o) lastEnd = Math.max(lastEnd, o.until);
    }
    until = Math.min(until, lastEnd);
  }
  return until > from ? { from, until } : undefined;
}

function slotApplies(
  schedule: OracleSchedule,
  slot: OracleSlot,
  date: CalendarDate,
  window: Window,
): boolean {
  if (schedule.type === 'once') {
    const anchorDate = localDateOf(window.from, schedule.timezone);
    return onceDate(slot, anchorDate).equals(date);
  }
  return !slot.day_of_week || slot.day_of_week.includes(weekdayOf(date));
}

/** Every occurrence of the schedule's slots that overlaps [from, to], clipped to its effective window. */
export function occurrences(schedule: OracleSchedule, from: number, to: number): OracleOccurrence[] {
  const window = effectiveWindow(schedule);
  if (!window) return [];
  const zone = schedule.timezone;
  // A slot lasts at most a day and an hour or so: starting two local dates back catches every running one.
  let date = localDateOf(Math.max(from, window.from), zone).minus({ days: 2 });
  const last = localDateOf(Math.min(to, window.until), zone).plus({ days: 1 });
  const found: OracleOccurrence[] = [];
  for (; date <= last; date = date.plus({ days: 1 })) {
    schedule.time_slots.forEach((slot, slotIndex) => {
      if (!slotApplies(schedule, slot, date, window)) return;
      const o = occurrenceOn(slot, date, zone);
      if (!o) return;
      const startsAt = Math.max(o.from, window.from);
      const endsAt = Math.min(o.until, window.until);
      if (endsAt <= startsAt || endsAt < from || startsAt > to) return;
      const occurrence: OracleOccurrence = {
        scheduleId: schedule.schedule_id,
        slotIndex,
        slot,
        startsAt,
        endsAt,
      };
      if (schedule.target_soc !== undefined) occurrence.targetSoc = schedule.target_soc;
      found.push(occurrence);
    });
  }
  return found;
}

/**
 * What the connector may do at `input.now`. `horizonMs` bounds the search for the next change (0: none is
 * searched, which is much cheaper).
 */
export function oracleEvaluate(input: OracleInput, horizonMs = ORACLE_HORIZON_MS): OracleAnswer {
  const { now } = input;
  const enabled = input.schedules.filter((s) => s.enabled);
  const inEffect = enabled.filter((s) => {
    const w = effectiveWindow(s);
    return w !== undefined && w.from <= now && now < w.until;
  });
  const active = inEffect.flatMap((s) =>
    occurrences(s, now, now).filter((o) => o.startsAt <= now && now < o.endsAt),
  );
  const limits = input.limits.filter((l) => Date.parse(l.starts_at) <= now && now < Date.parse(l.ends_at));

  // The schedules' verdict: a mode and the slot's power limit.
  let mode: OracleAction;
  let slotLimit = Number.POSITIVE_INFINITY;
  if (inEffect.length === 0) mode = 'charge';
  else if (active.length === 0) mode = 'idle';
  else if (active.some((o) => o.slot.action === 'idle')) mode = 'idle';
  else {
    const charging = active.filter((o) => o.slot.action === 'charge');
    const discharging = active.filter((o) => o.slot.action === 'discharge');
    if (charging.length > 0 && discharging.length > 0) mode = 'idle';
    else if (charging.length > 0) {
      const soc = input.soc;
      const reached =
        soc !== undefined && charging.some((o) => o.targetSoc !== undefined && soc >= o.targetSoc);
      mode = reached ? 'idle' : 'charge';
      for (const o of charging)
        slotLimit = Math.min(slotLimit, o.slot.power_limit ?? Number.POSITIVE_INFINITY);
    } else {
      mode = input.v2gCapable ? 'discharge' : 'idle';
      for (const o of discharging)
        slotLimit = Math.min(slotLimit, o.slot.power_limit ?? Number.POSITIVE_INFINITY);
    }
  }

  let cap = Number.POSITIVE_INFINITY;
  for (const l of limits) {
    if (l.kind === 'pause') cap = 0;
    else if (l.power_limit_percent !== undefined)
      cap = Math.min(cap, (l.power_limit_percent * input.ratingKw) / 100);
  }
  const maxPowerKw = mode === 'idle' ? 0 : Math.max(0, Math.min(input.ratingKw, slotLimit, cap));

  const answer: OracleAnswer = {
    mode: maxPowerKw > 0 ? mode : 'idle',
    maxPowerKw,
    activeLimitIds: limits.map((l) => l.control_id).sort(),
    active,
    restricted: inEffect.length > 0,
  };
  if (horizonMs > 0) {
    const horizon = now + horizonMs;
    const edges: number[] = [];
    for (const s of enabled) {
      const w = effectiveWindow(s);
      if (!w) continue;
      edges.push(w.from, w.until);
      for (const o of occurrences(s, now, horizon)) edges.push(o.startsAt, o.endsAt);
    }
    for (const l of input.limits) edges.push(Date.parse(l.starts_at), Date.parse(l.ends_at));
    const later = edges.filter((t) => t > now && t <= horizon);
    if (later.length > 0) answer.nextChangeAt = Math.min(...later);
  }
  return answer;
}
