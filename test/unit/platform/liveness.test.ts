import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { seenStateOfRow } from '../../../platform/domain/liveness-rule.js';
import { createLiveness, PERSIST_CHUNK, PERSIST_STALENESS_MS } from '../../../platform/services/liveness.js';
import { createSqliteStore } from '../../../platform/storage/backends.js';
import type { Store } from '../../../platform/storage/store.js';
import { registerOnStore } from '../../helpers/sealed-writes.js';

describe('liveness persistence', () => {
  let t = 1_000_000;
  let dir: string;
  let store: Store;
  /** The real store's last-seen writes, write by write (each still reaches the database). */
  let writes: Array<Map<string, number>>;
  beforeEach(() => {
    // Only the liveness's own tick is faked: the store commits on real timers.
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    dir = mkdtempSync(path.join(tmpdir(), 'liveness-'));
    store = createSqliteStore(dir);
    writes = [];
    const touch = store.touchDevices.bind(store);
    vi.spyOn(store, 'touchDevices').mockImplementation((seen) => {
      writes.push(new Map(seen));
      return touch(seen);
    });
  });
  afterEach(async () => {
    vi.useRealTimers();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const register = async (sn: string) => {
    const reg = await registerOnStore(
      store,
      { sn, model: 'M', manufacturer: 'A', firmware_version: '1' },
      { registration: 'open' },
    );
    if (reg.kind !== 'registered') throw new Error(reg.kind);
    return reg.device.device_id;
  };

  it('writes a fleet in chunks, and a device again only once its time moved on by the staleness bound', async () => {
    const liveness = createLiveness(store, () => t, undefined, 5_000);
    const device = await register('SN-SEEN');
    const fleet = [device, ...Array.from({ length: 2 * PERSIST_CHUNK + 9 }, (_, i) => `dev_${i}`)];
    for (const id of fleet) liveness.markSeen(id);
    await vi.advanceTimersByTimeAsync(5_000);
    await vi.waitFor(() => expect(writes.map((w) => w.size)).toEqual([PERSIST_CHUNK, PERSIST_CHUNK, 10]));
    expect(new Set(writes.flatMap((w) => [...w.keys()]))).toEqual(new Set(fleet));
    await vi.waitFor(async () => expect((await store.getDevice(device))?.last_seen_ms).toBe(t));

    // Seen again soon after: not written again until its time is PERSIST_STALENESS_MS ahead of the database.
    // (A tick that writes makes its first write at once: what a tick has not written by now, it does not write.)
    writes.length = 0;
    t += PERSIST_STALENESS_MS - 1;
    liveness.markSeen(device);
    await vi.advanceTimersByTimeAsync(5_000);
    expect(writes).toEqual([]);
    t += 1;
    liveness.markSeen(device);
    await vi.advanceTimersByTimeAsync(5_000);
    expect(writes).toEqual([new Map([[device, t]])]);
    await vi.waitFor(async () => expect((await store.getDevice(device))?.last_seen_ms).toBe(t));

    // A flush writes every pending time exactly, however recent.
    writes.length = 0;
    t += 10;
    liveness.markSeen(device);
    await liveness.flush();
    expect(writes).toEqual([new Map([[device, t]])]);
    expect((await store.getDevice(device))?.last_seen_ms).toBe(t);
    await liveness.flush();
    expect(writes).toHaveLength(1);
    await liveness.close();
  });

  it('close writes what is pending', async () => {
    const liveness = createLiveness(store, () => t, undefined, 5_000);
    const device = await register('SN-CLOSE');
    liveness.markSeen(device);
    await liveness.close();
    expect(writes).toEqual([new Map([[device, t]])]);
    expect((await store.getDevice(device))?.last_seen_ms).toBe(t);
  });
  it('an offline heartbeat stays offline in the stored row even when the clock ticks between its reads', async () => {
    // Every read of this clock is a millisecond later: the request's arrival, the heartbeat's time and the
    // moment liveness notes it all differ.
    const ticking = () => ++t;
    const liveness = createLiveness(store, ticking, undefined, 5_000);
    const device = await register('SN-BYE');
    liveness.markSeen(device); // the request authenticated
    const at = ticking(); // the heartbeat's time, as the route reads it
    liveness.markOffline(device, at);
    await store.recordHeartbeat(device, { status: 'offline', fault_code: 0, atMs: at });
    await liveness.flush();
    const row = (await store.getDevice(device))!;
    expect(row.last_seen_ms).toBe(at);
    // What a restarted platform, or the devices list's SQL, reads from the row: offline.
    expect(seenStateOfRow(row).offline).toBe(true);
    expect(liveness.isOnline(row)).toBe(false);
  });
});
