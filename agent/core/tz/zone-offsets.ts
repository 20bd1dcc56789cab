/**
 * Where the agent's time-zone offsets come from: the system's tz database (`$TZDIR`, else
 * /usr/share/zoneinfo, which the OEM's OS image keeps current), read once per zone; Intl (Node's ICU data) for
 * a zone the system lacks or spells differently (`europe/berlin`), or when a file cannot be read. This is the
 * core's one read of its environment, as Intl was before it.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { offsetAt, parseTzif, type ZoneRules } from './tzif.js';

/** UTC offset in ms at an instant. */
export type OffsetAt = (instantMs: number) => number;

/**
 * Offset functions by zone, from the tz database in `directory` (then Intl), each zone read once. Throws
 * `RangeError` (as Intl does) for a zone neither knows.
 */
export function zoneOffsets(directory: string): (timeZone: string) => OffsetAt {
  const sources = new Map<string, OffsetAt>();
  return (timeZone) => {
    let source = sources.get(timeZone);
    if (!source) {
      source = fromZoneFile(directory, timeZone) ?? fromIntl(timeZone);
      sources.set(timeZone, source);
    }
    return source;
  };
}

let fromSystem: ((timeZone: string) => OffsetAt) | undefined;

/** The offset function of `timeZone` from the system's tz database (`$TZDIR`, else /usr/share/zoneinfo). */
export function offsetsOf(timeZone: string): OffsetAt {
  fromSystem ??= zoneOffsets(systemZoneDirectory());
  return fromSystem(timeZone);
}

/** True when the agent can read the rules of `timeZone` (from the system's tz database, else Intl). */
export function isReadableZone(timeZone: string): boolean {
  try {
    offsetsOf(timeZone);
    return true;
  } catch {
    return false;
  }
}

export function systemZoneDirectory(): string {
  return process.env.TZDIR || '/usr/share/zoneinfo';
}

/** Names as the tz database writes them (`America/Argentina/Buenos_Aires`, `Etc/GMT+5`): no `.`, no `//`. */
const ZONE_NAME = /^[A-Za-z][A-Za-z0-9_+-]*(?:\/[A-Za-z0-9_+-]+)*$/;
// Files in the database directory that are not zones Intl would accept.
const NOT_ZONES = new Set(['Factory', 'localtime', 'posixrules']);

/** The rules of `timeZone` from its file in `directory`; throws why not (no such file, not TZif...). */
export function readZoneFile(directory: string, timeZone: string): ZoneRules {
  if (!ZONE_NAME.test(timeZone) || NOT_ZONES.has(timeZone) || timeZone.length > 64) {
    throw new Error(`"${timeZone}" is not a zone name the tz database has files for`);
  }
  return parseTzif(readFileSync(join(directory, timeZone)));
}

/** The release of the tz database in `directory` (`2025b`), from its `tzdata.zi`; undefined when unknown. */
export function zoneDatabaseRelease(directory: string): string | undefined {
  try {
    const head = readFileSync(join(directory, 'tzdata.zi'), 'latin1').slice(0, 64);
    return /^# version (\S+)/.exec(head)?.[1];
  } catch {
    return undefined;
  }
}

function fromZoneFile(directory: string, timeZone: string): OffsetAt | undefined {
  try {
    const rules = readZoneFile(directory, timeZone);
    return (instantMs) => offsetAt(rules, instantMs);
  } catch {
    return undefined;
  }
}

function fromIntl(timeZone: string): OffsetAt {
  const formatter = new Intl.DateTimeFormat('en-US', {
    timeZone,
    hourCycle: 'h23',
    year: 'numeric',
    month: 'numeric',
    day: 'numeric',
    hour: 'numeric',
    minute: 'numeric',
    second: 'numeric',
  });
  return (instantMs) => {
    const wholeSecond = Math.floor(instantMs / 1000) * 1000;
    const fields = { year: 0, month: 0, day: 0, hour: 0, minute: 0, second: 0 };
    for (const part of formatter.formatToParts(wholeSecond)) {
      if (part.type in fields) fields[part.type as keyof typeof fields] = Number(part.value);
    }
    const local = Date.UTC(
      fields.year,
      fields.month - 1,
      fields.day,
      fields.hour,
      fields.minute,
      fields.second,
    );
    return local - wholeSecond;
  };
}
