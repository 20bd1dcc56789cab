import type { TelemetryRepository } from '../store.js';
import type { PgDatabase } from './database.js';
import type { TelemetryPartitions } from './telemetry-partitions.js';

/** Connectors and their live state, telemetry ingest, heartbeats and last-seen times, on PostgreSQL. */
export function createPgTelemetry(_db: PgDatabase, _partitions: TelemetryPartitions): TelemetryRepository {
  return new Proxy({} as TelemetryRepository, {
    get: () => () => Promise.reject(new Error('not implemented')),
  });
}
