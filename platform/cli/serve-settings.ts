/**
 * What the CLI needs of `serve` before it runs: its option defaults and its configuration error. Apart from
 * serve.ts so that the admin commands, which never serve, do not load the server (Fastify, Redis, the routes):
 * that halved their start-up.
 */

export class ConfigError extends Error {}

/** `--redis` from the environment: keeps a password out of the process list. */
export const REDIS_ENV = 'CHARGER_PLATFORM_REDIS';

/** The metrics listener's defaults (DESIGN.md §11); 9464 is the OpenTelemetry Prometheus exporter's port. */
export const DEFAULT_METRICS_HOST = '127.0.0.1';
export const DEFAULT_METRICS_PORT = 9464;
