import { DateTime } from 'luxon';
import type { AgentTuning } from '../../agent/runtime/agent-runtime.js';
import { DEFAULT_SAFETY_INTERVAL_MS } from '../../agent/runtime/control-loop.js';
import { createSeededRandom, pickOne, uniformBetween } from '../../simulators/seeded-random.js';
import type { OracleSchedule } from './schedule-oracle.js';

/**
 * The two chargers of agent-30-days-offline.test.ts — one in Europe/Berlin, one in America/New_York — with
 * their schedules, reboot and vehicles, and the month's timing: 2027-03-05 to 2027-04-04, across both DST
 * changes, at the cadences that make 2 × 30 days run in seconds.
 */

export const HOUR = 3_600_000;
export const DAY = 24 * HOUR;
export const MINUTE = 60_000;
/** The control loop's documented bound: a pass at least every 60 s besides the one at each `nextChangeAt`. */
export const BOUND_MS = DEFAULT_SAFETY_INTERVAL_MS;
export const T0 = Date.parse('2027-03-05T10:00:00Z'); // a Friday
export const RETURN_AT = T0 + 30 * DAY; // 2027-04-04T10:00Z
export const OUTBOX_CAP = { maxItems: 2_000, maxBytes: 16 * 1024 * 1024 };
export const TUNING: Partial<AgentTuning> = {
  sampleTickMs: MINUTE,
  telemetry: { activeMs: MINUTE, idleMs: 15 * MINUTE },
  persistEveryMs: 15 * MINUTE,
  outboxCap: OUTBOX_CAP,
};
export const LIMIT_PERCENT = 50;
export const LIMIT_SECONDS = 5 * 86_400;

export type WireSchedule = Omit<OracleSchedule, 'enabled' | 'received_at'>;

export interface Plan {
  name: string;
  zone: string;
  ratingKw: number;
  seed: number;
  schedules: WireSchedule[];
  /** The reboot, while the forced visit below charges. */
  rebootAt: number;
  /** A visit that is sure to charge at the reboot: [local date, arrival HH:MM], and the vehicle. */
  forced: { date: string; arrive: string; ev: { capacityKwh: number; soc: number; maxChargeKw: number } };
  /** Local dates whose evening gets no vehicle (so the DST night's cap changes are all visible). */
  quietEvenings: string[];
}

export const BERLIN: Plan = {
  name: 'berlin',
  zone: 'Europe/Berlin',
  ratingKw: 22,
  seed: 2301,
  schedules: [
    {
      schedule_id: 'night',
      type: 'daily',
      time_slots: [{ start: '22:00', end: '06:00', power_limit: 7.4, action: 'charge' }],
      target_soc: 80,
      timezone: 'Europe/Berlin',
    },
    {
      schedule_id: 'weekend',
      type: 'weekly',
      time_slots: [
        { day_of_week: ['sat', 'sun'], start: '10:00', end: '14:00', action: 'charge' },
        // On 2027-03-28 02:30 does not exist: the slot starts at 03:00 CEST (01:00Z).
        { day_of_week: ['sun'], start: '02:30', end: '03:30', power_limit: 3.7, action: 'charge' },
      ],
      target_soc: 90,
      timezone: 'Europe/Berlin',
    },
  ],
  rebootAt: Date.parse('2027-03-19T22:40:17.500Z'), // 23:40:17 CET, in the night slot
  forced: { date: '2027-03-19', arrive: '19:00', ev: { capacityKwh: 100, soc: 20, maxChargeKw: 11 } },
  quietEvenings: ['2027-03-27'],
};

export const NEW_YORK: Plan = {
  name: 'new-york',
  zone: 'America/New_York',
  ratingKw: 11,
  seed: 2302,
  schedules: [
    {
      schedule_id: 'overnight',
      type: 'daily',
      time_slots: [{ start: '23:30', end: '06:30', action: 'charge' }],
      target_soc: 85,
      timezone: 'America/New_York',
    },
    {
      schedule_id: 'workdays',
      type: 'weekly',
      time_slots: [
        {
          day_of_week: ['mon', 'tue', 'wed', 'thu', 'fri'],
          start: '12:00',
          end: '13:30',
          power_limit: 7,
          action: 'charge',
        },
        // Wholly inside the gap on 2027-03-14 (02:00-03:00 is skipped): that Sunday it does not happen.
        { day_of_week: ['sun'], start: '02:15', end: '02:45', power_limit: 3, action: 'charge' },
      ],
      target_soc: 70,
      timezone: 'America/New_York',
    },
  ],
  rebootAt: Date.parse('2027-03-20T04:40:17.500Z'), // 00:40:17 EDT, in the overnight slot
  forced: { date: '2027-03-19', arrive: '20:00', ev: { capacityKwh: 100, soc: 15, maxChargeKw: 11 } },
  quietEvenings: ['2027-03-13'],
};

export interface Visit {
  arriveAt: number;
  departAt: number;
  ev: { capacityKwh: number; soc: number; maxChargeKw: number; maxDischargeKw: number };
}

/** Instant of a local wall-clock time (never inside a DST gap here), whole seconds plus `seconds`. */
function localInstant(date: string, hhmm: string, zone: string, seconds = 0): number {
  const [h, m] = hhmm.split(':').map(Number);
  return DateTime.fromISO(date, { zone })
    .set({ hour: h ?? 0, minute: m ?? 0, second: seconds })
    .toMillis();
}

/** A vehicle every evening until the next morning, and one around midday on about half the days. */
export function visitsOf(plan: Plan, from: number, to: number): Visit[] {
  const random = createSeededRandom(plan.seed);
  const ev = () => ({
    capacityKwh: pickOne(random, [40, 50, 58, 64, 77, 82, 100]),
    soc: Math.round(uniformBetween(random, 10, 75)),
    maxChargeKw: pickOne(random, [7.4, 11, 22]),
    maxDischargeKw: 11,
  });
  const minutesAfter = (date: DateTime, hhmm: string, spread: number) => {
    const [h, m] = hhmm.split(':').map(Number);
    return date
      .set({ hour: h ?? 0, minute: m ?? 0, second: 0 })
      .plus({ minutes: Math.floor(random() * spread) })
      .toMillis();
  };
  const visits: Visit[] = [];
  let date = DateTime.fromMillis(from, { zone: plan.zone }).startOf('day');
  for (; date.toMillis() < to; date = date.plus({ days: 1 })) {
    const next = date.plus({ days: 1 });
    const midday: Visit = {
      arriveAt: minutesAfter(date, '09:30', 150) + 13_000,
      departAt: minutesAfter(date, '13:00', 180) + 41_000,
      ev: ev(),
    };
    const evening: Visit = {
      arriveAt: minutesAfter(date, '16:30', 270) + 13_000,
      departAt: minutesAfter(next, '05:30', 180) + 41_000,
      ev: ev(),
    };
    if (random() < 0.5) visits.push(midday);
    const day = date.toISODate() ?? '';
    if (day === plan.forced.date) {
      visits.push({
        arriveAt: localInstant(day, plan.forced.arrive, plan.zone, 13),
        departAt: evening.departAt,
        ev: { ...plan.forced.ev, maxDischargeKw: 11 },
      });
    } else if (!plan.quietEvenings.includes(day)) visits.push(evening);
  }
  return visits.filter((v) => v.arriveAt > from + MINUTE && v.departAt < to - MINUTE);
}
