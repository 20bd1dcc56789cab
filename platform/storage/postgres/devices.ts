import type { PlatformKeys } from '../../platform-keys.js';
import type { DeviceRepository } from '../store.js';
import type { PgChargingRecords } from './charging-records.js';
import type { PgDatabase } from './database.js';

/** Chargers: registration, tenancy, sites and secrets, on PostgreSQL. */
export function createPgDevices(_deps: {
  db: PgDatabase;
  keys: PlatformKeys;
  now: () => number;
  records: PgChargingRecords;
}): DeviceRepository {
  return new Proxy({} as DeviceRepository, {
    get: () => () => Promise.reject(new Error('not implemented')),
  });
}
