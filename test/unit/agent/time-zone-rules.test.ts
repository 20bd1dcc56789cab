import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PosixRuleError, parsePosixRule, posixOffsetAt } from '../../../agent/core/tz/posix-rule.js';
import { offsetAt, parseTzif, TzifError } from '../../../agent/core/tz/tzif.js';
import { zoneOffsets } from '../../../agent/core/tz/zone-offsets.js';
import { writeTzif } from '../../helpers/tzif-writer.js';

const MINUTE = 60_000;
const minutesAt = (rule: string, iso: string) =>
  posixOffsetAt(parsePosixRule(rule), Date.parse(iso)) / MINUTE;

describe('POSIX TZ rules (TZif footers)', () => {
  // [rule, instant, UTC offset in minutes]: each change shown a second before and at the instant it happens.
  const cases: [string, string, number][] = [
    // Europe/Berlin: last Sunday of March 02:00 CET, last Sunday of October 03:00 CEST (2031: 30 March, 26 Oct).
    ['CET-1CEST,M3.5.0,M10.5.0/3', '2031-03-30T00:59:59Z', 60],
    ['CET-1CEST,M3.5.0,M10.5.0/3', '2031-03-30T01:00:00Z', 120],
    ['CET-1CEST,M3.5.0,M10.5.0/3', '2031-10-26T00:59:59Z', 120],
    ['CET-1CEST,M3.5.0,M10.5.0/3', '2031-10-26T01:00:00Z', 60],
    // America/New_York: second Sunday of March, first Sunday of November, 02:00 local (2031: 9 March, 2 Nov).
    ['EST5EDT,M3.2.0,M11.1.0', '2031-03-09T06:59:59Z', -300],
    ['EST5EDT,M3.2.0,M11.1.0', '2031-03-09T07:00:00Z', -240],
    ['EST5EDT,M3.2.0,M11.1.0', '2031-11-02T05:59:59Z', -240],
    ['EST5EDT,M3.2.0,M11.1.0', '2031-11-02T06:00:00Z', -300],
    // Without dates, the US rule (tzcode's default).
    ['EST5EDT', '2031-07-01T00:00:00Z', -240],
    ['EST5EDT', '2031-01-01T00:00:00Z', -300],
    // Australia/Lord_Howe, southern: +10:30, +11 from the first Sunday of October to the first Sunday of April.
    ['<+1030>-10:30<+11>-11,M10.1.0,M4.1.0', '2031-01-15T00:00:00Z', 660],
    ['<+1030>-10:30<+11>-11,M10.1.0,M4.1.0', '2031-04-05T14:59:59Z', 660],
    ['<+1030>-10:30<+11>-11,M10.1.0,M4.1.0', '2031-04-05T15:00:00Z', 630],
    ['<+1030>-10:30<+11>-11,M10.1.0,M4.1.0', '2031-10-04T15:29:59Z', 630],
    ['<+1030>-10:30<+11>-11,M10.1.0,M4.1.0', '2031-10-04T15:30:00Z', 660],
    ['<+1030>-10:30<+11>-11,M10.1.0,M4.1.0', '2031-12-31T23:59:59Z', 660],
    // America/Santiago: changes at 24:00 on the first Saturday (2031: 6 April 00:00 -03, 7 September 00:00 -04).
    ['<-04>4<-03>,M9.1.6/24,M4.1.6/24', '2031-04-06T02:59:59Z', -180],
    ['<-04>4<-03>,M9.1.6/24,M4.1.6/24', '2031-04-06T03:00:00Z', -240],
    ['<-04>4<-03>,M9.1.6/24,M4.1.6/24', '2031-09-07T03:59:59Z', -240],
    ['<-04>4<-03>,M9.1.6/24,M4.1.6/24', '2031-09-07T04:00:00Z', -180],
    // Fixed offsets with minutes, west of UTC written positive.
    ['IST-5:30', '2031-06-01T00:00:00Z', 330],
    ['<+0545>-5:45', '2031-06-01T00:00:00Z', 345],
    ['<-03>3', '2031-06-01T00:00:00Z', -180],
    ['<-0230>2:30', '2031-06-01T00:00:00Z', -150],
    // Daylight time all year (RFC 8536's example): the start at the year's first instant wins the tie.
    ['EST5EDT,0/0,J365/25', '2031-01-01T05:00:00Z', -240],
    ['EST5EDT,0/0,J365/25', '2031-07-01T00:00:00Z', -240],
    ['EST5EDT,0/0,J365/25', '2032-01-01T04:59:59Z', -240],
    // Jn never counts 29 February (J60 is 1 March in any year); a zero-based n does (59 is 29 Feb in 2032).
    ['AAA0BBB,J60,J300', '2032-03-01T01:59:59Z', 0],
    ['AAA0BBB,J60,J300', '2032-03-01T02:00:00Z', 60],
    ['AAA0BBB,59,299', '2032-02-29T01:59:59Z', 0],
    ['AAA0BBB,59,299', '2032-02-29T02:00:00Z', 60],
    ['AAA0BBB,59,299', '2031-03-01T02:00:00Z', 60],
    // A negative rule time is before the date's midnight; an explicit daylight offset is used as written.
    ['AAA0BBB,M3.5.0/-1,M10.5.0', '2031-03-29T22:59:59Z', 0],
    ['AAA0BBB,M3.5.0/-1,M10.5.0', '2031-03-29T23:00:00Z', 60],
    ['AAA3BBB1,M3.5.0,M10.5.0', '2031-07-01T00:00:00Z', -60],
    // Week 5 is the last such weekday, also in a month with only four (February 2031: last Friday the 28th).
    ['AAA0BBB,M2.5.5/0,M10.5.0', '2031-02-27T23:59:59Z', 0],
    ['AAA0BBB,M2.5.5/0,M10.5.0', '2031-02-28T00:00:00Z', 60],
  ];
  it.each(cases)('%s at %s: UTC offset %i min', (rule, iso, minutes) => {
    expect(minutesAt(rule, iso)).toBe(minutes);
  });

  it.each([
    '',
    'C',
    'CET',
    '-1',
    'CET-25',
    'CET-1:60',
    'CET-1CEST,M3.5.0',
    'CET-1CEST,M13.5.0,M10.5.0/3',
    'CET-1CEST,M3.6.0,M10.5.0/3',
    'CET-1CEST,M3.5.7,M10.5.0/3',
    'CET-1CEST,J366,J1',
    'CET-1CEST,M3.5.0,M10.5.0/168',
    'CET-1CEST,M3.5.0,M10.5.0/3x',
    'CET-1CEST;M3.5.0,M10.5.0',
  ])('refuses %j', (rule) => {
    expect(() => parsePosixRule(rule)).toThrow(PosixRuleError);
  });
});

const T = (iso: string) => Date.parse(iso) / 1000;
const CET = { utoff: 3600 };
const CEST = { utoff: 7200, isdst: true };

describe('TZif files', () => {
  const berlinLike = writeTzif({
    types: [CET, CEST],
    transitions: [
      { at: T('2020-03-29T01:00:00Z'), type: 1 },
      { at: T('2020-10-25T01:00:00Z'), type: 0 },
    ],
    footer: 'CET-1CEST,M3.5.0,M10.5.0/3',
  });

  it('uses type 0 before the first transition, the table between, the footer after the last', () => {
    const rules = parseTzif(berlinLike);
    const at = (iso: string) => offsetAt(rules, Date.parse(iso)) / MINUTE;
    expect(at('2019-07-01T00:00:00Z')).toBe(60);
    expect(at('2020-03-29T00:59:59.999Z')).toBe(60);
    expect(at('2020-03-29T01:00:00Z')).toBe(120);
    expect(at('2020-10-25T00:59:59Z')).toBe(120);
    expect(at('2020-10-25T01:00:00Z')).toBe(60);
    // Past the table: the footer's rule (2031: 30 March, 26 October).
    expect(at('2031-03-30T01:00:00Z')).toBe(120);
    expect(at('2031-10-26T01:00:00Z')).toBe(60);
  });

  it('keeps the last offset after the table when the footer is empty, and type 0 with no transitions', () => {
    const stopped = parseTzif(
      writeTzif({ types: [CET, CEST], transitions: [{ at: T('2020-03-29T01:00:00Z'), type: 1 }] }),
    );
    expect(offsetAt(stopped, Date.parse('2040-12-01T00:00:00Z')) / MINUTE).toBe(120);
    const fixed = parseTzif(writeTzif({ types: [{ utoff: 19800 }] }));
    expect(offsetAt(fixed, Date.parse('2031-06-01T00:00:00Z')) / MINUTE).toBe(330);
    const footerOnly = parseTzif(writeTzif({ types: [CET], footer: 'CET-1CEST,M3.5.0,M10.5.0/3' }));
    expect(offsetAt(footerOnly, Date.parse('2031-07-01T00:00:00Z')) / MINUTE).toBe(120);
  });

  it('reads the 64-bit block of a version 2+ file (times before 1901), and version 1 files', () => {
    const old = { types: [{ utoff: 3208 }, CET], transitions: [{ at: -3_000_000_000, type: 1 }] };
    // 1880: in the 32-bit block the transition is clamped to 1901; only the 64-bit block has it right.
    expect(offsetAt(parseTzif(writeTzif({ ...old, version: 3 })), Date.parse('1880-01-01T00:00:00Z'))).toBe(
      3_600_000,
    );
    expect(offsetAt(parseTzif(writeTzif({ ...old, version: 1 })), Date.parse('1880-01-01T00:00:00Z'))).toBe(
      3_208_000,
    );
  });

  it.each<[string, Uint8Array]>([
    ['no magic', new TextEncoder().encode('TZjf2'.padEnd(60, '\0'))],
    ['a file cut short', berlinLike.subarray(0, 100)],
    ['a cut footer', berlinLike.subarray(0, berlinLike.length - 1)],
    ['leap seconds', writeTzif({ types: [CET], leapSeconds: 1 })],
    ['a type index past the types', writeTzif({ types: [CET], transitions: [{ at: 0, type: 3 }] })],
    ['no types', writeTzif({ types: [] })],
    [
      'transitions out of order',
      writeTzif({
        types: [CET, CEST],
        transitions: [
          { at: 100, type: 1 },
          { at: 50, type: 0 },
        ],
      }),
    ],
  ])('refuses %s', (_what, bytes) => {
    expect(() => parseTzif(bytes)).toThrow(TzifError);
  });

  it('refuses a footer that is not a rule', () => {
    expect(() => parseTzif(writeTzif({ types: [CET], footer: 'CET-1CEST,M3' }))).toThrow(PosixRuleError);
  });
});

describe('zone offsets: the tz database directory first, Intl otherwise', () => {
  const directory = mkdtempSync(join(tmpdir(), 'tzdir-'));
  const put = (name: string, bytes: Uint8Array) => {
    mkdirSync(dirname(join(directory, name)), { recursive: true });
    writeFileSync(join(directory, name), bytes);
  };
  // A Berlin of this directory's own, five hours east, to show which source answered.
  put('Europe/Berlin', writeTzif({ types: [{ utoff: 5 * 3600 }] }));
  put('Europe/Paris', new TextEncoder().encode('not a zone file'));
  put('Factory', writeTzif({ types: [{ utoff: 7 * 3600 }] }));
  const offsets = zoneOffsets(directory);
  const JANUARY = Date.parse('2031-01-15T12:00:00Z');

  it('reads a zone from its file', () => {
    expect(offsets('Europe/Berlin')(JANUARY) / MINUTE).toBe(300);
  });

  it('asks Intl for a zone the directory lacks, spells differently or holds unreadable', () => {
    expect(offsets('Europe/Madrid')(JANUARY) / MINUTE).toBe(60);
    expect(offsets('europe/berlin')(JANUARY) / MINUTE).toBe(60);
    expect(offsets('Europe/Paris')(JANUARY) / MINUTE).toBe(60);
  });

  it('reads no path outside the directory and no file that is not a zone; unknown zones throw as Intl does', () => {
    expect(() => offsets('Factory')).toThrow(RangeError);
    expect(() => offsets('../Europe/Berlin')).toThrow(RangeError);
    expect(() => offsets('Mars/Olympus_Mons')).toThrow(RangeError);
  });
});
