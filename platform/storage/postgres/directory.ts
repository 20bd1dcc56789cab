import type { PlatformKeys } from '../../platform-keys.js';
import type { OperatorDirectory } from '../store.js';
import type { PgDatabase } from './database.js';

/** Operators, sites and clients, the principal directory's rows, and settings, on PostgreSQL. */
export function createPgDirectory(
  _db: PgDatabase,
  _keys: PlatformKeys,
  _now: () => number,
): Omit<OperatorDirectory, 'externalChangeVersion'> {
  return new Proxy({} as Omit<OperatorDirectory, 'externalChangeVersion'>, {
    get: () => () => Promise.reject(new Error('not implemented')),
  });
}
