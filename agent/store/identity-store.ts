/**
 * The charger's platform identity (device id, secret, the platform it registered with) and its current
 * access token: one row each. A token belongs to the credentials it was issued for, so a new identity drops it.
 */
import type Database from 'better-sqlite3';

type Db = Database.Database;

export interface Identity {
  deviceId: string;
  secret: string;
  sn: string;
  platformUrl: string;
  registeredAt: string;
  secretRotatedAt?: string;
  /** A rotation's new secret, stored before it is used; `secret` stays until this one has worked. */
  pendingSecret?: string;
  pendingSince?: string;
}

export interface StoredToken {
  accessToken: string;
  /** ISO time, agent clock. */
  expiresAt: string;
  obtainedAt: string;
}

export interface IdentityStore {
  getIdentity(): Identity | undefined;
  /** A new identity (registration): drops the token and any pending secret. */
  saveIdentity(identity: Identity): void;
  updatePlatformUrl(url: string): void;

  getToken(): StoredToken | undefined;
  saveToken(token: StoredToken): void;
  clearToken(): void;
}

interface IdentityRow {
  device_id: string;
  secret: string;
  sn: string;
  platform_url: string;
  registered_at: string;
  secret_rotated_at: string | null;
  // Absent in a schema-1 store opened read-only (a technician's newer CLI beside an older agent).
  pending_secret?: string | null;
  pending_since?: string | null;
}

/** `write` prepares a statement on first use (a read-only store never gets that far). */
export function createIdentityStore(db: Db, write: (sql: string) => Database.Statement): IdentityStore {
  const identityQuery = db.prepare('SELECT * FROM identity WHERE id = 1');
  const tokenQuery = db.prepare('SELECT * FROM token WHERE id = 1');
  return {
    getIdentity() {
      const row = identityQuery.get() as IdentityRow | undefined;
      return row ? toIdentity(row) : undefined;
    },
    saveIdentity(identity) {
      db.transaction(() => {
        write(
          `INSERT INTO identity (id, device_id, secret, sn, platform_url, registered_at, secret_rotated_at)
           VALUES (1, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (id) DO UPDATE SET device_id = excluded.device_id, secret = excluded.secret,
             sn = excluded.sn, platform_url = excluded.platform_url, registered_at = excluded.registered_at,
             secret_rotated_at = excluded.secret_rotated_at, pending_secret = NULL, pending_since = NULL`,
        ).run(
          identity.deviceId,
          identity.secret,
          identity.sn,
          identity.platformUrl,
          identity.registeredAt,
          identity.secretRotatedAt ?? null,
        );
        // A token belongs to the credentials it was issued for.
        write('DELETE FROM token').run();
      })();
    },
    updatePlatformUrl(url) {
      write('UPDATE identity SET platform_url = ? WHERE id = 1').run(url);
    },

    getToken() {
      const row = tokenQuery.get() as
        | { access_token: string; expires_at: string; obtained_at: string }
        | undefined;
      return row
        ? { accessToken: row.access_token, expiresAt: row.expires_at, obtainedAt: row.obtained_at }
        : undefined;
    },
    saveToken(token) {
      write(
        `INSERT INTO token (id, access_token, expires_at, obtained_at) VALUES (1, ?, ?, ?)
         ON CONFLICT (id) DO UPDATE SET access_token = excluded.access_token,
           expires_at = excluded.expires_at, obtained_at = excluded.obtained_at`,
      ).run(token.accessToken, token.expiresAt, token.obtainedAt);
    },
    clearToken() {
      write('DELETE FROM token').run();
    },
  };
}

function toIdentity(row: IdentityRow): Identity {
  const identity: Identity = {
    deviceId: row.device_id,
    secret: row.secret,
    sn: row.sn,
    platformUrl: row.platform_url,
    registeredAt: row.registered_at,
  };
  if (row.secret_rotated_at) identity.secretRotatedAt = row.secret_rotated_at;
  if (row.pending_secret) identity.pendingSecret = row.pending_secret;
  if (row.pending_since) identity.pendingSince = row.pending_since;
  return identity;
}
