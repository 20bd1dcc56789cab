import type Database from 'better-sqlite3';
import { FOUNDATION_MIGRATIONS } from './migrations-foundation.js';
import { MAINTENANCE_MIGRATIONS } from './migrations-maintenance.js';
import { UPDATE_MIGRATIONS } from './migrations-over-the-air.js';
import { TELEMETRY_HISTORY_MIGRATIONS } from './migrations-telemetry-history.js';

/**
 * Versioned schema migrations, applied in order at start inside one transaction each. Times are epoch
 * milliseconds (INTEGER) so that ordering and range filters are exact. Kept in files by era, each under the
 * size a reader takes in at once.
 */
export const MIGRATIONS: readonly string[] = [
  ...FOUNDATION_MIGRATIONS,
  ...UPDATE_MIGRATIONS,
  ...MAINTENANCE_MIGRATIONS,
  ...TELEMETRY_HISTORY_MIGRATIONS,
];

export function migrate(db: Database.Database): number {
  const current = db.pragma('user_version', { simple: true }) as number;
  if (current > MIGRATIONS.length) {
    throw new Error(
      `database schema version ${current} is newer than this build knows (${MIGRATIONS.length}); upgrade the platform`,
    );
  }
  for (let v = current; v < MIGRATIONS.length; v++) {
    db.transaction(() => {
      db.exec(MIGRATIONS[v]!);
      db.pragma(`user_version = ${v + 1}`);
    }).immediate();
  }
  return MIGRATIONS.length;
}
