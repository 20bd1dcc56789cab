/**
 * The schemas of the charger's remote configuration (DESIGN.md §20), built from its table
 * (configuration-table.ts): the platform checks a `PATCH` with them, the agent a `set_configuration` command.
 */
import * as z from 'zod/mini';
import {
  CONFIGURATION_KEYS,
  CONFIGURATION_LOG_LEVELS,
  type ConfigurationKey,
  type IntegerKey,
} from './configuration-table.js';

export * from './configuration-table.js';

const integer = (spec: IntegerKey) => z.int().check(z.minimum(spec.min), z.maximum(spec.max));
const k = CONFIGURATION_KEYS;

/** One schema per key, from the table. */
export const ConfigurationValueSchemas = {
  telemetry_interval_seconds: integer(k.telemetry_interval_seconds),
  idle_telemetry_interval_seconds: integer(k.idle_telemetry_interval_seconds),
  heartbeat_interval_seconds: integer(k.heartbeat_interval_seconds),
  command_poll_wait_seconds: integer(k.command_poll_wait_seconds),
  log_level: z.enum(CONFIGURATION_LOG_LEVELS),
  secret_rotation_days: integer(k.secret_rotation_days),
} as const satisfies Record<ConfigurationKey, z.core.$ZodType>;

/** Some keys of the table with valid values, and nothing else (an unknown key is refused, naming it). */
export const ConfigurationChange = z
  .strictObject({
    telemetry_interval_seconds: z.optional(ConfigurationValueSchemas.telemetry_interval_seconds),
    idle_telemetry_interval_seconds: z.optional(ConfigurationValueSchemas.idle_telemetry_interval_seconds),
    heartbeat_interval_seconds: z.optional(ConfigurationValueSchemas.heartbeat_interval_seconds),
    command_poll_wait_seconds: z.optional(ConfigurationValueSchemas.command_poll_wait_seconds),
    log_level: z.optional(ConfigurationValueSchemas.log_level),
    secret_rotation_days: z.optional(ConfigurationValueSchemas.secret_rotation_days),
  })
  .check(z.refine((values) => Object.keys(values).length > 0, 'must set at least one key'));
export type ConfigurationChange = z.infer<typeof ConfigurationChange>;

/**
 * A reported configuration as the platform keeps it: each known key whose value is valid. A newer agent may know
 * keys this platform does not; they are kept too (as reported), so an operator sees them, but cannot be set.
 */
export function reportedConfiguration(
  data: Record<string, unknown>,
): Record<string, string | number | boolean> {
  const kept: Record<string, string | number | boolean> = {};
  for (const [key, value] of Object.entries(data)) {
    if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean') continue;
    const schema = (ConfigurationValueSchemas as Record<string, z.core.$ZodType | undefined>)[key];
    if (schema && !z.safeParse(schema, value).success) continue;
    kept[key] = value;
  }
  return kept;
}
