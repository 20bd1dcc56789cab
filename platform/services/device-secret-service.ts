import { newSecret } from '../domain/ids.js';
import { pendingSecretState, SECRET_ROTATION_GRACE_MS, secretMatch } from '../domain/secret-rotation.js';
import type { PlatformKeys } from '../storage/platform-keys.js';
import type { DeviceSecretRepository, Store } from '../storage/store.js';
import { secretsEqual } from './access-tokens.js';
import type { PrincipalDirectory } from './principal-directory.js';

/** Compared against when a device has no such secret, so that a refusal takes as long as an answer. */
const DUMMY_SECRET = 'x'.repeat(43);

/** What a rotation request is answered with. */
export type SecretRotationOutcome =
  /** The pending secret: new (`created`), or the one already pending, answered again. */
  | { kind: 'pending'; secret: string; pending_since_ms: number; created: boolean }
  /** A pending secret outlived its grace: the generation the request's token belongs to has ended. */
  | { kind: 'expired' };

/**
 * One rotation request (DESIGN.md §17): a fresh secret is sealed here and stored as the pending one, unless one
 * is pending already, which is opened and answered again. Storage decides in one transaction.
 */
export async function rotateDeviceSecret(
  deps: { store: DeviceSecretRepository; keys: Pick<PlatformKeys, 'sealSecret' | 'openSecret'> },
  deviceId: string,
  nowMs: number,
  graceMs: number,
): Promise<SecretRotationOutcome | undefined> {
  const fresh = newSecret();
  const stored = await deps.store.rotateSecret(deviceId, nowMs, graceMs, deps.keys.sealSecret(fresh));
  if (stored?.kind !== 'pending') return stored;
  const { secret_sealed, ...rest } = stored;
  return { ...rest, secret: stored.created ? fresh : deps.keys.openSecret(secret_sealed) };
}

export interface DeviceSecretServiceDeps {
  store: Store;
  keys: PlatformKeys;
  directory: PrincipalDirectory;
  now: () => number;
  graceMs?: number;
}

/**
 * Device secrets (DESIGN.md §17): the token exchange and two-phase rotation. Storage decides and changes in one
 * transaction; this keeps this instance's principal directory in step with what it changed (other instances
 * hear of it through the store's change announcements) and hides which secret a refusal compared against.
 */
export function createDeviceSecretService(deps: DeviceSecretServiceDeps) {
  const { store, keys, directory, now } = deps;
  const graceMs = deps.graceMs ?? SECRET_ROTATION_GRACE_MS;
  const open = (sealed: string | null | undefined) => (sealed ? keys.openSecret(sealed) : DUMMY_SECRET);

  return {
    /**
     * The generation to issue a device token for, when `presented` is the device's secret (during a rotation's
     * grace: its current or its pending one; after it: the pending one only); undefined when refused. Using the
     * pending secret promotes it: the old secret and every token issued with it stop working.
     */
    async exchange(deviceId: string, presented: string): Promise<number | undefined> {
      const row = await store.getDevice(deviceId);
      const device = row?.registered ? row : undefined;
      // Both compared every time: the time taken says nothing about which secret, if any, matched.
      const current = secretsEqual(presented, open(device?.secret_sealed));
      const pending = secretsEqual(presented, open(device?.pending_secret_sealed));
      if (!device) return undefined;
      const state = pendingSecretState(device.pending_since_ms, now(), graceMs);
      const match = secretMatch(state, {
        current: current && device.secret_sealed !== null,
        pending: pending && device.pending_secret_sealed !== null,
      });
      if (match === 'current') return device.secret_gen;
      if (match === 'none' || device.pending_secret_sealed === null) return undefined;
      const generation = await store.promotePendingSecret(deviceId, device.pending_secret_sealed);
      if (generation !== undefined) await directory.refreshDevice(deviceId);
      return generation;
    },

    /**
     * `POST /v1/device/secret/rotate`: the device's pending secret, created now or the one already pending (a
     * charger that lost the answer asks again and gets the same); undefined when the device's credentials
     * were revoked meanwhile (reset, or the grace of a pending secret ended under the request).
     */
    async rotate(deviceId: string): Promise<string | undefined> {
      const outcome = await rotateDeviceSecret({ store, keys }, deviceId, now(), graceMs);
      if (outcome?.kind !== 'pending') return undefined;
      // The directory needs the pending secret's age to revoke the old generation when the grace ends.
      if (outcome.created) await directory.refreshDevice(deviceId);
      return outcome.secret;
    },

    /**
     * The sweep: pending secrets whose grace is over replace their devices' secrets, so that storage holds one
     * secret per device again. Authentication does not wait for it (`liveGeneration`).
     */
    async promoteExpired(nowMs: number): Promise<void> {
      for (const deviceId of await store.promoteExpiredSecrets(nowMs - graceMs)) {
        await directory.refreshDevice(deviceId);
      }
    },
  };
}
export type DeviceSecretService = ReturnType<typeof createDeviceSecretService>;
