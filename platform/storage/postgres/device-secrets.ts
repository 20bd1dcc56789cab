import { type StoredRotation, storedRotationAnswer } from '../device-secret-rows.js';
import type { DeviceSecretRepository, StoredRotationOutcome } from '../store.js';
import { notifyDirectoryChange, type PgDatabase } from './database.js';

/**
 * Two-phase rotation of device secrets on PostgreSQL, as `sqlite/device-secrets.ts`. A rotation locks the
 * device's row (`FOR UPDATE`), so that two instances answering the same charger at once agree on one pending
 * secret; a promotion is one conditional `UPDATE`. Each change is announced to the other instances' principal
 * directories (`NOTIFY`), which need the pending secret's age to revoke the old generation on time.
 */
export function createPgDeviceSecrets(deps: { db: PgDatabase }): DeviceSecretRepository {
  const { db } = deps;
  return {
    rotateSecret(deviceId, nowMs, graceMs, freshSealed) {
      return db.tx(async (sql): Promise<StoredRotationOutcome | undefined> => {
        const row = (
          await sql.query<StoredRotation>(
            `SELECT pending_secret_sealed, pending_since_ms FROM devices
             WHERE device_id = $1 AND registered FOR UPDATE`,
            [deviceId],
          )
        )[0];
        if (!row) return undefined;
        const stored = storedRotationAnswer(row, nowMs, graceMs);
        if (stored !== 'create') return stored;
        await sql.query(
          'UPDATE devices SET pending_secret_sealed = $1, pending_since_ms = $2 WHERE device_id = $3',
          [freshSealed, nowMs, deviceId],
        );
        await notifyDirectoryChange(sql);
        return { kind: 'pending', secret_sealed: freshSealed, pending_since_ms: nowMs, created: true };
      });
    },
    promotePendingSecret(deviceId, pendingSealed) {
      return db.tx(async (sql) => {
        const promoted = await sql.query<{ secret_gen: number }>(
          `UPDATE devices SET secret_sealed = pending_secret_sealed, secret_gen = secret_gen + 1,
             pending_secret_sealed = NULL, pending_since_ms = NULL
           WHERE device_id = $1 AND registered AND pending_secret_sealed = $2 RETURNING secret_gen`,
          [deviceId, pendingSealed],
        );
        if (promoted[0]) {
          await notifyDirectoryChange(sql);
          return promoted[0].secret_gen;
        }
        // Another request (or instance) promoted it first: it is the current secret now.
        const current = await sql.query<{ secret_gen: number }>(
          'SELECT secret_gen FROM devices WHERE device_id = $1 AND registered AND secret_sealed = $2',
          [deviceId, pendingSealed],
        );
        return current[0]?.secret_gen;
      });
    },
    async promoteExpiredSecrets(pendingSinceMs) {
      // One statement, no transaction: the sweep runs it every second and it almost always finds nothing. The
      // announcement may come after the commit; until it arrives the other instances' rules already treat
      // these secrets as promoted (domain/secret-rotation.ts `liveGeneration`).
      const rows = await db.query<{ device_id: string }>(
        `UPDATE devices SET secret_sealed = pending_secret_sealed, secret_gen = secret_gen + 1,
           pending_secret_sealed = NULL, pending_since_ms = NULL
         WHERE pending_since_ms <= $1 RETURNING device_id`,
        [pendingSinceMs],
      );
      if (rows.length > 0) await notifyDirectoryChange(db);
      return rows.map((r) => r.device_id);
    },
  };
}
