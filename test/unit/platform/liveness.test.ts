import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createLiveness, PERSIST_CHUNK, PERSIST_STALENESS_MS } from '../../../platform/liveness.js';
import type { Store } from '../../../platform/storage/store.js';

/** The liveness's only use of the store: last-seen writes, recorded write by write. */
function recordingStore() {
  const writes: Array<Map<string, number>> = [];
  const store = {
    touchDevices: async (seen: Map<string, number>) => {
      writes.push(new Map(seen));
    },
  } as unknown as Store;
  return { store, writes };
}

describe('liveness persistence', () => {
  let t = 1_000_000;
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('writes a fleet in chunks, and a device again only once its time moved on by the staleness bound', async () => {
    const { store, writes } = recordingStore();
    const liveness = createLiveness(store, () => t, undefined, 5_000);
    const fleet = Array.from({ length: 2 * PERSIST_CHUNK + 10 }, (_, i) => `dev_${i}`);
    for (const id of fleet) liveness.markSeen(id);
    await vi.advanceTimersByTimeAsync(5_000);
    expect(writes.map((w) => w.size)).toEqual([PERSIST_CHUNK, PERSIST_CHUNK, 10]);
    expect(new Set(writes.flatMap((w) => [...w.keys()]))).toEqual(new Set(fleet));

    // Seen again soon after: not written again until its time is PERSIST_STALENESS_MS ahead of the database.
    writes.length = 0;
    t += PERSIST_STALENESS_MS - 1;
    liveness.markSeen('dev_1');
    await vi.advanceTimersByTimeAsync(5_000);
    expect(writes).toEqual([]);
    t += 1;
    liveness.markSeen('dev_1');
    await vi.advanceTimersByTimeAsync(5_000);
    expect(writes).toEqual([new Map([['dev_1', t]])]);

    // A flush writes every pending time exactly, however recent.
    writes.length = 0;
    t += 10;
    liveness.markSeen('dev_2');
    await liveness.flush();
    expect(writes).toEqual([new Map([['dev_2', t]])]);
    await liveness.flush();
    expect(writes).toHaveLength(1);
    await liveness.close();
  });

  it('close writes what is pending', async () => {
    const { store, writes } = recordingStore();
    const liveness = createLiveness(store, () => t, undefined, 5_000);
    liveness.markSeen('dev_a');
    await liveness.close();
    expect(writes).toEqual([new Map([['dev_a', t]])]);
  });
});
