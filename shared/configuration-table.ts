/**
 * The charger's remotely settable configuration (DESIGN.md §20) as data: each key's bounds, default, unit and
 * meaning. Without zod, so that the dashboard can show the table from this very module (its bundle takes no
 * dependency); the schemas built from it are configuration.ts. Every key takes effect on the charger without a
 * restart: from its next heartbeat, its next telemetry sample or its next log line.
 */
import {
  COMMAND_POLL_MAX_WAIT_SECONDS,
  HEARTBEAT_INTERVAL_SECONDS,
  TELEMETRY_INTERVAL_ACTIVE_SECONDS,
  TELEMETRY_INTERVAL_IDLE_SECONDS,
} from './limits.js';

export const CONFIGURATION_LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;
export type ConfigurationLogLevel = (typeof CONFIGURATION_LOG_LEVELS)[number];

export interface IntegerKey {
  type: 'integer';
  min: number;
  max: number;
  default: number;
  unit: string;
  description: string;
}
export interface ChoiceKey {
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

/** Every key with its value: what a charger runs with and reports. */
export type ConfigurationValues = {
  -readonly [K in ConfigurationKey]: (typeof CONFIGURATION_KEYS)[K] extends {
    type: 'choice';
    choices: readonly (infer C)[];
  }
    ? C
    : number;
};

export const DEFAULT_CONFIGURATION: ConfigurationValues = {
  telemetry_interval_seconds: CONFIGURATION_KEYS.telemetry_interval_seconds.default,
  idle_telemetry_interval_seconds: CONFIGURATION_KEYS.idle_telemetry_interval_seconds.default,
  heartbeat_interval_seconds: CONFIGURATION_KEYS.heartbeat_interval_seconds.default,
  command_poll_wait_seconds: CONFIGURATION_KEYS.command_poll_wait_seconds.default,
  log_level: CONFIGURATION_KEYS.log_level.default,
  secret_rotation_days: CONFIGURATION_KEYS.secret_rotation_days.default,
};

/**
 * The charger reports its whole configuration as a device event of this kind, on every start and after every
 * change, with `data` holding every key's value. The platform keeps the latest (by the event's timestamp).
 */
export const CONFIGURATION_EVENT_KIND = 'configuration_reported';
