import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DateTime } from 'luxon';
import { describe, expect, it } from 'vitest';
import { offsetAt, parseTzif } from '../../../agent/core/tz/tzif.js';
import { offsetChanges } from '../../helpers/offset-changes.js';

/**
 * The agent's reading of the system's tz database against Luxon (on Node's ICU): UTC offsets a second before and
 * at every change from 1990 to 2060, plus every day (every week when comparing all zones) at noon, zone by zone. The two databases are released apart
 * (here 2025b beside ICU's 2026c, which disagree on six zones), so all zones are compared only when their versions
 * match; otherwise the zones below, whose rules no release since 2023 has changed.
 */
const DIRECTORY = process.env.TZDIR || '/usr/share/zoneinfo';
const STABLE_ZONES = [
  'Europe/Berlin',
  'Europe/London',
  'America/New_York',
  'America/Chicago',
  'America/Los_Angeles',
  'America/St_Johns', // -03:30 / -02:30
  'America/Santiago', // changes at 24:00
  'America/Havana', // changes at midnight
  'America/Sao_Paulo', // DST ended 2019
  'Australia/Sydney',
  'Australia/Lord_Howe', // 30-minute DST
  'Pacific/Auckland',
  'Pacific/Chatham', // +12:45 / +13:45
  'Asia/Kolkata',
  'Asia/Kathmandu',
  'Asia/Tehran', // DST ended 2022
  'Asia/Tokyo',
  'Africa/Johannesburg',
  'UTC',
];
const FROM = Date.parse('1990-01-01T00:00:00Z');
const TO = Date.parse('2060-01-01T00:00:00Z');
const DAY = 86_400_000;

function databaseVersion(): string | undefined {
  try {
    return /^# version (\S+)/.exec(readFileSync(join(DIRECTORY, 'tzdata.zi'), 'latin1'))?.[1];
  } catch {
    return undefined;
  }
}

describe.skipIf(!existsSync(join(DIRECTORY, 'Europe/Berlin')))(
  `the system tz database (${DIRECTORY})`,
  () => {
    const sameRelease = databaseVersion() === process.versions.tz;
    const zones = sameRelease ? Intl.supportedValuesOf('timeZone') : STABLE_ZONES;
    // All 400-odd zones are scanned weekly (offsets change at most a few times a year), the few daily.
    const step = sameRelease ? 7 * DAY : DAY;

    it(`gives Luxon's offsets (${sameRelease ? 'all zones' : 'zones with stable rules'})`, () => {
      const mismatches: string[] = [];
      let compared = 0;
      let zonesCompared = 0;
      for (const zone of zones) {
        const file = join(DIRECTORY, zone);
        if (!existsSync(file)) continue;
        zonesCompared++;
        const rules = parseTzif(readFileSync(file));
        const ours = (t: number) => offsetAt(rules, t) / 60_000;
        const luxon = (t: number) => DateTime.fromMillis(t, { zone }).offset;
        const range = { from: FROM, to: TO, step, resolution: 1000 };
        const instants = [...offsetChanges(ours, range), ...offsetChanges(luxon, range)].flatMap((t) => [
          t - 1000,
          t,
        ]);
        for (let t = FROM + DAY / 2; t < TO; t += step) instants.push(t);
        for (const t of instants) {
          compared++;
          if (ours(t) !== luxon(t)) {
            mismatches.push(`${zone} at ${new Date(t).toISOString()}: ${ours(t)} min, Luxon ${luxon(t)}`);
            break;
          }
        }
      }
      expect(mismatches).toEqual([]);
      expect(zonesCompared).toBeGreaterThanOrEqual(sameRelease ? 400 : STABLE_ZONES.length);
      expect(compared).toBeGreaterThan(zonesCompared * Math.floor((TO - FROM) / step));
    });
  },
);
