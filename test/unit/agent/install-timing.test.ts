import { describe, expect, it } from 'vitest';
import {
  decideInstallTiming,
  type InstallTimingInput,
  type InstallWindow,
  nextSlotStart,
  windowAt,
} from '../../../agent/core/install-timing.js';
import type { StoredSchedule } from '../../../agent/core/schedule-engine.js';

const BERLIN = 'Europe/Berlin';
const t = (iso: string) => Date.parse(iso);
const win = (start: string, end: string, timezone = BERLIN): InstallWindow => ({ start, end, timezone });

describe('windowAt (Europe/Berlin, DST on 2026-03-29 and 2026-10-25)', () => {
  const cases: Array<{ name: string; now: string; window: InstallWindow; inside: boolean; next: string }> = [
    // next: closesAt when inside, opensAt when outside
    {
      name: 'inside a daytime window',
      now: '2026-01-14T10:00:00Z',
      window: win('10:00', '12:00'),
      inside: true,
      next: '2026-01-14T11:00:00Z',
    },
    {
      name: 'start is inside (inclusive)',
      now: '2026-01-14T09:00:00Z',
      window: win('10:00', '12:00'),
      inside: true,
      next: '2026-01-14T11:00:00Z',
    },
    {
      name: 'end is outside (exclusive): opens tomorrow',
      now: '2026-01-14T11:00:00Z',
      window: win('10:00', '12:00'),
      inside: false,
      next: '2026-01-15T09:00:00Z',
    },
    {
      name: 'before the window: opens today',
      now: '2026-01-14T05:00:00Z',
      window: win('10:00', '12:00'),
      inside: false,
      next: '2026-01-14T09:00:00Z',
    },
    {
      name: 'across midnight, before midnight',
      now: '2026-01-14T22:30:00Z',
      window: win('22:00', '04:00'),
      inside: true,
      next: '2026-01-15T03:00:00Z',
    },
    {
      name: 'across midnight, after midnight (opened yesterday)',
      now: '2026-01-15T02:59:00Z',
      window: win('22:00', '04:00'),
      inside: true,
      next: '2026-01-15T03:00:00Z',
    },
    {
      name: 'across midnight, after it closed',
      now: '2026-01-15T03:00:00Z',
      window: win('22:00', '04:00'),
      inside: false,
      next: '2026-01-15T21:00:00Z',
    },
    {
      name: 'spring forward: a window inside the skipped hour does not open that day',
      now: '2026-03-29T00:30:00Z',
      window: win('02:00', '03:00'),
      inside: false,
      next: '2026-03-30T00:00:00Z',
    },
    {
      name: 'spring forward: a window around the gap is an hour shorter',
      now: '2026-03-29T02:30:00Z', // 04:30 CEST
      window: win('01:00', '05:00'),
      inside: true,
      next: '2026-03-29T03:00:00Z',
    },
    {
      name: 'spring forward: a window ending in the gap closes at the transition',
      now: '2026-03-29T00:59:00Z', // 01:59 CET
      window: win('01:00', '02:30'),
      inside: true,
      next: '2026-03-29T01:00:00Z',
    },
    {
      name: 'fall back: the repeated hour, first pass',
      now: '2026-10-25T00:30:00Z', // 02:30 CEST
      window: win('02:00', '03:00'),
      inside: true,
      next: '2026-10-25T02:00:00Z',
    },
    {
      name: 'fall back: the repeated hour, second pass stays inside',
      now: '2026-10-25T01:30:00Z', // 02:30 CET
      window: win('02:00', '03:00'),
      inside: true,
      next: '2026-10-25T02:00:00Z',
    },
    {
      name: 'fall back: after the window, the next day at CET',
      now: '2026-10-25T02:00:00Z', // 03:00 CET
      window: win('02:00', '03:00'),
      inside: false,
      next: '2026-10-26T01:00:00Z',
    },
    {
      name: 'across midnight over the fall-back night: one hour longer',
      now: '2026-10-25T04:30:00Z', // 05:30 CET
      window: win('23:00', '06:00'),
      inside: true,
      next: '2026-10-25T05:00:00Z',
    },
    {
      name: 'another zone (America/New_York)',
      now: '2026-07-01T06:00:00Z', // 02:00 EDT
      window: win('01:00', '03:00', 'America/New_York'),
      inside: true,
      next: '2026-07-01T07:00:00Z',
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const w = windowAt(t(c.now), c.window);
      expect(w.inside).toBe(c.inside);
      const next = w.inside ? w.closesAt : w.opensAt;
      expect(new Date(next).toISOString()).toBe(new Date(c.next).toISOString());
    });
  }
});

describe('decideInstallTiming', () => {
  const base: InstallTimingInput = {
    now: t('2026-01-14T10:00:00Z'),
    install: 'when_idle',
    busyConnectors: [],
  };
  const cases: Array<{
    name: string;
    input: Partial<InstallTimingInput>;
    expected: { install: true } | { waitFor: string; recheckAt?: string; reason: RegExp };
  }> = [
    { name: 'when_idle, all idle, no window', input: {}, expected: { install: true } },
    {
      name: 'when_idle, a connector charges',
      input: { busyConnectors: [2, 1] },
      expected: { waitFor: 'connectors', reason: /busy: 1, 2/ },
    },
    {
      name: 'when_idle, a slot starts in 10 minutes exactly',
      input: { nextSlotStartAt: t('2026-01-14T10:10:00Z') },
      expected: { waitFor: 'schedule', recheckAt: '2026-01-14T10:10:00Z', reason: /within 10 minutes/ },
    },
    {
      name: 'when_idle, a slot starts in 11 minutes',
      input: { nextSlotStartAt: t('2026-01-14T10:11:00Z') },
      expected: { install: true },
    },
    {
      name: 'when_idle, outside the window (window before connectors)',
      input: { window: win('22:00', '04:00'), busyConnectors: [1] },
      expected: {
        waitFor: 'window',
        recheckAt: '2026-01-14T21:00:00Z',
        reason: /outside the install window/,
      },
    },
    {
      name: 'when_idle, inside the window, idle',
      input: { window: win('11:00', '12:00') }, // 10:00Z is 11:00 in Berlin
      expected: { install: true },
    },
    {
      name: 'immediate ignores a charging connector',
      input: { install: 'immediate', busyConnectors: [1] },
      expected: { install: true },
    },
    {
      name: 'immediate ignores a slot about to start',
      input: { install: 'immediate', nextSlotStartAt: t('2026-01-14T10:01:00Z') },
      expected: { install: true },
    },
    {
      name: 'immediate honours the window',
      input: { install: 'immediate', window: win('02:00', '03:00') },
      expected: { waitFor: 'window', recheckAt: '2026-01-15T01:00:00Z', reason: /opens at/ },
    },
    {
      name: 'immediate in the spring-forward gap waits a day',
      input: { install: 'immediate', now: t('2026-03-29T00:30:00Z'), window: win('02:00', '03:00') },
      expected: { waitFor: 'window', recheckAt: '2026-03-30T00:00:00Z', reason: /opens at/ },
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const r = decideInstallTiming({ ...base, ...c.input });
      if ('install' in c.expected) {
        expect(r).toEqual({ install: true });
        return;
      }
      expect(r.install).toBe(false);
      if (r.install) return;
      expect(r.waitFor).toBe(c.expected.waitFor);
      expect(r.reason).toMatch(c.expected.reason);
      expect(r.recheckAt === undefined ? undefined : new Date(r.recheckAt).toISOString()).toBe(
        c.expected.recheckAt === undefined ? undefined : new Date(c.expected.recheckAt).toISOString(),
      );
    });
  }
});

describe('nextSlotStart', () => {
  const schedule = (start: string, end: string, action: 'charge' | 'idle' = 'charge'): StoredSchedule => ({
    schedule_id: `s-${start}`,
    enabled: true,
    type: 'daily',
    timezone: BERLIN,
    time_slots: [{ start, end, action }],
  });
  const cases: Array<{ name: string; schedules: StoredSchedule[]; now: string; expected?: string }> = [
    { name: 'no schedules', schedules: [], now: '2026-01-14T10:00:00Z' },
    {
      name: 'a charge slot 5 minutes ahead',
      schedules: [schedule('11:05', '12:00')],
      now: '2026-01-14T10:00:00Z',
      expected: '2026-01-14T10:05:00Z',
    },
    {
      name: 'a slot 20 minutes ahead is too far',
      schedules: [schedule('11:20', '12:00')],
      now: '2026-01-14T10:00:00Z',
    },
    {
      name: 'an idle slot does not count',
      schedules: [schedule('11:05', '12:00', 'idle')],
      now: '2026-01-14T10:00:00Z',
    },
    {
      name: 'a slot already running does not start',
      schedules: [schedule('10:00', '12:00')],
      now: '2026-01-14T10:00:00Z',
    },
    {
      name: 'the later of two slots after one ends',
      schedules: [schedule('10:00', '11:02'), schedule('11:08', '12:00')],
      now: '2026-01-14T10:00:00Z',
      expected: '2026-01-14T10:08:00Z',
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const r = nextSlotStart(c.schedules, t(c.now));
      expect(r === undefined ? undefined : new Date(r).toISOString()).toBe(
        c.expected === undefined ? undefined : new Date(c.expected).toISOString(),
      );
    });
  }
});
