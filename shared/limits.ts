/**
 * Every limit and cadence of the spec (v1.3.0), plus the bounds DESIGN.md and docs/decisions.md add where the
 * spec says "not shown". One place, so the platform, the agent and the tests cannot disagree.
 */
export const API_VERSION = '1.3.0';
export const API_PREFIX = '/v1';

/** Access token lifetime on both sides, seconds. */
export const ACCESS_TOKEN_TTL_SECONDS = 86_400;
/** Device secret lifetime reported by registration, seconds (spec: expires_in 86400). */
export const DEVICE_SECRET_EXPIRES_IN_SECONDS = 86_400;

export const TELEMETRY_INTERVAL_ACTIVE_SECONDS = 5;
export const TELEMETRY_INTERVAL_IDLE_SECONDS = 60;
export const HEARTBEAT_INTERVAL_SECONDS = 30;
/** A device is online while it made an authenticated request in the last three heartbeat periods. */
export const ONLINE_WINDOW_SECONDS = 3 * HEARTBEAT_INTERVAL_SECONDS;
/** The agent warns when its clock is off by more than this. */
export const CLOCK_SKEW_WARN_SECONDS = 5;

export const PAGE_MIN = 1;
export const PAGE_DEFAULT = 1;
export const PAGE_SIZE_MIN = 1;
export const PAGE_SIZE_DEFAULT = 20;
export const PAGE_SIZE_MAX = 100;
/** Upper bound on `page` so an offset can never overflow. */
export const PAGE_MAX = 1_000_000;

export const SOC_MIN = 0;
export const SOC_MAX = 100;
export const POWER_LIMIT_PERCENT_MIN = 0;
export const POWER_LIMIT_PERCENT_MAX = 100;

/** Rate limits of the spec's Limits table. */
export const RATE_LIMITS = {
  operatorQuery: { limit: 60, windowSeconds: 60 },
  operatorBatchControl: { limit: 30, windowSeconds: 60 },
  /** DESIGN.md §8: single-connector commands share one budget. */
  operatorControl: { limit: 60, windowSeconds: 60 },
  operatorToken: { limit: 10, windowSeconds: 60 },
  deviceRealtime: { limit: 10, windowSeconds: 1 },
  deviceReporting: { limit: 60, windowSeconds: 60 },
} as const;
/** Concurrent stream connections per client_id per device subscription set. */
export const STREAM_CONNECTIONS_PER_SUBSCRIPTION = 1;
export const STREAM_PING_INTERVAL_SECONDS = 30;
export const STREAM_MAX_BUFFERED_BYTES = 1024 * 1024;
export const STREAM_CLOSE_DUPLICATE = 4429;
export const STREAM_CLOSE_SLOW_CONSUMER = 4008;

/** Long poll for commands: at most this many seconds. */
export const COMMAND_POLL_MAX_WAIT_SECONDS = 30;

/** Request signing (DESIGN.md §8). */
export const SIGNATURE_WINDOW_SECONDS = 300;

// Bounds the spec leaves "not shown" (docs/decisions.md).
export const MAX_BODY_BYTES = 64 * 1024;
export const MAX_BATCH_BODY_BYTES = 1024 * 1024;
export const TELEMETRY_BATCH_MAX = 500;
export const EVENTS_BATCH_MAX = 100;
export const CHARGING_RECORDS_BATCH_MAX = 100;
export const FLEXIBILITY_TARGET_IDS_MAX = 100;
export const SCHEDULE_TIME_SLOTS_MAX = 48;
export const CONNECTORS_PER_DEVICE_MAX = 16;
/** Longest flexibility control or discharge, seconds (7 days). */
export const CONTROL_DURATION_MAX_SECONDS = 7 * 86_400;
export const ID_MAX_LENGTH = 64;
export const TEXT_MAX_LENGTH = 128;
export const REASON_MAX_LENGTH = 200;

/** How long a queued command waits for its charger before it expires, by kind (seconds). */
export const COMMAND_EXPIRY_SECONDS = {
  stop: 15 * 60,
  start: 15 * 60,
  discharge: 15 * 60,
  set_schedule: 7 * 86_400,
  delete_schedule: 7 * 86_400,
  reset: 15 * 60,
  set_availability: 7 * 86_400,
  unlock_connector: 15 * 60,
  set_configuration: 7 * 86_400,
  upload_diagnostics: 86_400,
} as const;
/** Largest `result` object a command status report may carry (DESIGN.md §20), bytes of JSON. */
export const COMMAND_RESULT_MAX_BYTES = 64 * 1024;
/** How deep a command's `result` may nest (objects and arrays): far beyond any report, within every parser. */
export const COMMAND_RESULT_MAX_DEPTH = 32;
