import { describe, expect, it } from 'vitest';
import {
  dayNumberOf,
  instantAtWallClock,
  utcOffsetMs,
  wallClockAt,
  weekdayOf,
} from '../../../agent/core/zoned-time.js';

const at = (day: number, minute: number, tz: string) =>
  new Date(instantAtWallClock(day, minute, tz)).toISOString();
const HOUR = 3_600_000;

describe('zoned time', () => {
  it('knows weekdays of day numbers', () => {
    expect(weekdayOf(0)).toBe('thu'); // 1970-01-01
    expect(weekdayOf(dayNumberOf(2026, 3, 29))).toBe('sun');
    expect(weekdayOf(dayNumberOf(2026, 5, 4))).toBe('mon');
    expect(weekdayOf(-1)).toBe('wed');
  });

  it('converts ordinary wall-clock times both ways', () => {
    expect(at(dayNumberOf(2026, 1, 14), 22 * 60, 'Europe/Berlin')).toBe('2026-01-14T21:00:00.000Z');
    expect(at(dayNumberOf(2026, 7, 1), 9 * 60 + 30, 'America/New_York')).toBe('2026-07-01T13:30:00.000Z');
    expect(wallClockAt(Date.parse('2026-07-01T13:30:45Z'), 'America/New_York')).toEqual({
      day: dayNumberOf(2026, 7, 1),
      minuteOfDay: 9 * 60 + 30,
      second: 45,
    });
    expect(utcOffsetMs(Date.parse('2026-07-01T00:00:00Z'), 'Europe/Berlin')).toBe(2 * HOUR);
    expect(utcOffsetMs(Date.parse('2026-01-01T00:00:00Z'), 'America/New_York')).toBe(-5 * HOUR);
  });

  it('rolls minutes past midnight into the next day', () => {
    expect(at(dayNumberOf(2026, 1, 14), 24 * 60 + 6 * 60, 'Europe/Berlin')).toBe('2026-01-15T05:00:00.000Z');
  });

  it('moves a skipped time to the transition instant', () => {
    expect(at(dayNumberOf(2026, 3, 29), 2 * 60 + 30, 'Europe/Berlin')).toBe('2026-03-29T01:00:00.000Z');
    expect(at(dayNumberOf(2026, 3, 8), 2 * 60 + 59, 'America/New_York')).toBe('2026-03-08T07:00:00.000Z');
    // Southern hemisphere, half-hour shift: Lord Howe skips 02:00-02:30 on 2026-10-04.
    expect(at(dayNumberOf(2026, 10, 4), 2 * 60 + 15, 'Australia/Lord_Howe')).toBe('2026-10-03T15:30:00.000Z');
  });

  it('uses the first occurrence of a repeated time', () => {
    expect(at(dayNumberOf(2026, 10, 25), 2 * 60 + 30, 'Europe/Berlin')).toBe('2026-10-25T00:30:00.000Z');
    expect(at(dayNumberOf(2026, 11, 1), 60 + 30, 'America/New_York')).toBe('2026-11-01T05:30:00.000Z');
    // The instant after the repeated hour is unambiguous again.
    expect(at(dayNumberOf(2026, 11, 1), 2 * 60, 'America/New_York')).toBe('2026-11-01T07:00:00.000Z');
  });
});
