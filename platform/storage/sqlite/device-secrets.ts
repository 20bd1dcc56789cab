import type Database from 'better-sqlite3';
import { type StoredRotation, storedRotationAnswer } from '../device-secret-rows.js';
import type { DeviceSecretRepository, StoredRotationOutcome } from '../store.js';

/**
 * Two-phase rotation of device secrets (domain/secret-rotation.ts). Each call reads, decides and writes in one
 * immediate transaction. A promotion copies the pending secret's sealed text as it is, so that a promotion
 * that raced another one recognises its secret as the current one.
 */
export function createSqliteDeviceSecrets(deps: { db: Database.Database }): DeviceSecretRepository {
  const { db } = deps;
  const stmt = {
    rotation: db.prepare(
      'SELECT pending_secret_sealed, pending_since_ms FROM devices WHERE device_id = ? AND registered = 1',
    ),
    setPending: db.prepare(
      'UPDATE devices SET pending_secret_sealed = ?, pending_since_ms = ? WHERE device_id = ?',
    ),
    promote: db.prepare(
      `UPDATE devices SET secret_sealed = pending_secret_sealed, secret_gen = secret_gen + 1,
         pending_secret_sealed = NULL, pending_since_ms = NULL
       WHERE device_id = ? AND registered = 1 AND pending_secret_sealed = ? RETURNING secret_gen`,
    ),
    currentGeneration: db.prepare(
      'SELECT secret_gen FROM devices WHERE device_id = ? AND registered = 1 AND secret_sealed = ?',
    ),
    promoteExpired: db.prepare(
      `UPDATE devices SET secret_sealed = pending_secret_sealed, secret_gen = secret_gen + 1,
         pending_secret_sealed = NULL, pending_since_ms = NULL
       WHERE pending_since_ms <= ? RETURNING device_id`,
    ),
  };

  return {
    async rotateSecret(deviceId, nowMs, graceMs, freshSealed) {
      return db
        .transaction((): StoredRotationOutcome | undefined => {
          const row = stmt.rotation.get(deviceId) as StoredRotation | undefined;
          if (!row) return undefined;
          const stored = storedRotationAnswer(row, nowMs, graceMs);
          if (stored !== 'create') return stored;
          stmt.setPending.run(freshSealed, nowMs, deviceId);
          return { kind: 'pending', secret_sealed: freshSealed, pending_since_ms: nowMs, created: true };
        })
        .immediate();
    },
    async promotePendingSecret(deviceId, pendingSealed) {
      return db
        .transaction((): number | undefined => {
          const promoted = stmt.promote.get(deviceId, pendingSealed) as { secret_gen: number } | undefined;
          if (promoted) return promoted.secret_gen;
          const current = stmt.currentGeneration.get(deviceId, pendingSealed) as
            | { secret_gen: number }
            | undefined;
          return current?.secret_gen;
        })
        .immediate();
    },
    async promoteExpiredSecrets(pendingSinceMs) {
      return (stmt.promoteExpired.all(pendingSinceMs) as Array<{ device_id: string }>).map(
        (r) => r.device_id,
      );
    },
  };
}
