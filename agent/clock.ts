/**
 * Time as the agent sees it, injectable so that tests drive schedules, expiry and backoff with fake time.
 *
 * The system clock resolves `Date.now`, `setTimeout` and `clearTimeout` at call time (not at import), so
 * vitest's fake timers take effect even for modules loaded before `vi.useFakeTimers()`.
 */

export type TimerHandle = unknown;

export interface Clock {
  /** Wall clock, ms since the epoch. */
  now(): number;
  setTimeout(callback: () => void, ms: number): TimerHandle;
  clearTimeout(handle: TimerHandle): void;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout: (callback, ms) => setTimeout(callback, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/** Node timers cannot wait longer than this (about 24.8 days); longer waits fire early, so cap them. */
export const MAX_TIMER_MS = 2_147_483_647;

/**
 * Resolves after `ms`, or early (never rejecting) once `signal` aborts: loops check the signal after every
 * wait, so a shutdown never has to wait out a backoff.
 */
export function sleep(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clock.clearTimeout(handle);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const handle = clock.setTimeout(done, Math.min(Math.max(0, ms), MAX_TIMER_MS));
    signal?.addEventListener('abort', done, { once: true });
  });
}

/**
 * A wake-up call: `wait` resolves on the next `notify`, after `ms`, or when `signal` aborts — whichever comes
 * first. A `notify` with nobody waiting is remembered, so a wake-up between two waits is not lost.
 */
export interface Wakeup {
  notify(): void;
  wait(ms: number, signal?: AbortSignal): Promise<void>;
}

export function createWakeup(clock: Clock): Wakeup {
  let pending = false;
  let waiter: (() => void) | undefined;
  return {
    notify() {
      if (waiter) waiter();
      else pending = true;
    },
    wait(ms, signal) {
      if (pending || signal?.aborted) {
        pending = false;
        return Promise.resolve();
      }
      return new Promise((resolve) => {
        const done = () => {
          clock.clearTimeout(handle);
          signal?.removeEventListener('abort', done);
          waiter = undefined;
          resolve();
        };
        waiter = done;
        const handle = clock.setTimeout(done, Math.min(Math.max(0, ms), MAX_TIMER_MS));
        signal?.addEventListener('abort', done, { once: true });
      });
    },
  };
}

export const iso = (ms: number): string => new Date(ms).toISOString();
