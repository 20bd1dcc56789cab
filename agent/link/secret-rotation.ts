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
import { rotationStep } from '../core/secret-rotation-policy.js';
import type { DeviceCredentials } from './device-credentials.js';
import type { DeviceApi } from './platform-client.js';
import { isPlatformError } from './platform-errors.js';

export interface SecretRotationOptions {
  credentials: DeviceCredentials;
  api: DeviceApi;
  clock: Clock;
  /**
   * `secret-rotation-days`; 0 turns asking for new secrets off (a pending one is still used). A function when the
   * remote configuration may change it.
   */
  days: number | (() => number);
  backoff: { baseMs: number; capMs: number };
  random?: () => number;
}

/**
 * The rotation check, run after every successful heartbeat. A failed step is tried again after a backoff
 * (full jitter, the agent's base and cap) rather than at every heartbeat, so a platform that keeps refusing
 * is not asked twice a minute; a lost answer is still asked for again within minutes, well inside the grace.
 */
export interface SecretRotation {
  /** Rotates when due (or finishes a rotation under way); throws what the failed step threw. */
  check(): Promise<void>;
}

export function createSecretRotation(options: SecretRotationOptions): SecretRotation {
  const { credentials, api, clock } = options;
  const { days } = options;
  const daysOf = typeof days === 'function' ? days : () => days;
  const random = options.random ?? Math.random;
  let failures = 0;
  let notBefore = 0;
  return {
    async check(): Promise<void> {
      const now = clock.now();
      if (now < notBefore || rotationStep(credentials.identity(), daysOf(), now) === 'none') return;
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
