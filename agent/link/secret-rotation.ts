/**
 * Two-phase secret rotation on the charger (DESIGN.md §17): which stored secret to offer the platform, when to
 * rotate, and the retry pacing. The platform keeps the old secret working beside a rotation's new one until
 * the new one is used (or 24 h pass) and answers a repeated rotation request with the same new secret, so:
 *
 * - the new secret is committed (fsynced) before it is used, beside the old one;
 * - a token exchange offers the new secret first — the platform may already have made it the only one (an
 *   exchange whose answer was lost) — then the old one;
 * - the old secret is dropped only once the new one has bought a token; the new one only when the platform
 *   refuses it but takes the old one (it never knew it: a restored database, a reset and re-registration);
 * - a rotation answer lost on the way is recovered by asking again (the platform answers the same secret).
 *
 * Whatever the moment of a power cut, the store holds a secret the platform accepts.
 */

import type { Clock } from '../clock.js';
import { nextDelayMs } from '../core/backoff.js';
import type { Identity } from '../store/agent-store.js';
import type { DeviceCredentials } from './device-credentials.js';
import { type DeviceApi, isPlatformError } from './platform-client.js';

/** Rotation is on unless the configuration says 0. */
export const DEFAULT_SECRET_ROTATION_DAYS = 90;
const DAY_MS = 86_400_000;

/** The secrets to offer the token endpoint, in order: a pending (committed, not yet confirmed) one first. */
export function secretsToTry(identity: Pick<Identity, 'secret' | 'pendingSecret'>): string[] {
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

export function rotationStep(
  identity: Pick<Identity, 'registeredAt' | 'secretRotatedAt' | 'pendingSecret'> | undefined,
  days: number,
  nowMs: number,
): RotationStep {
  if (!identity) return 'none';
  if (identity.pendingSecret !== undefined) return 'use_pending';
  if (days <= 0) return 'none';
  const since = Date.parse(identity.secretRotatedAt ?? identity.registeredAt);
  // An unreadable time (a store edited by hand) rotates rather than never.
  if (Number.isNaN(since)) return 'ask';
  return nowMs - since >= days * DAY_MS ? 'ask' : 'none';
}

export interface SecretRotationOptions {
  credentials: DeviceCredentials;
  api: DeviceApi;
  clock: Clock;
  /** `secret-rotation-days`; 0 turns asking for new secrets off (a pending one is still used). */
  days: number;
  backoff: { baseMs: number; capMs: number };
  random?: () => number;
}

/**
 * The rotation check, run after every successful heartbeat. A failed step is tried again after a backoff
 * (full jitter, the agent's base and cap) rather than at every heartbeat, so a platform that keeps refusing
 * is not asked twice a minute; a lost answer is still asked for again within minutes, well inside the grace.
 */
export function createSecretRotation(options: SecretRotationOptions) {
  const { credentials, api, clock, days } = options;
  const random = options.random ?? Math.random;
  let failures = 0;
  let notBefore = 0;
  return {
    async check(): Promise<void> {
      const now = clock.now();
      if (now < notBefore || rotationStep(credentials.identity(), days, now) === 'none') return;
      try {
        await credentials.rotateSecret(api);
        failures = 0;
        notBefore = 0;
      } catch (error) {
        const retryAfterSeconds = isPlatformError(error) ? error.retryAfterSeconds : undefined;
        notBefore =
          now +
          nextDelayMs(failures, {
            ...options.backoff,
            random,
            ...(retryAfterSeconds !== undefined ? { retryAfterSeconds } : {}),
          });
        failures += 1;
        throw error;
      }
    },
  };
}
