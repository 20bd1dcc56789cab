import * as z from 'zod';
import {
  ID_MAX_LENGTH,
  PAGE_DEFAULT,
  PAGE_MAX,
  PAGE_SIZE_DEFAULT,
  PAGE_SIZE_MAX,
  TEXT_MAX_LENGTH,
} from './limits.js';

/** ISO 8601 date-time; `Z` or an explicit offset. Stored and answered in UTC. */
export const Timestamp = z.iso.datetime({ offset: true });

/** Platform-issued and caller-chosen identifiers: letters, digits and `_ - . :`. No slashes, spaces or controls. */
export const Identifier = z
  .string()
  .min(1)
  .max(ID_MAX_LENGTH)
  .regex(/^[A-Za-z0-9_.:-]+$/, 'may contain only letters, digits and _ - . :');

/** Printable text without control characters. */
export const Text = z
  .string()
  .min(1)
  .max(TEXT_MAX_LENGTH)
  // biome-ignore lint/suspicious/noControlCharactersInRegex: rejecting control characters is the point
  .regex(/^[^\u0000-\u001f\u007f]+$/, 'must not contain control characters');

export const Soc = z.number().int().min(0).max(100);

export const ConnectorState = z.enum(['idle', 'charging', 'discharging', 'fault', 'unavailable']);
export type ConnectorState = z.infer<typeof ConnectorState>;
export const TelemetryState = z.enum(['idle', 'charging', 'discharging', 'fault']);
export type TelemetryState = z.infer<typeof TelemetryState>;
export const DeviceStatus = z.enum(['online', 'offline']);
export const HeartbeatStatus = z.enum(['online', 'offline', 'fault']);
export type HeartbeatStatus = z.infer<typeof HeartbeatStatus>;

export const Scope = z.enum(['read', 'write']);
export type Scope = z.infer<typeof Scope>;

/** True when `name` is an IANA timezone this runtime knows. */
export function isIanaTimezone(name: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: name });
    return true;
  } catch {
    return false;
  }
}
export const Timezone = z.string().min(1).max(64).refine(isIanaTimezone, 'unknown IANA timezone');

/** A query-string integer: digits only, so `1e3`, ` 1` or `1.0` are refused rather than coerced. */
export function queryInt(min: number, max: number) {
  return z
    .string()
    .regex(/^-?\d{1,16}$/, 'must be an integer')
    .transform(Number)
    .pipe(z.number().int().min(min).max(max));
}

/** Path parameter `connector_id`. */
export const ConnectorIdParam = queryInt(1, 2_147_483_647);

export const PageQuery = {
  page: queryInt(1, PAGE_MAX).default(PAGE_DEFAULT),
  size: queryInt(1, PAGE_SIZE_MAX).default(PAGE_SIZE_DEFAULT),
};

export function pageOf<T extends z.ZodType>(item: T) {
  return z.object({
    total: z.number().int(),
    page: z.number().int(),
    size: z.number().int(),
    items: z.array(item),
  });
}
