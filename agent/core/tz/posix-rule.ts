/**
 * The POSIX TZ rule string at the foot of a TZif file (RFC 8536 §3.3, e.g. `CET-1CEST,M3.5.0,M10.5.0/3`):
 * the offsets and daylight-saving dates a zone follows after its last listed transition. Pure: parsing and
 * arithmetic only.
 */

const MS_PER_SECOND = 1000;
const MS_PER_DAY = 86_400_000;
const DEFAULT_RULE_TIME_S = 2 * 3600;

/** A date of a rule: `Jn` (1-365, no Feb 29), `n` (0-365, counting Feb 29) or `Mm.w.d` (week 5 = last). */
export type RuleDate =
  | { kind: 'julian'; day: number }
  | { kind: 'zero-based'; day: number }
  | { kind: 'month-week-day'; month: number; week: number; weekday: number };

export interface PosixRule {
  /** UTC offset of standard time in ms (east positive: Berlin +3_600_000). */
  stdOffsetMs: number;
  dst?: {
    offsetMs: number;
    start: RuleDate;
    /** Seconds after local midnight (standard time) of the start date; may be negative or past 24 h. */
    startTimeS: number;
    end: RuleDate;
    /** Seconds after local midnight (daylight time) of the end date. */
    endTimeS: number;
  };
}

export class PosixRuleError extends Error {}

/** Parses a TZ rule string; throws `PosixRuleError` on anything it does not fully understand. */
export function parsePosixRule(text: string): PosixRule {
  const reader = { text, at: 0 };
  readName(reader);
  const stdOffsetMs = (0 - readDuration(reader, 24)) * MS_PER_SECOND;
  if (reader.at === text.length) return { stdOffsetMs };
  readName(reader);
  const offsetMs =
    peek(reader) === ',' || reader.at === text.length
      ? stdOffsetMs + 3_600_000
      : (0 - readDuration(reader, 24)) * MS_PER_SECOND;
  // Without dates, tzcode's default is the US rule; TZif footers always give them.
  if (reader.at === text.length) return { stdOffsetMs, dst: { offsetMs, ...parseDates(',M3.2.0,M11.1.0') } };
  const dates = parseDates(text.slice(reader.at));
  return { stdOffsetMs, dst: { offsetMs, ...dates } };
}

/** UTC offset in ms that `rule` gives at `instantMs`. */
export function posixOffsetAt(rule: PosixRule, instantMs: number): number {
  const { dst } = rule;
  if (!dst) return rule.stdOffsetMs;
  const year = new Date(instantMs + rule.stdOffsetMs).getUTCFullYear();
  // A rule time may reach a week past its date, so look at the neighbouring years' changes too.
  let offset = rule.stdOffsetMs;
  let latest = Number.NEGATIVE_INFINITY;
  for (let y = year - 2; y <= year + 1; y++) {
    const start = localRuleInstant(dst.start, y) + dst.startTimeS * MS_PER_SECOND - rule.stdOffsetMs;
    const end = localRuleInstant(dst.end, y) + dst.endTimeS * MS_PER_SECOND - dst.offsetMs;
    // When both fall on one instant (DST all year), the start wins: it is taken as the later of the two.
    if (end <= instantMs && end > latest) {
      latest = end;
      offset = rule.stdOffsetMs;
    }
    if (start <= instantMs && start >= latest) {
      latest = start;
      offset = dst.offsetMs;
    }
  }
  return offset;
}

/** Local midnight (as a UTC-based ms value) of `date` in `year`. */
function localRuleInstant(date: RuleDate, year: number): number {
  const yearStart = Date.UTC(year, 0, 1);
  switch (date.kind) {
    case 'julian': {
      const leapShift = isLeapYear(year) && date.day >= 60 ? 1 : 0;
      return yearStart + (date.day - 1 + leapShift) * MS_PER_DAY;
    }
    case 'zero-based':
      return yearStart + date.day * MS_PER_DAY;
    case 'month-week-day': {
      const first = Date.UTC(year, date.month - 1, 1);
      const firstWeekday = new Date(first).getUTCDay();
      let dayOfMonth = 1 + ((date.weekday - firstWeekday + 7) % 7) + (date.week - 1) * 7;
      const daysInMonth = new Date(Date.UTC(year, date.month, 0)).getUTCDate();
      while (dayOfMonth > daysInMonth) dayOfMonth -= 7;
      return first + (dayOfMonth - 1) * MS_PER_DAY;
    }
  }
}

function isLeapYear(year: number): boolean {
  return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
}

interface Reader {
  text: string;
  at: number;
}

function peek(reader: Reader): string | undefined {
  return reader.text[reader.at];
}

/** A zone abbreviation: three or more letters, or `<...>` quoted (`<+0330>`). Its value does not matter. */
function readName(reader: Reader): void {
  const rest = reader.text.slice(reader.at);
  const match = /^(?:<[A-Za-z0-9+-]{3,}>|[A-Za-z]{3,})/.exec(rest);
  if (!match) throw new PosixRuleError(`expected a zone abbreviation at ${reader.at} in "${reader.text}"`);
  reader.at += match[0].length;
}

/** `[+-]hh[:mm[:ss]]` in seconds, sign as written; hours up to `maxHours`. */
function readDuration(reader: Reader, maxHours: number): number {
  const rest = reader.text.slice(reader.at);
  const match = /^([+-]?)(\d{1,3})(?::(\d{2}))?(?::(\d{2}))?/.exec(rest);
  if (!match) throw new PosixRuleError(`expected an offset or time at ${reader.at} in "${reader.text}"`);
  const [all, sign, hours, minutes = '0', seconds = '0'] = match;
  const h = Number(hours);
  const m = Number(minutes);
  const s = Number(seconds);
  if (h > maxHours || m > 59 || s > 59) {
    throw new PosixRuleError(`out of range: "${all}" in "${reader.text}"`);
  }
  reader.at += all.length;
  const total = h * 3600 + m * 60 + s;
  return sign === '-' ? -total : total;
}

function parseDates(text: string): Omit<NonNullable<PosixRule['dst']>, 'offsetMs'> {
  const reader = { text, at: 0 };
  const part = (): { date: RuleDate; timeS: number } => {
    if (peek(reader) !== ',') throw new PosixRuleError(`expected "," at ${reader.at} in "${text}"`);
    reader.at += 1;
    const date = readDate(reader);
    let timeS = DEFAULT_RULE_TIME_S;
    if (peek(reader) === '/') {
      reader.at += 1;
      // RFC 8536 §3.3.1 extends the hours of a rule time to -167..167.
      timeS = readDuration(reader, 167);
    }
    return { date, timeS };
  };
  const start = part();
  const end = part();
  if (reader.at !== text.length) {
    throw new PosixRuleError(`unexpected "${text.slice(reader.at)}" in "${text}"`);
  }
  return { start: start.date, startTimeS: start.timeS, end: end.date, endTimeS: end.timeS };
}

function readDate(reader: Reader): RuleDate {
  const rest = reader.text.slice(reader.at);
  const monthWeekDay = /^M(\d{1,2})\.(\d)\.(\d)/.exec(rest);
  if (monthWeekDay) {
    const month = Number(monthWeekDay[1]);
    const week = Number(monthWeekDay[2]);
    const weekday = Number(monthWeekDay[3]);
    if (month < 1 || month > 12 || week < 1 || week > 5 || weekday > 6) {
      throw new PosixRuleError(`bad date "${monthWeekDay[0]}" in "${reader.text}"`);
    }
    reader.at += monthWeekDay[0].length;
    return { kind: 'month-week-day', month, week, weekday };
  }
  const julian = /^J(\d{1,3})/.exec(rest);
  if (julian) {
    const day = Number(julian[1]);
    if (day < 1 || day > 365) throw new PosixRuleError(`bad date "${julian[0]}" in "${reader.text}"`);
    reader.at += julian[0].length;
    return { kind: 'julian', day };
  }
  const zeroBased = /^(\d{1,3})/.exec(rest);
  if (zeroBased) {
    const day = Number(zeroBased[1]);
    if (day > 365) throw new PosixRuleError(`bad date "${zeroBased[0]}" in "${reader.text}"`);
    reader.at += zeroBased[0].length;
    return { kind: 'zero-based', day };
  }
  throw new PosixRuleError(`expected a rule date at ${reader.at} in "${reader.text}"`);
}
