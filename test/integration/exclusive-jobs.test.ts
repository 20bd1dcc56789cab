import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Store } from '../../platform/storage/store.js';
import { BACKENDS, openTestStore, type TestStore } from '../helpers/backends.js';

import { heldJob, neverRun } from '../helpers/held-jobs.js';

/**
 * Jobs that run on one instance at a time (DESIGN.md §13, `Maintenance.runAlone`): never twice at once on one
 * store, and on PostgreSQL never on two instances sharing the database at once, the job passing to another
 * instance when the one running it closes or dies. No clocks: each `run` waits on a promise the test settles.
 */

describe.each(BACKENDS)('runAlone on one %s store', (backend) => {
  let ts: TestStore;
  let store: Store;
  let closed: boolean;
  beforeEach(async () => {
    ts = await openTestStore(backend);
    store = ts.store;
    closed = false;
  });
  afterEach(async () => {
    if (!closed) await ts.close();
  });

  it('runs the job and answers its value', async () => {
    expect(await store.runAlone('sweep', async () => 42)).toEqual({ ran: true, value: 42 });
    expect(await store.runAlone('sweep', async () => 'again')).toEqual({ ran: true, value: 'again' });
  });

  it('answers a call made while the job runs with ran: false, without running it', async () => {
    const first = heldJob('first');
    const running = store.runAlone('sweep', first.run);
    await first.started;
    const second = neverRun();
    // Answered while the first is still held: it did not wait for it.
    expect(await store.runAlone('sweep', second.run)).toEqual({ ran: false });
    expect(second.calls()).toBe(0);
    first.finish();
    expect(await running).toEqual({ ran: true, value: 'first' });
    expect(first.calls()).toBe(1);
    expect(await store.runAlone('sweep', async () => 'third')).toEqual({ ran: true, value: 'third' });
  });

  it('answers ran: false to a call the job itself makes', async () => {
    const inner = neverRun();
    const outcome = await store.runAlone('sweep', () => store.runAlone('sweep', inner.run));
    expect(outcome).toEqual({ ran: true, value: { ran: false } });
    expect(inner.calls()).toBe(0);
  });

  it('rejects with the error of a job that throws, and runs the next one', async () => {
    const boom = new Error('sweep failed');
    await expect(
      store.runAlone('sweep', async () => {
        throw boom;
      }),
    ).rejects.toBe(boom);
    // A `run` that throws before it returns a promise is no different.
    await expect(
      store.runAlone('sweep', () => {
        throw boom;
      }),
    ).rejects.toBe(boom);
    expect(await store.runAlone('sweep', async () => 'next')).toEqual({ ran: true, value: 'next' });
  });

  it('closes after the job in progress finishes', async () => {
    const job = heldJob('last');
    // The job still uses the store once let go, as the sweep does.
    const running = store.runAlone('sweep', async () => {
      const value = await job.run();
      await store.countCommandsByStatus();
      return value;
    });
    await job.started;
    let storeClosed = false;
    const closing = ts.close().then(() => {
      storeClosed = true;
    });
    closed = true;
    // Still held: the store waits for the job before it closes its database.
    expect(await store.runAlone('sweep', neverRun().run)).toEqual({ ran: false });
    // Time for `close` to go on if it did not wait (a pause, not a measurement).
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(storeClosed).toBe(false);
    job.finish();
    expect(await running).toEqual({ ran: true, value: 'last' });
    await closing;
    expect(storeClosed).toBe(true);
  });
});
