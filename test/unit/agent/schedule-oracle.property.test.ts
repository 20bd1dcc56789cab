import fc from 'fast-check';
import { DateTime } from 'luxon';
import { describe, expect, it } from 'vitest';
import {
  evaluateConnector,
  type FlexibilityLimit,
  type StoredSchedule,
} from '../../../agent/core/schedule-engine.js';
import type { DayOfWeek, TimeSlot } from '../../../shared/schedule.js';
import { offsetChanges } from '../../helpers/offset-changes.js';
import {
  localDateOf,
  type OracleAnswer,
  oracleEvaluate,
  wallClockInstant,
} from '../../helpers/schedule-oracle.js';

/**
 * The schedule engine against an independent oracle (test/helpers/schedule-oracle.ts, written on Luxon from
 * DESIGN.md §6 and the engine's recorded decisions): random schedules (once, daily, weekly; charge, idle and
 * discharge slots, midnight-crossing and 24-hour slots, target_soc, effective windows, disabled ones), random
 * flexibility limits, time zones with DST and unusual offsets, and random instants — many of them near DST
 * transitions or exactly on a slot edge. Both must give the same mode, power, limits in force, active slot and
 * next change. 1,500 cases a run (a few seconds); `ORACLE_RUNS=20000` searches deeper.
 */

const ZONES = [
  'Europe/Berlin',
  'America/New_York',
  'Australia/Lord_Howe', // DST of 30 minutes
  'Asia/Kolkata', // +05:30, no DST
  'Pacific/Chatham', // +12:45 / +13:45
  'America/St_Johns', // -03:30 / -02:30
  'America/Santiago', // DST changes at midnight: local midnight is skipped
  'America/Havana', // also changes at midnight (00:00 -> 01:00)
  'Asia/Kathmandu', // +05:45
  'UTC',
] as const;

const FROM = Date.parse('2026-01-01T00:00:00Z');
const TO = Date.parse('2028-01-01T00:00:00Z');
const HOUR = 3_600_000;
const DAY = 86_400_000;

/** Every offset change of `zone` in [FROM, TO), found with Luxon (daily scan, then bisection to the minute). */
function transitionsOf(zone: string): number[] {
  const offset = (t: number) => DateTime.fromMillis(t, { zone }).offset;
  return offsetChanges(offset, { from: FROM, to: TO, step: DAY, resolution: 60_000 });
}
const TRANSITIONS = new Map<string, number[]>(ZONES.map((z) => [z, transitionsOf(z)]));

const WEEKDAYS: readonly DayOfWeek[] = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'];

/**
 * A slot's wall-clock time: literal `HH:MM`, or minutes relative to the local wall-clock time at which the zone's
 * DST transition (the one the instant is drawn near) happens — so that slots start and end inside spring-forward
 * gaps and fall-back repeats of every zone, whatever its transition time (02:00, 02:45, midnight...).
 */
type TimeSpec = string | { relative: number };
const clockTime: fc.Arbitrary<TimeSpec> = fc.oneof(
  { arbitrary: fc.integer({ min: -75, max: 75 }).map((relative) => ({ relative })), weight: 3 },
  // Midnight, and times that meet the 01:00-03:00 transitions of most zones.
  fc.constantFrom('00:00', '00:30', '01:00', '01:30', '02:00', '02:10', '02:30', '02:45', '03:00', '03:30'),
  fc.constantFrom('06:00', '12:00', '18:00', '22:00', '23:30', '23:59'),
  fc
    .integer({ min: 0, max: 1439 })
    .map((m) => `${String(Math.floor(m / 60)).padStart(2, '0')}:${String(m % 60).padStart(2, '0')}`),
);
const days = fc.uniqueArray(fc.constantFrom(...WEEKDAYS), { minLength: 1, maxLength: 7 });
const powerLimit = fc.option(
  fc.oneof(fc.constantFrom(0, 3.7, 7.4, 11, 22), fc.double({ min: 0.1, max: 60, noNaN: true })),
  { nil: undefined },
);
const action = fc.constantFrom<TimeSlot['action']>(
  'charge',
  'charge',
  'charge',
  'charge',
  'idle',
  'discharge',
);

function slotArb(needsDays: boolean) {
  return fc.record({
    day_of_week: needsDays ? days : fc.option(days, { nil: undefined, freq: 2 }),
    start: clockTime,
    end: clockTime,
    power_limit: powerLimit,
    action,
  });
}
type SlotShape = typeof slotArb extends (needsDays: boolean) => fc.Arbitrary<infer T> ? T : never;

/** Offsets (minutes) from the instant under test, for effective windows and limits. */
const offsetMinutes = fc.oneof(
  fc.integer({ min: -10 * 1440, max: 10 * 1440 }),
  fc.integer({ min: -180, max: 180 }),
  fc.constant(0),
);

const scheduleShape = fc.constantFrom<StoredSchedule['type']>('daily', 'weekly', 'once').chain((type) =>
  fc.record({
    type: fc.constant(type),
    // One in eight is disabled.
    disabled: fc.integer({ min: 0, max: 7 }).map((n) => n === 0),
    time_slots: fc.array(slotArb(type === 'weekly'), { minLength: 1, maxLength: 4 }),
    target_soc: fc.option(fc.integer({ min: 0, max: 100 }), { nil: undefined }),
    from: fc.option(offsetMinutes, { nil: undefined, freq: 2 }),
    until: fc.option(offsetMinutes, { nil: undefined, freq: 2 }),
    received: fc.option(offsetMinutes, { nil: undefined }),
    otherZone: fc.option(fc.constantFrom(...ZONES), { nil: undefined, freq: 4 }),
  }),
);

const limitShape = fc.record({
  kind: fc.constantFrom<FlexibilityLimit['kind']>('power_limit', 'power_limit', 'pause'),
  percent: fc.option(fc.integer({ min: 0, max: 100 }), { nil: undefined, freq: 6 }),
  start: offsetMinutes,
  minutes: fc.integer({ min: 1, max: 3 * 1440 }),
});

/** Where the instant under test lies. */
const instantShape = fc.oneof(
  // Near a DST transition of the zone (within ±36 h, often within minutes or exactly on it).
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('transition' as const),
      transition: fc.nat(),
      offsetMs: fc.oneof(
        fc.integer({ min: -36 * HOUR, max: 36 * HOUR }),
        fc.integer({ min: -90, max: 90 }).map((m) => m * 60_000),
        fc.constantFrom(-1, 0, 1),
      ),
    }),
  },
  // Exactly on a slot's start or end wall-clock time (or a millisecond either side), on the local date of a
  // transition (or a day either side) or on any date.
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('edge' as const),
      transition: fc.nat(),
      dayOffset: fc.oneof(fc.integer({ min: -1, max: 1 }), fc.integer({ min: -400, max: 400 })),
      pick: fc.nat(),
      atEnd: fc.boolean(),
      deltaMs: fc.constantFrom(-1, 0, 0, 1),
    }),
  },
  // Anywhere in 2026-2027.
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('uniform' as const),
      at: fc.integer({ min: FROM, max: TO - 1 }),
    }),
  },
);

const caseArb = fc.record({
  zone: fc.constantFrom(...ZONES),
  schedules: fc.array(scheduleShape, { minLength: 0, maxLength: 3 }),
  limits: fc.array(limitShape, { minLength: 0, maxLength: 2 }),
  instant: instantShape,
  // The vehicle's SOC: any, or right at (or a point either side of) one of the schedules' targets.
  soc: fc.option(
    fc.oneof(
      fc.integer({ min: 0, max: 100 }),
      fc.record({ nearTarget: fc.nat(), delta: fc.constantFrom(-1, 0, 0, 1) }),
    ),
    { nil: undefined },
  ),
  ratingKw: fc.constantFrom(3.7, 7.4, 11, 22, 50),
  v2gCapable: fc.boolean(),
});
type Case = typeof caseArb extends fc.Arbitrary<infer T> ? T : never;

const iso = (t: number) => new Date(t).toISOString();
const hhmm = (minutes: number) => {
  const m = ((minutes % 1440) + 1440) % 1440;
  return `${String(Math.floor(m / 60)).padStart(2, '0')}:${String(m % 60).padStart(2, '0')}`;
};

/** Builds the engine's input from a generated case (the oracle takes the same objects). */
function build(c: Case) {
  const zone = c.zone;
  const transitions = TRANSITIONS.get(zone) ?? [];
  // The transition the case is drawn around (zones without DST: some day at 02:00 UTC).
  const index = c.instant.kind === 'uniform' ? Math.floor(c.instant.at / DAY) : c.instant.transition;
  const transition =
    transitions.length > 0
      ? (transitions[index % transitions.length] as number)
      : FROM + (index % 700) * DAY + 2 * HOUR;
  // The wall-clock time the transition happens at, as read just before it.
  const before = DateTime.fromMillis(transition - 60_000, { zone });
  const transitionWall = before.hour * 60 + before.minute + 1;
  const timeOf = (spec: TimeSpec) => (typeof spec === 'string' ? spec : hhmm(transitionWall + spec.relative));
  const slotOf = (s: SlotShape): TimeSlot => {
    const slot: TimeSlot = { start: timeOf(s.start), end: timeOf(s.end), action: s.action };
    if (s.day_of_week) slot.day_of_week = s.day_of_week;
    if (s.power_limit !== undefined) slot.power_limit = s.power_limit;
    return slot;
  };
  const slotsOf = c.schedules.map((s) => s.time_slots.map(slotOf));

  let now: number;
  if (c.instant.kind === 'uniform') now = c.instant.at;
  else if (c.instant.kind === 'transition') now = transition + c.instant.offsetMs;
  else {
    const all = slotsOf.flat();
    const slot = all.length > 0 ? all[c.instant.pick % all.length] : undefined;
    const date = localDateOf(transition, zone).plus({ days: c.instant.dayOffset });
    const [h, m] = (slot ? (c.instant.atEnd ? slot.end : slot.start) : '00:00').split(':').map(Number);
    now = wallClockInstant(date, (h ?? 0) * 60 + (m ?? 0), zone) + c.instant.deltaMs;
  }
  const at = (minutes: number) => iso(now + minutes * 60_000);
  const schedules: StoredSchedule[] = c.schedules.map((s, i) => {
    const schedule: StoredSchedule = {
      schedule_id: `s${i}`,
      enabled: !s.disabled,
      type: s.type,
      time_slots: slotsOf[i] ?? [],
      timezone: s.otherZone ?? zone,
    };
    if (s.target_soc !== undefined) schedule.target_soc = s.target_soc;
    if (s.from !== undefined) schedule.effective_from = at(s.from);
    if (s.until !== undefined && (s.from === undefined || s.until > s.from))
      schedule.effective_until = at(s.until);
    if (s.received !== undefined) schedule.received_at = at(s.received);
    return schedule;
  });
  const limits: FlexibilityLimit[] = c.limits.map((l, i) => {
    const limit: FlexibilityLimit = {
      control_id: `c${i}`,
      kind: l.kind,
      starts_at: at(l.start),
      ends_at: at(l.start + l.minutes),
    };
    if (l.kind === 'power_limit' && l.percent !== undefined) limit.power_limit_percent = l.percent;
    return limit;
  });
  const targets = schedules.flatMap((s) => (s.target_soc === undefined ? [] : [s.target_soc]));
  let soc: number | undefined;
  if (typeof c.soc === 'number') soc = c.soc;
  else if (c.soc !== undefined) {
    const target = targets.length > 0 ? (targets[c.soc.nearTarget % targets.length] as number) : 50;
    soc = Math.min(100, Math.max(0, target + c.soc.delta));
  }
  return {
    ratingKw: c.ratingKw,
    v2gCapable: c.v2gCapable,
    schedules,
    limits,
    ...(soc !== undefined ? { soc } : {}),
    now,
  };
}

/** The engine's answer in the oracle's terms. */
function engineAnswer(input: ReturnType<typeof build>) {
  const r = evaluateConnector(input);
  return {
    mode: r.mode,
    maxPowerKw: r.maxPowerKw,
    activeLimitIds: [...r.activeLimitIds].sort(),
    nextChangeAt: r.nextChangeAt?.toISOString(),
    activeSlot: r.activeSlot
      ? {
          scheduleId: r.activeSlot.scheduleId,
          slotIndex: r.activeSlot.slotIndex,
          startsAt: r.activeSlot.startsAt.toISOString(),
          endsAt: r.activeSlot.endsAt.toISOString(),
        }
      : undefined,
  };
}

function oracleAnswer(input: ReturnType<typeof build>, o: OracleAnswer) {
  // The engine names one slot; compare it when the oracle sees exactly one (several: any of them may be named).
  const only = o.active.length === 1 ? o.active[0] : undefined;
  return {
    mode: o.mode,
    maxPowerKw: o.maxPowerKw,
    activeLimitIds: o.activeLimitIds,
    nextChangeAt: o.nextChangeAt === undefined ? undefined : iso(o.nextChangeAt),
    activeSlot: only
      ? {
          scheduleId: only.scheduleId,
          slotIndex: only.slotIndex,
          startsAt: iso(only.startsAt),
          endsAt: iso(only.endsAt),
        }
      : undefined,
    several: o.active.length > 1,
    input,
  };
}

describe('schedule engine against a Luxon oracle', () => {
  it('gives the same answer for random schedules, limits, time zones and instants', () => {
    fc.assert(
      fc.property(caseArb, (c) => {
        const input = build(c);
        const engine = engineAnswer(input);
        const oracle = oracleAnswer(input, oracleEvaluate(input));
        const context = JSON.stringify({ now: iso(input.now), engine, oracle }, null, 1);
        expect(engine.mode, context).toBe(oracle.mode);
        expect(engine.maxPowerKw, context).toBeCloseTo(oracle.maxPowerKw, 9);
        expect(engine.activeLimitIds, context).toEqual(oracle.activeLimitIds);
        expect(engine.nextChangeAt, context).toBe(oracle.nextChangeAt);
        if (!oracle.several) expect(engine.activeSlot, context).toEqual(oracle.activeSlot);
        else expect(engine.activeSlot, context).toBeDefined();
      }),
      { numRuns: Number(process.env.ORACLE_RUNS ?? 1_500) },
    );
  });

  it('the oracle itself: DST rules on known instants', () => {
    const d = (y: number, m: number, day: number) => DateTime.utc(y, m, day);
    // Spring forward, Berlin 2026-03-29: 02:30 does not exist -> the transition, 01:00Z (03:00 CEST).
    expect(iso(wallClockInstant(d(2026, 3, 29), 150, 'Europe/Berlin'))).toBe('2026-03-29T01:00:00.000Z');
    // Fall back, Berlin 2026-10-25: 02:30 happens twice -> the first, 00:30Z (CEST).
    expect(iso(wallClockInstant(d(2026, 10, 25), 150, 'Europe/Berlin'))).toBe('2026-10-25T00:30:00.000Z');
    // New York 2027-03-14: 02:15 -> 03:00 EDT = 07:00Z; Lord Howe 2026-10-04: 02:10 -> 02:30 (+11) = 15:30Z.
    expect(iso(wallClockInstant(d(2027, 3, 14), 135, 'America/New_York'))).toBe('2027-03-14T07:00:00.000Z');
    expect(iso(wallClockInstant(d(2026, 10, 4), 130, 'Australia/Lord_Howe'))).toBe(
      '2026-10-03T15:30:00.000Z',
    );
    // Santiago 2026-09-06: midnight is skipped -> 01:00 -03 = 04:00Z.
    expect(iso(wallClockInstant(d(2026, 9, 6), 0, 'America/Santiago'))).toBe('2026-09-06T04:00:00.000Z');
    // Minutes past a day roll into the next date (a slot ending after midnight).
    expect(iso(wallClockInstant(d(2026, 1, 14), 24 * 60 + 360, 'Europe/Berlin'))).toBe(
      '2026-01-15T05:00:00.000Z',
    );
  });
});
