import { describe, expect, it } from 'vitest';
import type { FlexibilityLimit } from '../../../agent/core/schedule-engine.js';
import { evaluateAt, iso, NEW_YORK, schedule } from '../../helpers/schedule-inputs.js';

/**
 * The agent's schedule engine (agent/core/schedule-engine.ts): what limits a connector's power — overlapping
 * schedules, discharge slots, target_soc, flexibility limits — and when it next changes.
 */

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
