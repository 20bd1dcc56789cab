import { describe, expect, it } from 'vitest';
import { evaluateAt, iso, NEW_YORK, schedule } from '../../helpers/schedule-inputs.js';

/**
 * The agent's schedule engine (agent/core/schedule-engine.ts) across DST changes in Europe/Berlin and
 * America/New_York: starts and ends inside a gap or a repeated hour.
 */

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
