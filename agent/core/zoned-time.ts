/**
 * Wall-clock ↔ instant conversion in an IANA timezone, on the zone's offsets from the system's tz database
 * (`tz/zone-offsets.ts`; Intl where the system lacks a zone). No date library.
 *
 * A local calendar day is an integer "day number": days since 1970-01-01 in the proleptic Gregorian
 * calendar, independent of any timezone. Times of day are minutes after local midnight.
 *
 * DST rules (DESIGN.md §6):
 * - a wall-clock time that does not exist (spring forward) maps to the first valid instant after it,
 *   which is the transition instant itself (Berlin 2026-03-29 02:30 → 01:00Z, shown locally as 03:00);
 * - a wall-clock time that occurs twice (fall back) maps to its first occurrence.
 */
import type { DayOfWeek } from '../../shared/schedule.js';
import { offsetsOf } from './tz/zone-offsets.js';

export const MS_PER_MINUTE = 60_000;
export const MS_PER_HOUR = 3_600_000;
export const MS_PER_DAY = 86_400_000;
export const MINUTES_PER_DAY = 1440;

/** mon = 0 … sun = 6, matching the order of `DayOfWeek`. */
const WEEKDAYS: readonly DayOfWeek[] = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'];

export interface WallClock {
  /** Local calendar day number (days since 1970-01-01). */
  day: number;
  /** Minutes after local midnight, 0..1439. */
  minuteOfDay: number;
  second: number;
}

/** UTC offset of `timeZone` at `instantMs`, in ms (Berlin in summer: +7_200_000). */
export function utcOffsetMs(instantMs: number, timeZone: string): number {
  return offsetsOf(timeZone)(instantMs);
}

/** The local wall-clock fields at `instantMs`, as if they were a UTC time (ms, second precision). */
function wallClockAsUtcMs(instantMs: number, timeZone: string): number {
  const wholeSecond = Math.floor(instantMs / 1000) * 1000;
  return wholeSecond + utcOffsetMs(wholeSecond, timeZone);
}

export function wallClockAt(instantMs: number, timeZone: string): WallClock {
  const local = wallClockAsUtcMs(instantMs, timeZone);
  const day = Math.floor(local / MS_PER_DAY);
  const msOfDay = local - day * MS_PER_DAY;
  return {
    day,
    minuteOfDay: Math.floor(msOfDay / MS_PER_MINUTE),
    second: Math.floor((msOfDay % MS_PER_MINUTE) / 1000),
  };
}

/** The local calendar day number that contains `instantMs`. */
export function localDayAt(instantMs: number, timeZone: string): number {
  return wallClockAt(instantMs, timeZone).day;
}

export function weekdayOf(day: number): DayOfWeek {
  // Day 0 (1970-01-01) was a Thursday, index 3 when Monday is 0.
  return WEEKDAYS[(((day + 3) % 7) + 7) % 7] as DayOfWeek;
}

/** Day number of a calendar date given as year, month 1-12, day of month. */
export function dayNumberOf(year: number, month: number, dayOfMonth: number): number {
  return Date.UTC(year, month - 1, dayOfMonth) / MS_PER_DAY;
}

/** Minutes after midnight of an `HH:MM` string. */
export function minutesOfClockTime(hhmm: string): number {
  const [hours, minutes] = hhmm.split(':').map(Number);
  return (hours ?? 0) * 60 + (minutes ?? 0);
}

/**
 * The instant at which the wall clock in `timeZone` shows `minuteOfDay` on local `day`.
 * `minuteOfDay` may run past 1439 (it simply rolls into the following days).
 */
export function instantAtWallClock(day: number, minuteOfDay: number, timeZone: string): number {
  const wholeDay = day + Math.floor(minuteOfDay / MINUTES_PER_DAY);
  const minute = minuteOfDay - (wholeDay - day) * MINUTES_PER_DAY;
  const local = wholeDay * MS_PER_DAY + minute * MS_PER_MINUTE;
  const { before: offsetBefore, after: offsetAfter } = offsetsAround(wholeDay, timeZone);
  // No transition near this day: one offset, one reading.
  if (offsetBefore === offsetAfter) return local - offsetBefore;
  const key = `${timeZone}|${local}`;
  const cached = nearTransitionCache.get(key);
  if (cached !== undefined) return cached;
  const instant = instantNearTransition(local, offsetBefore, offsetAfter, timeZone);
  if (nearTransitionCache.size >= CACHE_MAX) nearTransitionCache.clear();
  nearTransitionCache.set(key, instant);
  return instant;
}

function instantNearTransition(
  local: number,
  offsetBefore: number,
  offsetAfter: number,
  timeZone: string,
): number {
  const candidates: number[] = [];
  for (const offset of [offsetBefore, offsetAfter]) {
    const instant = local - offset;
    if (utcOffsetMs(instant, timeZone) === offset) candidates.push(instant);
  }
  // Fall back: both readings exist, the earlier instant is the first occurrence.
  if (candidates.length > 0) return Math.min(...candidates);
  // Spring forward: the wall-clock time was skipped. Reading it with the earlier offset lands after the
  // transition, with the later offset before it; the first valid instant is the transition itself.
  return transitionBetween(local - offsetAfter, local - offsetBefore, timeZone);
}

// Bounded caches: conversions repeat on the same few days.
const CACHE_MAX = 4096;
const offsetsCache = new Map<string, { before: number; after: number }>();
const nearTransitionCache = new Map<string, number>();

/**
 * Offsets in force a day before and two days after local `day` begins. They differ only when a transition
 * is near (offsets are within ±14 h, so these readings are outside the day's neighbourhood).
 */
function offsetsAround(day: number, timeZone: string): { before: number; after: number } {
  const key = `${timeZone}|${day}`;
  let offsets = offsetsCache.get(key);
  if (!offsets) {
    const dayStart = day * MS_PER_DAY;
    offsets = {
      before: utcOffsetMs(dayStart - MS_PER_DAY, timeZone),
      after: utcOffsetMs(dayStart + 2 * MS_PER_DAY, timeZone),
    };
    if (offsetsCache.size >= CACHE_MAX) offsetsCache.clear();
    offsetsCache.set(key, offsets);
  }
  return offsets;
}

/** First instant in (`before`, `after`] whose UTC offset differs from the one at `before`. */
function transitionBetween(before: number, after: number, timeZone: string): number {
  const offsetAtStart = utcOffsetMs(before, timeZone);
  // Offsets change on whole seconds; bisect on seconds.
  let low = Math.floor(before / 1000);
  let high = Math.ceil(after / 1000);
  while (high - low > 1) {
    const middle = Math.floor((low + high) / 2);
    if (utcOffsetMs(middle * 1000, timeZone) === offsetAtStart) low = middle;
    else high = middle;
  }
  return high * 1000;
}
