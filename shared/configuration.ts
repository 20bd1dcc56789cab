/**
 * The charger's remotely settable configuration (DESIGN.md §20): one typed table, read by the platform (to check a
 * `PATCH`), by the agent (to check a `set_configuration` command and to apply its values) and by the docs. Every
 * key takes effect on the charger without a restart: from its next heartbeat, its next telemetry sample or its
 * next log line.
 */
import * as z from 'zod/mini';
import {
  COMMAND_POLL_MAX_WAIT_SECONDS,
  HEARTBEAT_INTERVAL_SECONDS,
  TELEMETRY_INTERVAL_ACTIVE_SECONDS,
  TELEMETRY_INTERVAL_IDLE_SECONDS,
} from './limits.js';

export const CONFIGURATION_LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;
export type ConfigurationLogLevel = (typeof CONFIGURATION_LOG_LEVELS)[number];

interface IntegerKey {
  type: 'integer';
  min: number;
  max: number;
  default: number;
  unit: string;
  description: string;
}
interface ChoiceKey {
  type: 'choice';
  choices: readonly string[];
  default: string;
  description: string;
}
export type ConfigurationKeySpec = IntegerKey | ChoiceKey;

/** The table: bounds, default and meaning of each key. */
export const CONFIGURATION_KEYS = {
  telemetry_interval_seconds: {
    type: 'integer',
    min: 1,
    max: 60,
    default: TELEMETRY_INTERVAL_ACTIVE_SECONDS,
    unit: 's',
    description: 'Telemetry cadence of a connector that is charging or discharging.',
  },
  idle_telemetry_interval_seconds: {
    type: 'integer',
    min: 10,
    max: 3600,
    default: TELEMETRY_INTERVAL_IDLE_SECONDS,
    unit: 's',
    description: 'Telemetry cadence of a connector that is idle or in fault.',
  },
  heartbeat_interval_seconds: {
    type: 'integer',
    min: 10,
    max: 300,
    default: HEARTBEAT_INTERVAL_SECONDS,
    unit: 's',
    description:
      'Heartbeat cadence. Above 30 the platform may show the charger offline between heartbeats (it ' +
      'judges liveness over 90 s); the long poll keeps commands prompt whatever the value.',
  },
  command_poll_wait_seconds: {
    type: 'integer',
    min: 0,
    max: COMMAND_POLL_MAX_WAIT_SECONDS,
    default: 25,
    unit: 's',
    description: 'How long each long poll for commands waits; 0 leaves commands to the heartbeat.',
  },
  log_level: {
    type: 'choice',
    choices: CONFIGURATION_LOG_LEVELS,
    default: 'info',
    description: 'The least severe level the agent writes to its log files and stderr.',
  },
  secret_rotation_days: {
    type: 'integer',
    min: 0,
    max: 3650,
    default: 90,
    unit: 'days',
    description: 'How often the charger rotates its device secret; 0 never.',
  },
} as const satisfies Record<string, ConfigurationKeySpec>;

export type ConfigurationKey = keyof typeof CONFIGURATION_KEYS;
export const CONFIGURATION_KEY_NAMES = Object.keys(CONFIGURATION_KEYS) as ConfigurationKey[];

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

/** Every key with its value: what a charger runs with and reports. */
export type ConfigurationValues = {
  -readonly [K in ConfigurationKey]: z.infer<(typeof ConfigurationValueSchemas)[K]>;
};

export const DEFAULT_CONFIGURATION: ConfigurationValues = {
  telemetry_interval_seconds: k.telemetry_interval_seconds.default,
  idle_telemetry_interval_seconds: k.idle_telemetry_interval_seconds.default,
  heartbeat_interval_seconds: k.heartbeat_interval_seconds.default,
  command_poll_wait_seconds: k.command_poll_wait_seconds.default,
  log_level: k.log_level.default,
  secret_rotation_days: k.secret_rotation_days.default,
};

/**
 * The charger reports its whole configuration as a device event of this kind, on every start and after every
 * change, with `data` holding every key's value. The platform keeps the latest (by the event's timestamp).
 */
export const CONFIGURATION_EVENT_KIND = 'configuration_reported';

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
