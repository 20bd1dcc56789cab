import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { opensKeyCheck, type PlatformKeys, sealKeyCheck } from './platform-keys.js';
import { createPostgresStore, describeDatabase, isPostgresUrl } from './postgres/store.js';
import type { RetentionPolicy } from './retention-policy.js';
import { createSqliteStore, DATABASE_FILE } from './sqlite/store.js';
import { storageFaultOf } from './storage-faults.js';
import type { Store } from './store.js';

/**
 * Which backend holds the platform's data (DESIGN.md §12): `sqlite` (the default, `DIR/platform.sqlite`) or a
 * PostgreSQL URL. The data directory keeps the TLS files and the platform key in both cases.
 */
export type DatabaseChoice = { kind: 'sqlite' } | { kind: 'postgres'; url: string };

export const DATABASE_ENV = 'CHARGER_PLATFORM_DATABASE';

/** `--database`'s value; undefined when it is neither `sqlite` nor a `postgres://` URL. */
export function parseDatabaseChoice(value: string): DatabaseChoice | undefined {
  if (value === 'sqlite') return { kind: 'sqlite' };
  if (isPostgresUrl(value)) return { kind: 'postgres', url: value };
  return undefined;
}

/** Names the database in messages and logs, without a password. */
export function describeChoice(choice: DatabaseChoice, dataDir: string): string {
  return choice.kind === 'sqlite' ? join(dataDir, DATABASE_FILE) : describeDatabase(choice.url);
}

/** Whether `dataDir` (with `choice`) holds a deployment: its database file, or for PostgreSQL its key. */
export function hasDeployment(choice: DatabaseChoice, dataDir: string, keyFile?: string): boolean {
  return choice.kind === 'sqlite'
    ? existsSync(join(dataDir, DATABASE_FILE))
    : existsSync(keyFile ?? join(dataDir, 'keys', 'platform.key'));
}

export interface OpenStoreOptions {
  now?: () => number;
  /** As `serve` runs it: background upkeep (and on SQLite, checkpoints and reads in worker threads). */
  server?: boolean;
  retention?: RetentionPolicy;
  onCheckpointerFailure?: (message: string) => void;
  onReaderFailure?: (message: string) => void;
}

/** The platform key a database was set up with must be the one in the data directory. */
export class PlatformKeyMismatch extends Error {}
const KEY_CHECK_SETTING = 'platform_key_check';

export async function openStore(
  choice: DatabaseChoice,
  dataDir: string,
  keys: PlatformKeys,
  opts: OpenStoreOptions = {},
): Promise<Store> {
  const now = opts.now ?? Date.now;
  const retention = opts.retention ? { retention: opts.retention } : {};
  if (choice.kind === 'sqlite') {
    const store = await createSqliteStore(dataDir, now, {
      backgroundCheckpoints: opts.server ?? false,
      ...retention,
      ...(opts.onCheckpointerFailure ? { onCheckpointerFailure: opts.onCheckpointerFailure } : {}),
      ...(opts.onReaderFailure ? { onReaderFailure: opts.onReaderFailure } : {}),
    });
    return checkedWith(store, keys, { tolerateFaults: true });
  }
  const store = await createPostgresStore(choice.url, now, {
    backgroundMaintenance: opts.server ?? false,
    ...retention,
  });
  return checkedWith(store, keys);
}

async function checkedWith(
  store: Store,
  keys: PlatformKeys,
  { tolerateFaults = false }: { tolerateFaults?: boolean } = {},
): Promise<Store> {
  try {
    await checkPlatformKey(store, keys);
  } catch (err) {
    // A SQLite deployment starts on a full disk (it serves reads): its check is recorded on a later start.
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
