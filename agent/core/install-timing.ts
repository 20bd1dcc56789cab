/**
 * When a verified update may install (DESIGN.md §19, "The agent"). Pure: the runner asks again whenever what it
 * depends on changes (a connector's state, the stored schedules) and at the instant it names.
 *
 * - `when_idle`: no connector charging or discharging, no schedule slot starting within 10 minutes, and inside
 *   the window when one is given.
 * - `immediate`: ignores connectors and schedules (the operator asked for it now) but still honours the window:
 *   a window is the site's promise of when chargers may restart, and `immediate` only says not to wait for idle.
 *
 * The window is `[start, end)` in the site's local time; `end` before `start` runs past midnight. Across DST
 * changes it follows zoned-time.ts: a wall-clock time that does not exist maps to the transition instant, one
 * that repeats to its first occurrence. So a window the spring-forward gap swallows whole (02:00-03:00 in
 * Europe/Berlin on the last Sunday of March) does not open that day, and one in the repeated hour of the last
 * Sunday of October (02:00-03:00) runs from the first 02:00 to 03:00, two hours.
 */
import type { SlotAction } from '../../shared/schedule.js';
import { type ConnectorPolicyInput, evaluateConnector, type StoredSchedule } from './schedule-engine.js';
import {
  instantAtWallClock,
  localDayAt,
  MINUTES_PER_DAY,
  MS_PER_MINUTE,
  minutesOfClockTime,
} from './zoned-time.js';

/** A schedule slot starting this soon holds a `when_idle` install back (the charger must be there for it). */
export const SLOT_LEAD_MS = 10 * MS_PER_MINUTE;

export type InstallMode = 'when_idle' | 'immediate';

export interface InstallWindow {
  start: string;
  end: string;
  timezone: string;
}

export interface InstallTimingInput {
  now: number;
  install: InstallMode;
  window?: InstallWindow;
  /** Connectors charging or discharging now. */
  busyConnectors: readonly number[];
  /** The earliest instant after `now` at which a stored schedule slot starts, if any is known. */
  nextSlotStartAt?: number;
}

/** What the install waits for: the runner re-evaluates on that change, and at `recheckAt` when given. */
export type InstallWait = 'window' | 'connectors' | 'schedule';

export type InstallTiming =
  | { install: true }
  | { install: false; waitFor: InstallWait; reason: string; recheckAt?: number };

interface Opening {
  opensAt: number;
  closesAt: number;
}

/** The window's occurrence that opens on local `day` (empty when a DST gap swallows it). */
function openingOn(day: number, window: InstallWindow): Opening {
  const start = minutesOfClockTime(window.start);
  const endMinute = minutesOfClockTime(window.end);
  const end = endMinute > start ? endMinute : endMinute + MINUTES_PER_DAY;
  return {
    opensAt: instantAtWallClock(day, start, window.timezone),
    closesAt: instantAtWallClock(day, end, window.timezone),
  };
}

/** Whether `now` is inside the window, or else when it next opens. */
export function windowAt(
  now: number,
  window: InstallWindow,
): { inside: true; closesAt: number } | { inside: false; opensAt: number } {
  const today = localDayAt(now, window.timezone);
  // A window that runs past midnight may have opened yesterday.
  for (const day of [today - 1, today]) {
    const o = openingOn(day, window);
    if (o.opensAt <= now && now < o.closesAt) return { inside: true, closesAt: o.closesAt };
  }
  // The next opening that is not empty; at most a day or two ahead (a gap swallows one day at most).
  for (let day = today; day <= today + 3; day++) {
    const o = openingOn(day, window);
    if (o.opensAt > now && o.closesAt > o.opensAt) return { inside: false, opensAt: o.opensAt };
  }
  return { inside: false, opensAt: now + MINUTES_PER_DAY * MS_PER_MINUTE };
}

export function decideInstallTiming(input: InstallTimingInput): InstallTiming {
  const { now, window } = input;
  if (window) {
    const w = windowAt(now, window);
    if (!w.inside) {
      const opens = new Date(w.opensAt).toISOString();
      const span = `${window.start}-${window.end} (${window.timezone})`;
      return {
        install: false,
        waitFor: 'window',
        reason: `outside the install window ${span}; opens at ${opens}`,
        recheckAt: w.opensAt,
      };
    }
  }
  if (input.install === 'immediate') return { install: true };
  if (input.busyConnectors.length > 0) {
    const ids = [...input.busyConnectors].sort((a, b) => a - b).join(', ');
    return {
      install: false,
      waitFor: 'connectors',
      reason: `waiting until no connector charges or discharges (busy: ${ids})`,
    };
  }
  const slot = input.nextSlotStartAt;
  if (slot !== undefined && slot > now && slot - now <= SLOT_LEAD_MS) {
    return {
      install: false,
      waitFor: 'schedule',
      reason: `a schedule slot starts at ${new Date(slot).toISOString()}, within 10 minutes`,
      recheckAt: slot,
    };
  }
  return { install: true };
}

const ACTIVE: readonly SlotAction[] = ['charge', 'discharge'];

/**
 * The earliest instant in `(now, now + horizonMs]` at which a slot of `schedules` starts, found through the
 * schedule engine's own answers (so it agrees with what the control loop will do): each change of answer is
 * stepped to and kept when a slot that charges or discharges begins there.
 */
export function nextSlotStart(
  schedules: readonly StoredSchedule[],
  now: number,
  horizonMs: number = SLOT_LEAD_MS,
): number | undefined {
  if (schedules.length === 0) return undefined;
  const base: Omit<ConnectorPolicyInput, 'now'> = { ratingKw: 1, v2gCapable: true, schedules, limits: [] };
  let at = now;
  // A handful of changes at most within ten minutes; the bound only guards against a schedule engine bug.
  for (let step = 0; step < 32; step++) {
    const next = evaluateConnector({ ...base, now: at }).nextChangeAt?.getTime();
    if (next === undefined || next > now + horizonMs) return undefined;
    const slot = evaluateConnector({ ...base, now: next }).activeSlot;
    if (slot && slot.startsAt.getTime() === next && ACTIVE.includes(slot.action)) return next;
    at = next;
  }
  return undefined;
}
