/**
 * The wire contract's schemas are written with zod's functional build, `zod/mini`: the same zod 4 engine as
 * `import * as z from 'zod'`, without the chained methods. A bundle then carries only the parts of zod the
 * schemas use, which is what keeps the charger agent small (docs/benchmarks.md, "Agent footprint"); the
 * platform composes them with the classic API freely (both are zod's core schemas).
 */

import { en } from 'zod/locales';
import * as z from 'zod/mini';
import {
  ID_MAX_LENGTH,
  PAGE_DEFAULT,
  PAGE_MAX,
  PAGE_SIZE_DEFAULT,
  PAGE_SIZE_MAX,
  TEXT_MAX_LENGTH,
} from './limits.js';

// Classic zod sets its English messages when it loads; zod/mini leaves that to its user. Without this, a
// process that loads only zod/mini (the agent) would answer "Invalid input" for every kind of bad value.
z.config(en());

/** ISO 8601 date-time; `Z` or an explicit offset. Stored and answered in UTC. */
export const Timestamp = z.iso.datetime({ offset: true });

/** A time in epoch milliseconds as the wire's Timestamp (UTC, milliseconds). */
export const toTimestamp = (ms: number): string => new Date(ms).toISOString();

/** Platform-issued and caller-chosen identifiers: letters, digits and `_ - . :`. No slashes, spaces or controls. */
export const Identifier = z
  .string()
  .check(
    z.minLength(1),
    z.maxLength(ID_MAX_LENGTH),
    z.regex(/^[A-Za-z0-9_.:-]+$/, 'may contain only letters, digits and _ - . :'),
  );

/** Printable text without control characters. */
export const Text = z.string().check(
  z.minLength(1),
  z.maxLength(TEXT_MAX_LENGTH),
  // biome-ignore lint/suspicious/noControlCharactersInRegex: rejecting control characters is the point
  z.regex(/^[^\u0000-\u001f\u007f]+$/, 'must not contain control characters'),
);

/**
 * Control characters: C0 (tab and newline included), DEL and C1. Free text fields are single-line and end up on
 * terminals and in logs (DESIGN.md §18): ESC or CSI in a reason would drive the technician's terminal.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point
export const CONTROL_CHARACTER = /[\u0000-\u001f\u007f-\u009f]/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point
export const WITHOUT_CONTROL_CHARACTERS = /^[^\u0000-\u001f\u007f-\u009f]*$/;
export const CONTROL_CHARACTERS_MESSAGE = 'must not contain control characters (tab and newline included)';

/** Free text (`reason`, `message`, `description`): single-line, up to `max` characters, no control characters. */
export function freeText(max: number) {
  return z.string().check(z.maxLength(max), z.regex(WITHOUT_CONTROL_CHARACTERS, CONTROL_CHARACTERS_MESSAGE));
}

/**
 * Text a charger stores as it sent it (event data, a VIN): anything but NUL, which neither PostgreSQL's `text`
 * nor its `jsonb` can hold, so the same upload is refused alike on both backends instead of failing on one.
 */
export function storableText(max?: number) {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: refusing NUL is the point
  const noNul = z.regex(/^[^\u0000]*$/, 'must not contain a NUL character');
  return max === undefined ? z.string().check(noNul) : z.string().check(z.maxLength(max), noNul);
}

/** `text` with every control character replaced by a space: for text this side sends as free text. */
export function replaceControlCharacters(text: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: replacing control characters is the point
  return text.replace(/[\u0000-\u001f\u007f-\u009f]/g, ' ');
}

export const Soc = z.int().check(z.minimum(0), z.maximum(100));

export const ConnectorState = z.enum(['idle', 'charging', 'discharging', 'fault', 'unavailable']);
export type ConnectorState = z.infer<typeof ConnectorState>;
export const TelemetryState = z.enum(['idle', 'charging', 'discharging', 'fault']);
export type TelemetryState = z.infer<typeof TelemetryState>;
export const DeviceStatus = z.enum(['online', 'offline']);
export const HeartbeatStatus = z.enum(['online', 'offline', 'fault']);
export type HeartbeatStatus = z.infer<typeof HeartbeatStatus>;

export const Scope = z.enum(['read', 'write']);
export type Scope = z.infer<typeof Scope>;

let canonicalZones: Set<string> | undefined;

/**
 * True when `name` is an IANA timezone this runtime knows (what `Intl.DateTimeFormat` accepts). ICU's list of
 * canonical zones answers first, so most checks build no formatter; `UTC` is always valid (ECMA-402).
 */
export function isIanaTimezone(name: string): boolean {
  canonicalZones ??= new Set([...Intl.supportedValuesOf('timeZone'), 'UTC']);
  if (canonicalZones.has(name)) return true;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: name });
    return true;
  } catch {
    return false;
  }
}
let timezoneCheck: (name: string) => boolean = isIanaTimezone;

/**
 * How `Timezone` checks a name; by default `isIanaTimezone`. The charger agent's process checks instead that it
 * can read the zone's rules (its tz database, then Intl: never stricter than Intl), so that a zone outside ICU's
 * canonical list (Asia/Kolkata, Europe/Kyiv, US/Eastern) does not load ICU's date formatting only to be checked
 * (docs/agent.md, "Time zones").
 */
export function checkTimezonesWith(check: (name: string) => boolean): void {
  timezoneCheck = check;
}

export const Timezone = z.string().check(
  z.minLength(1),
  z.maxLength(64),
  z.refine((name) => timezoneCheck(name), 'unknown IANA timezone'),
);

/** A query-string integer: digits only, so `1e3`, ` 1` or `1.0` are refused rather than coerced. */
export function queryInt(min: number, max: number) {
  return z.pipe(
    z.pipe(z.string().check(z.regex(/^-?\d{1,16}$/, 'must be an integer')), z.transform(Number)),
    z.int().check(z.minimum(min), z.maximum(max)),
  );
}

/** Path parameter `connector_id`. */
export const ConnectorIdParam = queryInt(1, 2_147_483_647);

export const PageQuery = {
  page: z._default(queryInt(1, PAGE_MAX), PAGE_DEFAULT),
  size: z._default(queryInt(1, PAGE_SIZE_MAX), PAGE_SIZE_DEFAULT),
};

export function pageOf<T extends z.core.SomeType>(item: T) {
  return z.object({
    total: z.int(),
    page: z.int(),
    size: z.int(),
    items: z.array(item),
  });
}
