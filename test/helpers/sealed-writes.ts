import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { versionsFromFirmwareReport } from '../../platform/domain/inventory.js';
import { createClient, rotateClientSecret } from '../../platform/services/client-secrets.js';
import { type RegistrationTerms, registerCharger } from '../../platform/services/registration-service.js';
import { loadOrCreatePlatformKeys, type PlatformKeys } from '../../platform/storage/platform-keys.js';
import type { DeviceRepository, RegisterInput, Store } from '../../platform/storage/store.js';
import type { Scope } from '../../shared/index.js';

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

/** What holds the platform key a test's secrets are sealed with: a running platform, or a store's data directory. */
type KeyHolder =
  | { store: Store; platform: { context: { keys: PlatformKeys } } }
  | { store: Store; dataDir: string };
const sealingOf = (h: KeyHolder) => ({
  store: h.store,
  keys: 'platform' in h ? h.platform.context.keys : loadOrCreatePlatformKeys(h.dataDir),
});

/** Creates an API client as the admin CLI does, its secret sealed with the holder's platform key. */
export function createClientOf(h: KeyHolder, input: { operator_ids: string[]; scopes: Scope[] }) {
  return createClient(sealingOf(h), input);
}

/** Rotates a client's secret as the admin CLI does. */
export function rotateClientSecretOf(h: KeyHolder, clientId: string, graceMs: number) {
  return rotateClientSecret(sealingOf(h), clientId, graceMs);
}

/**
 * A firmware report stored as the reporting service stores one without an update behind it: with the versions
 * domain/inventory.ts says it implies (`installed` with a version is the firmware's).
 */
export function recordReportOnStore(
  store: Pick<Store, 'recordFirmwareStatus'>,
  deviceId: string,
  report: Parameters<Store['recordFirmwareStatus']>[1],
  nowMs: number,
) {
  return store.recordFirmwareStatus(deviceId, report, nowMs, versionsFromFirmwareReport(report, undefined));
}
