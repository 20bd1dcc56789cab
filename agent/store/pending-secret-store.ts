/**
 * The store's half of two-phase secret rotation (link/secret-rotation.ts): a rotation's new secret is kept beside
 * the confirmed one in the identity row until it has bought a token. Every write is one fsynced commit
 * (`synchronous=FULL`, agent-store.ts), and each names the pending secret it means, so that a step taken on a
 * stale view (a rotation stored a newer secret meanwhile) changes nothing.
 */
import type Database from 'better-sqlite3';

export interface PendingSecretStore {
  /** Commits a rotation's new secret beside the confirmed one, which stays until the new one has worked. */
  savePendingSecret(secret: string, at: string): void;
  /**
   * `secret`, the pending secret, bought a token: it becomes the only secret (rotated at `rotatedAt`). Call
   * inside the transaction that stores that token, so the two are never apart.
   */
  promotePendingSecret(secret: string, rotatedAt: string): void;
  /** The platform refused `secret`, the pending secret, and took the confirmed one: forget it. */
  discardPendingSecret(secret: string): void;
}

/** `write` prepares a statement on first use (a read-only store never gets that far). */
export function createPendingSecretStore(write: (sql: string) => Database.Statement): PendingSecretStore {
  return {
    savePendingSecret(secret, at) {
      write('UPDATE identity SET pending_secret = ?, pending_since = ? WHERE id = 1').run(secret, at);
    },
    promotePendingSecret(secret, rotatedAt) {
      write(
        `UPDATE identity SET secret = pending_secret, secret_rotated_at = ?, pending_secret = NULL,
           pending_since = NULL WHERE id = 1 AND pending_secret = ?`,
      ).run(rotatedAt, secret);
    },
    discardPendingSecret(secret) {
      write(
        'UPDATE identity SET pending_secret = NULL, pending_since = NULL WHERE id = 1 AND pending_secret = ?',
      ).run(secret);
    },
  };
}
