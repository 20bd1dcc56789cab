import { describe, expect, it } from 'vitest';
import {
  type ConnectorPolicyInput,
  evaluateConnector,
  type FlexibilityLimit,
  type StoredSchedule,
} from '../../../agent/core/schedule-engine.js';
import type { TimeSlot } from '../../../shared/schedule.js';

const BERLIN = 'Europe/Berlin';
const NEW_YORK = 'America/New_York';

type SlotInput = Partial<TimeSlot> & Pick<TimeSlot, 'start' | 'end'>;

function schedule(
  fields: Partial<Omit<StoredSchedule, 'time_slots'>> & { time_slots: SlotInput[] },
): StoredSchedule {
  return {
    schedule_id: 's1',
    enabled: true,
    type: 'daily',
    timezone: BERLIN,
    ...fields,
    time_slots: fields.time_slots.map((slot) => ({ action: 'charge' as const, ...slot })),
  };
}

function evaluateAt(iso: string, fields: Partial<ConnectorPolicyInput> = {}) {
  return evaluateConnector({
    ratingKw: 22,
    v2gCapable: false,
    schedules: [],
    limits: [],
    ...fields,
    now: new Date(iso),
  });
}

function iso(date: Date | undefined): string | undefined {
  return date?.toISOString();
}

describe('evaluateConnector without schedules', () => {
  it('charges unrestricted at the rating and has no next change', () => {
    const r = evaluateAt('2026-01-14T12:00:00Z');
    expect(r.mode).toBe('charge');
    expect(r.maxPowerKw).toBe(22);
    expect(r.reason).toMatch(/no schedule in effect/);
    expect(r.activeScheduleId).toBeUndefined();
    expect(r.activeLimitIds).toEqual([]);
    expect(r.nextChangeAt).toBeUndefined();
  });

  it('accepts the instant as epoch milliseconds', () => {
    const s = schedule({ time_slots: [{ start: '10:00', end: '11:00' }] });
    const r = evaluateConnector({
      ratingKw: 22,
      v2gCapable: false,
      schedules: [s],
      limits: [],
      now: Date.parse('2026-01-14T09:30:00Z'),
    });
    expect(r.mode).toBe('charge');
    expect(iso(r.nextChangeAt)).toBe('2026-01-14T10:00:00.000Z');
  });
});

describe('daily schedules and midnight-crossing slots', () => {
  const overnight = schedule({ time_slots: [{ start: '22:00', end: '06:00', power_limit: 7 }] });

  it('charges inside the overnight slot at the slot power limit', () => {
    const r = evaluateAt('2026-01-14T21:30:00Z', { schedules: [overnight] }); // 22:30 CET
    expect(r.mode).toBe('charge');
    expect(r.maxPowerKw).toBe(7);
    expect(r.activeScheduleId).toBe('s1');
    expect(iso(r.activeSlot?.startsAt)).toBe('2026-01-14T21:00:00.000Z');
    expect(iso(r.activeSlot?.endsAt)).toBe('2026-01-15T05:00:00.000Z');
    expect(iso(r.nextChangeAt)).toBe('2026-01-15T05:00:00.000Z');
  });

  it('keeps the slot after midnight as part of the day it started on', () => {
    const r = evaluateAt('2026-01-15T04:59:00Z', { schedules: [overnight] }); // 05:59 CET
    expect(r.mode).toBe('charge');
    expect(iso(r.activeSlot?.startsAt)).toBe('2026-01-14T21:00:00.000Z');
  });

  it('idles outside the slots while the schedule is in effect, until the next slot', () => {
    const r = evaluateAt('2026-01-15T05:00:00Z', { schedules: [overnight] }); // 06:00 CET, slot just ended
    expect(r.mode).toBe('idle');
    expect(r.maxPowerKw).toBe(0);
    expect(r.reason).toMatch(/outside the slots of schedule s1/);
    expect(r.activeSlot).toBeUndefined();
    expect(iso(r.nextChangeAt)).toBe('2026-01-15T21:00:00.000Z');
  });

  it('filters a daily slot by day_of_week and attributes the overnight part to the start day', () => {
    const fridayNights = schedule({ time_slots: [{ day_of_week: ['fri'], start: '22:00', end: '06:00' }] });
    // Saturday 03:00 CET: inside Friday's slot.
    expect(evaluateAt('2026-01-17T02:00:00Z', { schedules: [fridayNights] }).mode).toBe('charge');
    // Friday 03:00 CET: Thursday has no slot.
    const friday = evaluateAt('2026-01-16T02:00:00Z', { schedules: [fridayNights] });
    expect(friday.mode).toBe('idle');
    expect(iso(friday.nextChangeAt)).toBe('2026-01-16T21:00:00.000Z');
  });

  it('treats end == start as a 24-hour slot', () => {
    const allDay = schedule({ time_slots: [{ start: '00:00', end: '00:00', power_limit: 3 }] });
    const r = evaluateAt('2026-01-14T12:00:00Z', { schedules: [allDay] });
    expect(r.mode).toBe('charge');
    expect(r.maxPowerKw).toBe(3);
    expect(iso(r.activeSlot?.startsAt)).toBe('2026-01-13T23:00:00.000Z');
    expect(iso(r.activeSlot?.endsAt)).toBe('2026-01-14T23:00:00.000Z');
  });

  it('ignores disabled schedules', () => {
    const off = { ...overnight, enabled: false };
    const r = evaluateAt('2026-01-14T12:00:00Z', { schedules: [off] });
    expect(r.mode).toBe('charge');
    expect(r.maxPowerKw).toBe(22);
    expect(r.nextChangeAt).toBeUndefined();
  });
});

describe('weekly schedules', () => {
  const weekends = schedule({
    type: 'weekly',
    time_slots: [{ day_of_week: ['sat', 'sun'], start: '10:00', end: '16:00' }],
  });

  it('applies on listed days only', () => {
    expect(evaluateAt('2026-01-17T11:00:00Z', { schedules: [weekends] }).mode).toBe('charge'); // Sat 12:00
    expect(evaluateAt('2026-01-18T11:00:00Z', { schedules: [weekends] }).mode).toBe('charge'); // Sun 12:00
    const monday = evaluateAt('2026-01-19T11:00:00Z', { schedules: [weekends] });
    expect(monday.mode).toBe('idle');
    // Next slot: Saturday 2026-01-24 10:00 CET.
    expect(iso(monday.nextChangeAt)).toBe('2026-01-24T09:00:00.000Z');
  });

  it('lasts 25 real hours for a 24-hour slot spanning the fall-back night', () => {
    const saturdays = schedule({
      type: 'weekly',
      time_slots: [{ day_of_week: ['sat'], start: '12:00', end: '12:00' }],
    });
    const r = evaluateAt('2026-10-25T10:30:00Z', { schedules: [saturdays] }); // Sun 11:30 CET
    expect(r.mode).toBe('charge');
    expect(iso(r.activeSlot?.startsAt)).toBe('2026-10-24T10:00:00.000Z'); // Sat 12:00 CEST
    expect(iso(r.activeSlot?.endsAt)).toBe('2026-10-25T11:00:00.000Z'); // Sun 12:00 CET
  });
});

describe('DST in Europe/Berlin', () => {
  it('spring forward: a start inside the gap moves to the first valid instant (03:00 CEST)', () => {
    const s = schedule({ time_slots: [{ start: '02:30', end: '04:00' }] });
    const before = evaluateAt('2026-03-29T00:59:00Z', { schedules: [s] }); // 01:59 CET
    expect(before.mode).toBe('idle');
    expect(iso(before.nextChangeAt)).toBe('2026-03-29T01:00:00.000Z');
    const after = evaluateAt('2026-03-29T01:00:00Z', { schedules: [s] }); // 03:00 CEST
    expect(after.mode).toBe('charge');
    expect(iso(after.activeSlot?.endsAt)).toBe('2026-03-29T02:00:00.000Z'); // 04:00 CEST
  });

  it('spring forward: an end inside the gap ends at the transition', () => {
    const s = schedule({ time_slots: [{ start: '01:00', end: '02:30' }] });
    const r = evaluateAt('2026-03-29T00:30:00Z', { schedules: [s] }); // 01:30 CET
    expect(r.mode).toBe('charge');
    expect(iso(r.activeSlot?.endsAt)).toBe('2026-03-29T01:00:00.000Z');
    expect(iso(r.nextChangeAt)).toBe('2026-03-29T01:00:00.000Z');
  });

  it('spring forward: a slot wholly inside the gap does not occur that day', () => {
    const s = schedule({ time_slots: [{ start: '02:00', end: '02:45' }] });
    const r = evaluateAt('2026-03-28T23:30:00Z', { schedules: [s] }); // Sun 00:30 CET
    expect(r.mode).toBe('idle');
    // Next occurrence: Monday 02:00 CEST.
    expect(iso(r.nextChangeAt)).toBe('2026-03-30T00:00:00.000Z');
  });

  it('fall back: a start in the repeated hour uses its first occurrence', () => {
    const s = schedule({ time_slots: [{ start: '02:30', end: '03:00' }] });
    const first = evaluateAt('2026-10-25T00:30:00Z', { schedules: [s] }); // 02:30 CEST
    expect(first.mode).toBe('charge');
    expect(iso(first.activeSlot?.endsAt)).toBe('2026-10-25T02:00:00.000Z'); // 03:00 CET
    // 02:45 CET, the second pass through the hour: still the same occurrence, 1.5 real hours long.
    expect(evaluateAt('2026-10-25T01:45:00Z', { schedules: [s] }).mode).toBe('charge');
    expect(evaluateAt('2026-10-25T00:29:00Z', { schedules: [s] }).mode).toBe('idle');
  });

  it('fall back: an end in the repeated hour uses its first occurrence and does not reopen', () => {
    const s = schedule({ time_slots: [{ start: '01:00', end: '02:15' }] });
    const r = evaluateAt('2026-10-25T00:00:00Z', { schedules: [s] }); // 02:00 CEST
    expect(r.mode).toBe('charge');
    expect(iso(r.nextChangeAt)).toBe('2026-10-25T00:15:00.000Z'); // 02:15 CEST
    // 02:05 CET (second pass) is after the end.
    expect(evaluateAt('2026-10-25T01:05:00Z', { schedules: [s] }).mode).toBe('idle');
  });
});

describe('DST in America/New_York', () => {
  it('spring forward 2026-03-08: 02:15 does not exist and starts at 03:00 EDT', () => {
    const s = schedule({ timezone: NEW_YORK, time_slots: [{ start: '02:15', end: '03:30' }] });
    const before = evaluateAt('2026-03-08T06:59:00Z', { schedules: [s] }); // 01:59 EST
    expect(before.mode).toBe('idle');
    expect(iso(before.nextChangeAt)).toBe('2026-03-08T07:00:00.000Z');
    const inside = evaluateAt('2026-03-08T07:10:00Z', { schedules: [s] }); // 03:10 EDT
    expect(inside.mode).toBe('charge');
    expect(iso(inside.activeSlot?.endsAt)).toBe('2026-03-08T07:30:00.000Z');
  });

  it('fall back 2026-11-01: 01:30-01:45 happens once, in EDT', () => {
    const s = schedule({ timezone: NEW_YORK, time_slots: [{ start: '01:30', end: '01:45' }] });
    const first = evaluateAt('2026-11-01T05:35:00Z', { schedules: [s] }); // 01:35 EDT
    expect(first.mode).toBe('charge');
    expect(iso(first.activeSlot?.startsAt)).toBe('2026-11-01T05:30:00.000Z');
    const second = evaluateAt('2026-11-01T06:35:00Z', { schedules: [s] }); // 01:35 EST
    expect(second.mode).toBe('idle');
    expect(iso(second.nextChangeAt)).toBe('2026-11-02T06:30:00.000Z'); // Monday 01:30 EST
  });

  it('fall back: a midnight-crossing slot ending in the repeated hour ends at the first occurrence', () => {
    const s = schedule({ timezone: NEW_YORK, time_slots: [{ start: '23:00', end: '01:30' }] });
    const r = evaluateAt('2026-11-01T04:00:00Z', { schedules: [s] }); // 00:00 EDT Sunday
    expect(r.mode).toBe('charge');
    expect(iso(r.activeSlot?.startsAt)).toBe('2026-11-01T03:00:00.000Z'); // Sat 23:00 EDT
    expect(iso(r.activeSlot?.endsAt)).toBe('2026-11-01T05:30:00.000Z'); // 01:30 EDT
  });
});

describe('once schedules', () => {
  const wednesdayNight = schedule({
    schedule_id: 'once1',
    type: 'once',
    effective_from: '2026-05-04T10:00:00+02:00', // Monday
    time_slots: [{ day_of_week: ['wed'], start: '01:00', end: '05:00', power_limit: 11 }],
  });

  it('does nothing before effective_from and changes at it', () => {
    const r = evaluateAt('2026-05-04T07:00:00Z', { schedules: [wednesdayNight] });
    expect(r.mode).toBe('charge');
    expect(r.maxPowerKw).toBe(22);
    expect(iso(r.nextChangeAt)).toBe('2026-05-04T08:00:00.000Z');
  });

  it('is in effect from effective_from and holds charging until its slot', () => {
    const r = evaluateAt('2026-05-04T10:00:00Z', { schedules: [wednesdayNight] });
    expect(r.mode).toBe('idle');
    expect(iso(r.nextChangeAt)).toBe('2026-05-05T23:00:00.000Z'); // Wed 01:00 CEST
  });

  it('charges in the slot on the first matching day', () => {
    const r = evaluateAt('2026-05-06T00:00:00Z', { schedules: [wednesdayNight] }); // Wed 02:00 CEST
    expect(r.mode).toBe('charge');
    expect(r.maxPowerKw).toBe(11);
    expect(iso(r.nextChangeAt)).toBe('2026-05-06T03:00:00.000Z');
  });

  it('is spent after its last slot and never repeats', () => {
    const after = evaluateAt('2026-05-06T03:00:00Z', { schedules: [wednesdayNight] });
    expect(after.mode).toBe('charge');
    expect(after.reason).toMatch(/no schedule in effect/);
    expect(after.nextChangeAt).toBeUndefined();
    const nextWeek = evaluateAt('2026-05-13T00:00:00Z', { schedules: [wednesdayNight] });
    expect(nextWeek.reason).toMatch(/no schedule in effect/);
  });

  it('without day_of_week uses the day of effective_from; an occurrence already over does nothing', () => {
    const s = schedule({
      type: 'once',
      effective_from: '2026-05-04T20:00:00+02:00',
      time_slots: [
        { start: '08:00', end: '10:00' }, // Monday morning, before effective_from: never applies
        { start: '22:00', end: '06:00' },
      ],
    });
    expect(evaluateAt('2026-05-04T20:30:00Z', { schedules: [s] }).mode).toBe('charge'); // Mon 22:30
    const tuesdayMorning = evaluateAt('2026-05-05T06:30:00Z', { schedules: [s] }); // Tue 08:30: spent
    expect(tuesdayMorning.reason).toMatch(/no schedule in effect/);
    const beforeSlot = evaluateAt('2026-05-04T18:30:00Z', { schedules: [s] }); // Mon 20:30
    expect(beforeSlot.mode).toBe('idle');
    expect(iso(beforeSlot.nextChangeAt)).toBe('2026-05-04T20:00:00.000Z');
  });

  it('anchors on received_at without effective_from, and does nothing with neither', () => {
    const anchored = schedule({
      type: 'once',
      received_at: '2026-05-04T12:00:00Z',
      time_slots: [{ start: '22:00', end: '23:00' }],
    });
    expect(evaluateAt('2026-05-04T20:30:00Z', { schedules: [anchored] }).mode).toBe('charge');
    expect(evaluateAt('2026-05-04T19:00:00Z', { schedules: [anchored] }).mode).toBe('idle');
    expect(evaluateAt('2026-05-05T20:30:00Z', { schedules: [anchored] }).reason).toMatch(/no schedule/);
    const { received_at: _ignored, ...unanchored } = anchored;
    const r = evaluateAt('2026-05-04T19:00:00Z', { schedules: [unanchored] });
    expect(r.reason).toMatch(/no schedule in effect/);
  });
});

describe('effective window edges', () => {
  const windowed = schedule({
    effective_from: '2026-06-01T00:00:00Z',
    effective_until: '2026-06-03T00:00:00Z',
    time_slots: [{ start: '00:00', end: '00:00', power_limit: 5 }],
  });

  it('starts exactly at effective_from', () => {
    const before = evaluateAt('2026-05-31T23:59:59.999Z', { schedules: [windowed] });
    expect(before.maxPowerKw).toBe(22);
    expect(iso(before.nextChangeAt)).toBe('2026-06-01T00:00:00.000Z');
    const at = evaluateAt('2026-06-01T00:00:00Z', { schedules: [windowed] });
    expect(at.maxPowerKw).toBe(5);
    // The occurrence is clipped to the window, so it starts at effective_from, not at local midnight.
    expect(iso(at.activeSlot?.startsAt)).toBe('2026-06-01T00:00:00.000Z');
  });

  it('ends exactly at effective_until', () => {
    const last = evaluateAt('2026-06-02T23:59:59.999Z', { schedules: [windowed] });
    expect(last.maxPowerKw).toBe(5);
    expect(iso(last.nextChangeAt)).toBe('2026-06-03T00:00:00.000Z');
    const at = evaluateAt('2026-06-03T00:00:00Z', { schedules: [windowed] });
    expect(at.maxPowerKw).toBe(22);
    expect(at.reason).toMatch(/no schedule in effect/);
    expect(at.nextChangeAt).toBeUndefined();
  });

  it('cuts a running slot at effective_until', () => {
    const s = schedule({
      effective_until: '2026-06-02T02:00:00+02:00',
      time_slots: [{ start: '22:00', end: '06:00' }],
    });
    const r = evaluateAt('2026-06-01T23:00:00Z', { schedules: [s] }); // 01:00 CEST
    expect(r.mode).toBe('charge');
    expect(iso(r.activeSlot?.endsAt)).toBe('2026-06-02T00:00:00.000Z');
    expect(iso(r.nextChangeAt)).toBe('2026-06-02T00:00:00.000Z');
  });
});

describe('overlapping schedules', () => {
  const evening = schedule({
    schedule_id: 'evening',
    time_slots: [{ start: '18:00', end: '23:00', power_limit: 11 }],
  });
  const peak = schedule({
    schedule_id: 'peak',
    time_slots: [{ start: '20:00', end: '22:00', power_limit: 7 }],
  });

  it('uses the lowest power limit of overlapping charge slots', () => {
    const r = evaluateAt('2026-01-14T20:00:00Z', { schedules: [evening, peak] }); // 21:00 CET
    expect(r.mode).toBe('charge');
    expect(r.maxPowerKw).toBe(7);
    expect(r.activeScheduleId).toBe('peak');
    expect(iso(r.nextChangeAt)).toBe('2026-01-14T21:00:00.000Z');
  });

  it('unites slots: a charge slot of either schedule allows charging', () => {
    const r = evaluateAt('2026-01-14T17:30:00Z', { schedules: [evening, peak] }); // 18:30 CET
    expect(r.maxPowerKw).toBe(11);
    expect(r.activeScheduleId).toBe('evening');
    expect(iso(r.nextChangeAt)).toBe('2026-01-14T19:00:00.000Z');
    expect(evaluateAt('2026-01-14T22:30:00Z', { schedules: [evening, peak] }).mode).toBe('idle');
  });

  it('lets an idle slot win over a charge slot', () => {
    const quiet = schedule({
      schedule_id: 'quiet',
      time_slots: [{ start: '20:30', end: '21:00', action: 'idle' }],
    });
    const r = evaluateAt('2026-01-14T19:45:00Z', { schedules: [evening, quiet] }); // 20:45 CET
    expect(r.mode).toBe('idle');
    expect(r.maxPowerKw).toBe(0);
    expect(r.activeScheduleId).toBe('quiet');
  });

  it('idles where a charge slot and a discharge slot overlap', () => {
    const v2g = schedule({
      schedule_id: 'v2g',
      time_slots: [{ start: '19:00', end: '20:00', action: 'discharge', power_limit: 5 }],
    });
    const r = evaluateAt('2026-01-14T18:30:00Z', { schedules: [evening, v2g], v2gCapable: true });
    expect(r.mode).toBe('idle');
    expect(r.reason).toMatch(/conflicting/);
  });
});

describe('discharge slots', () => {
  const v2g = schedule({
    time_slots: [{ start: '17:00', end: '20:00', action: 'discharge', power_limit: 10 }],
  });

  it('are not allowed on hardware without V2G', () => {
    const r = evaluateAt('2026-01-14T17:00:00Z', { schedules: [v2g], v2gCapable: false });
    expect(r.mode).toBe('idle');
    expect(r.maxPowerKw).toBe(0);
    expect(r.reason).toMatch(/not V2G-capable/);
  });

  it('allow export up to the slot power limit on V2G hardware', () => {
    const r = evaluateAt('2026-01-14T17:00:00Z', { schedules: [v2g], v2gCapable: true });
    expect(r.mode).toBe('discharge');
    expect(r.maxPowerKw).toBe(10);
  });

  it('are capped by flexibility limits too', () => {
    const limits: FlexibilityLimit[] = [
      {
        control_id: 'c1',
        kind: 'power_limit',
        power_limit_percent: 25,
        starts_at: '2026-01-14T00:00:00Z',
        ends_at: '2026-01-15T00:00:00Z',
      },
    ];
    const r = evaluateAt('2026-01-14T17:00:00Z', { schedules: [v2g], v2gCapable: true, limits });
    expect(r.mode).toBe('discharge');
    expect(r.maxPowerKw).toBe(5.5);
  });
});

describe('target_soc', () => {
  const s = schedule({ target_soc: 80, time_slots: [{ start: '00:00', end: '00:00' }] });

  it('charges below the target', () => {
    const r = evaluateAt('2026-01-14T12:00:00Z', { schedules: [s], soc: 79 });
    expect(r.mode).toBe('charge');
    expect(r.maxPowerKw).toBe(22);
  });

  it('stops at and above the target', () => {
    for (const soc of [80, 95]) {
      const r = evaluateAt('2026-01-14T12:00:00Z', { schedules: [s], soc });
      expect(r.mode).toBe('idle');
      expect(r.maxPowerKw).toBe(0);
      expect(r.reason).toMatch(/target_soc 80% reached/);
    }
  });

  it('is ignored when the SOC is unknown', () => {
    expect(evaluateAt('2026-01-14T12:00:00Z', { schedules: [s] }).mode).toBe('charge');
  });
});

describe('flexibility limits', () => {
  const limit = (id: string, percent: number, starts: string, ends: string): FlexibilityLimit => ({
    control_id: id,
    kind: 'power_limit',
    power_limit_percent: percent,
    starts_at: starts,
    ends_at: ends,
  });

  it('take the minimum of overlapping limits, rating and slot limit', () => {
    const limits = [
      limit('a', 50, '2026-01-14T10:00:00Z', '2026-01-14T14:00:00Z'),
      limit('b', 30, '2026-01-14T11:00:00Z', '2026-01-14T13:00:00Z'),
    ];
    const r = evaluateAt('2026-01-14T12:00:00Z', { limits });
    expect(r.mode).toBe('charge');
    expect(r.maxPowerKw).toBeCloseTo(6.6, 10);
    expect(r.activeLimitIds).toEqual(['a', 'b']);
    expect(iso(r.nextChangeAt)).toBe('2026-01-14T13:00:00.000Z');

    const slot = schedule({ time_slots: [{ start: '00:00', end: '00:00', power_limit: 5 }] });
    expect(evaluateAt('2026-01-14T12:00:00Z', { limits, schedules: [slot] }).maxPowerKw).toBe(5);

    const afterB = evaluateAt('2026-01-14T13:00:00Z', { limits });
    expect(afterB.maxPowerKw).toBe(11);
    expect(afterB.activeLimitIds).toEqual(['a']);
  });

  it('count from starts_at inclusive to ends_at exclusive', () => {
    const limits = [limit('a', 50, '2026-01-14T10:00:00Z', '2026-01-14T14:00:00Z')];
    const before = evaluateAt('2026-01-14T09:00:00Z', { limits });
    expect(before.maxPowerKw).toBe(22);
    expect(iso(before.nextChangeAt)).toBe('2026-01-14T10:00:00.000Z');
    expect(evaluateAt('2026-01-14T10:00:00Z', { limits }).maxPowerKw).toBe(11);
    expect(evaluateAt('2026-01-14T14:00:00Z', { limits }).maxPowerKw).toBe(22);
  });

  it('a 0% limit idles', () => {
    const r = evaluateAt('2026-01-14T12:00:00Z', {
      limits: [limit('z', 0, '2026-01-14T10:00:00Z', '2026-01-14T14:00:00Z')],
    });
    expect(r.mode).toBe('idle');
    expect(r.maxPowerKw).toBe(0);
  });

  it('a pause stops charging and names the control', () => {
    const limits: FlexibilityLimit[] = [
      limit('a', 50, '2026-01-14T10:00:00Z', '2026-01-14T14:00:00Z'),
      { control_id: 'p', kind: 'pause', starts_at: '2026-01-14T11:00:00Z', ends_at: '2026-01-14T11:30:00Z' },
    ];
    const r = evaluateAt('2026-01-14T11:15:00Z', { limits });
    expect(r.mode).toBe('idle');
    expect(r.maxPowerKw).toBe(0);
    expect(r.reason).toMatch(/paused by control p/);
    expect(r.activeLimitIds).toEqual(['a', 'p']);
    expect(iso(r.nextChangeAt)).toBe('2026-01-14T11:30:00.000Z');
  });
});

describe('nextChangeAt', () => {
  it('is the earliest boundary over schedules and limits', () => {
    const a = schedule({ schedule_id: 'a', time_slots: [{ start: '22:00', end: '06:00' }] });
    const b = schedule({
      schedule_id: 'b',
      timezone: NEW_YORK,
      time_slots: [{ start: '15:00', end: '16:00' }],
    });
    const limits: FlexibilityLimit[] = [
      { control_id: 'p', kind: 'pause', starts_at: '2026-01-14T19:30:00Z', ends_at: '2026-01-14T20:00:00Z' },
    ];
    // 12:00Z: a's next start is 21:00Z, b's (15:00 EST) is 20:00Z, the pause starts 19:30Z.
    const r = evaluateAt('2026-01-14T12:00:00Z', { schedules: [a, b], limits });
    expect(iso(r.nextChangeAt)).toBe('2026-01-14T19:30:00.000Z');
    const later = evaluateAt('2026-01-14T19:30:00Z', { schedules: [a, b], limits });
    expect(iso(later.nextChangeAt)).toBe('2026-01-14T20:00:00.000Z');
  });

  it('reports back-to-back slot boundaries', () => {
    const s = schedule({
      time_slots: [
        { start: '00:00', end: '06:00', power_limit: 11 },
        { start: '06:00', end: '12:00', power_limit: 4 },
      ],
    });
    const r = evaluateAt('2026-01-14T04:00:00Z', { schedules: [s] }); // 05:00 CET
    expect(r.maxPowerKw).toBe(11);
    expect(iso(r.nextChangeAt)).toBe('2026-01-14T05:00:00.000Z');
    expect(evaluateAt('2026-01-14T05:00:00Z', { schedules: [s] }).maxPowerKw).toBe(4);
  });

  it('is absent when nothing changes within the 8-day horizon', () => {
    const far: FlexibilityLimit[] = [
      { control_id: 'f', kind: 'pause', starts_at: '2026-01-24T00:00:00Z', ends_at: '2026-01-25T00:00:00Z' },
    ];
    expect(evaluateAt('2026-01-14T12:00:00Z', { limits: far }).nextChangeAt).toBeUndefined();
    const near = evaluateAt('2026-01-16T12:00:00Z', { limits: far });
    expect(iso(near.nextChangeAt)).toBe('2026-01-24T00:00:00.000Z');
  });
});
