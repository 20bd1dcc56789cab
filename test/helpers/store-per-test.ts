import { afterEach, beforeEach } from 'vitest';
import type { Store } from '../../platform/storage/store.js';
import { type Backend, openTestStore, type TestStore } from './backends.js';

/**
 * A fresh store on `backend` for each test of the describe block that calls this, on a clock that starts at
 * `start` and moves only when the test says so (`tick`); closed after each test. The contract suites' set-up.
 */
export function storePerTest(backend: Backend, start: number) {
  let clock = start;
  let current: TestStore | undefined;
  beforeEach(async () => {
    clock = start;
    current = await openTestStore(backend, { now: () => clock });
  });
  afterEach(async () => {
    await current?.close();
    current = undefined;
  });
  const opened = () => {
    if (!current) throw new Error('storePerTest: the store exists only inside a test');
    return current;
  };
  return {
    get store(): Store {
      return opened().store;
    },
    get dataDir(): string {
      return opened().dataDir;
    },
    now: () => clock,
    /** Closes the test's store and opens a fresh one as `serve` does (timers; on PostgreSQL, listening). */
    async reopenAsServer() {
      await opened().close();
      current = await openTestStore(backend, { now: () => clock, server: true });
    },
    tick(ms = 1) {
      clock += ms;
    },
  };
}
