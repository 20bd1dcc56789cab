import { backendOf, type DatabaseChoice, type OpenStoreOptions } from './backends.js';
import { opensKeyCheck, type PlatformKeys, sealKeyCheck } from './platform-keys.js';
import { storageFaultOf } from './storage-faults.js';
import type { Store } from './store.js';

/** The platform key a database was set up with must be the one in the data directory. */
export class PlatformKeyMismatch extends Error {}
const KEY_CHECK_SETTING = 'platform_key_check';

/** The store `choice` names, checked against the platform key (`checkPlatformKey`). */
export async function openStore(
  choice: DatabaseChoice,
  dataDir: string,
  keys: PlatformKeys,
  opts: OpenStoreOptions = {},
): Promise<Store> {
  const backend = backendOf(choice);
  const store = await backend.open(choice, dataDir, opts);
  return checkedWith(store, keys, { tolerateFaults: backend.inDataDir });
}

async function checkedWith(
  store: Store,
  keys: PlatformKeys,
  { tolerateFaults = false }: { tolerateFaults?: boolean } = {},
): Promise<Store> {
  try {
    await checkPlatformKey(store, keys);
  } catch (err) {
    // A deployment in the data directory (SQLite) starts on a full disk (it serves reads): its check is
    // recorded on a later start.
    if (tolerateFaults && storageFaultOf(err)) return store;
    await store.close();
    throw err;
  }
  return store;
}

/**
 * Instances sharing a PostgreSQL database must share the platform key (it seals the stored secrets and signs
 * tokens): a database remembers a value sealed with its key, and refuses another. On SQLite the same catches a
 * wrong `--key-file` (DESIGN.md §18).
 */
async function checkPlatformKey(store: Store, keys: PlatformKeys): Promise<void> {
  const sealed = await store.getSetting(KEY_CHECK_SETTING);
  if (sealed === undefined) {
    await store.setSetting(KEY_CHECK_SETTING, sealKeyCheck(keys));
    return;
  }
  if (!opensKeyCheck(keys, sealed)) {
    throw new PlatformKeyMismatch(
      `the database was set up with another platform key than ${keys.path}: ` +
        'copy the key of the instance that set it up there (or give that key with --key-file)',
    );
  }
}
