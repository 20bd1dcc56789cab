/**
 * The pure rules of two-phase secret rotation (DESIGN.md §17; link/secret-rotation.ts runs them): which stored
 * secret to offer the platform first, and when a rotation step is due.
 */
/** The secrets the store holds (store/identity-store.ts `Identity`). */
interface StoredSecrets {
  secret: string;
  /** A rotation's new secret, committed but not yet confirmed by a token. */
  pendingSecret?: string;
}

/** When the current secret dates from. */
interface SecretAge {
  registeredAt: string;
  secretRotatedAt?: string;
  pendingSecret?: string;
}

/** Rotation is on unless the configuration says 0. */
export const DEFAULT_SECRET_ROTATION_DAYS = 90;
const DAY_MS = 86_400_000;

/** The secrets to offer the token endpoint, in order: a pending (committed, not yet confirmed) one first. */
export function secretsToTry(identity: StoredSecrets): string[] {
  return identity.pendingSecret !== undefined && identity.pendingSecret !== identity.secret
    ? [identity.pendingSecret, identity.secret]
    : [identity.secret];
}

/**
 * What the rotation check does now: put a stored pending secret to use (whatever the configuration: it is
 * half a rotation the platform has started), ask for a new secret when the current one is `days` old
 * (agent clock; since registration when never rotated), or nothing.
 */
export type RotationStep = 'none' | 'use_pending' | 'ask';

export function rotationStep(identity: SecretAge | undefined, days: number, nowMs: number): RotationStep {
  if (!identity) return 'none';
  if (identity.pendingSecret !== undefined) return 'use_pending';
  if (days <= 0) return 'none';
  const since = Date.parse(identity.secretRotatedAt ?? identity.registeredAt);
  // An unreadable time (a store edited by hand) rotates rather than never.
  if (Number.isNaN(since)) return 'ask';
  return nowMs - since >= days * DAY_MS ? 'ask' : 'none';
}
