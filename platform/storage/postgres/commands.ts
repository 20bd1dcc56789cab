import type { CommandRepository } from '../store.js';
import type { PgDatabase } from './database.js';

/** Commands, schedules and flexibility controls on PostgreSQL: each change one atomic compare-and-set. */
export function createPgCommands(_db: PgDatabase): CommandRepository {
  return new Proxy({} as CommandRepository, {
    get: () => () => Promise.reject(new Error('not implemented')),
  });
}
