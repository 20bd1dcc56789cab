import { describe, expect, it } from 'vitest';
import { evaluateConnector } from '../../../agent/core/schedule-engine.js';
import { evaluateAt, iso, schedule } from '../../helpers/schedule-inputs.js';

/**
 * The agent's schedule engine (agent/core/schedule-engine.ts): a connector with no schedule, daily, weekly and
 * once schedules, and the edges of a schedule's effective window. DST is in schedule-engine-dst.test.ts; what
 * limits the power (overlaps, discharge, target_soc, flexibility limits) and the next change in
 * schedule-engine-limits.test.ts.
 */

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
