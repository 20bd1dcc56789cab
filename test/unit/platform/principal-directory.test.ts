import { describe, expect, it, vi } from 'vitest';
import {
  createPrincipalDirectory,
  type DeviceEntry,
} from '../../../platform/services/principal-directory.js';
import type { Store } from '../../../platform/storage/store.js';

const entry = (device_id: string, secret_gen = 1): DeviceEntry => ({
  device_id,
  secret_gen,
  secret_sealed: 'sealed',
  pending_since_ms: null,
  require_signature: false,
  site_id: null,
  operator_id: null,
});

/** A store whose directory reads are answered when the test says so. */
function fakeStore() {
  const rows = new Map<string, DeviceEntry>([['dev_a', entry('dev_a')]]);
  let version = 0;
  let release: (() => void) | undefined;
  let holdNextLoad = false;
  const store = {
    async loadDirectory() {
      const snapshot = [...rows.values()];
      if (holdNextLoad) {
        holdNextLoad = false;
        await new Promise<void>((r) => {
          release = r;
        });
      }
      return { devices: snapshot, clients: [] };
    },
    async loadDeviceEntry(id: string) {
      return rows.get(id);
    },
    async loadClientEntry() {
      return undefined;
    },
    externalChangeVersion: () => version,
  } as unknown as Store;
  return {
    store,
    rows,
    announceChange() {
      version++;
      holdNextLoad = true;
    },
    releaseLoad: () => release?.(),
  };
}

describe('principal directory', () => {
  it('keeps a device refreshed while a reload whose snapshot predates it was running', async () => {
    vi.useFakeTimers();
    try {
      const f = fakeStore();
      const dir = await createPrincipalDirectory(f.store, 1_000);
      // Another change is announced; the reload reads its snapshot (without dev_b) and stalls.
      f.announceChange();
      await vi.advanceTimersByTimeAsync(1_000);
      // dev_b registers here meanwhile and is refreshed at once.
      f.rows.set('dev_b', entry('dev_b'));
      await dir.refreshDevice('dev_b');
      expect(dir.device('dev_b')).toBeDefined();
      // The stale snapshot lands: dev_b must survive it.
      f.releaseLoad();
      await vi.advanceTimersByTimeAsync(0);
      expect(dir.device('dev_a')).toBeDefined();
      expect(dir.device('dev_b')).toEqual(entry('dev_b'));
      // A refresh after the reload is not replayed over later reloads: a reset device goes away.
      f.rows.delete('dev_b');
      f.announceChange();
      await vi.advanceTimersByTimeAsync(1_000);
      f.releaseLoad();
      await vi.advanceTimersByTimeAsync(0);
      expect(dir.device('dev_b')).toBeUndefined();
      dir.close();
    } finally {
      vi.useRealTimers();
    }
  });
});
