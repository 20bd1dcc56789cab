import type { DeviceHistoryRepository } from '../store.js';
import type { PgDatabase } from './database.js';

/** Charger events and firmware reports on PostgreSQL. */
export function createPgDeviceHistory(_db: PgDatabase): DeviceHistoryRepository {
  return new Proxy({} as DeviceHistoryRepository, {
    get: () => () => Promise.reject(new Error('not implemented')),
  });
}
