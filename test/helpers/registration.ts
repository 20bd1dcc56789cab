import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type RegistrationTerms, registerCharger } from '../../platform/services/registration-service.js';
import { loadOrCreatePlatformKeys, type PlatformKeys } from '../../platform/storage/platform-keys.js';
import type { DeviceRepository, RegisterInput } from '../../platform/storage/store.js';

let spare: PlatformKeys | undefined;
/** A platform key of its own, for registrations whose secret a test never opens. */
function spareKeys(): PlatformKeys {
  if (!spare) {
    const dir = mkdtempSync(join(tmpdir(), 'cp-keys-'));
    spare = loadOrCreatePlatformKeys(dir);
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  }
  return spare;
}

/**
 * Registers a charger on a store directly, as the registration service does (storage only stores the sealed
 * secret): for tests of storage and what lies on it.
 */
export function registerOnStore(
  store: DeviceRepository,
  input: RegisterInput,
  terms: RegistrationTerms,
  keys: Pick<PlatformKeys, 'sealSecret'> = spareKeys(),
) {
  return registerCharger({ store, keys }, input, terms);
}
