/**
 * Wakes long polls (`GET /v1/device/commands?wait=`) the moment a command is queued for their device.
 * A poll subscribes before it reads the queue, so a command queued in between cannot be missed.
 * In-process; several platform instances relay the same signal over Redis (`coordination/relay.ts`).
 */
export interface CommandWaiter {
  /** Resolves `true` when woken, `false` after `timeoutMs` or when `signal` aborts. */
  wait(timeoutMs: number, signal?: AbortSignal): Promise<boolean>;
  cancel(): void;
}

export function createCommandNotifier() {
  const waiters = new Map<string, Set<() => void>>();
  /** Parked polls, released (answered empty) when the instance shuts down. */
  const parked = new Set<() => void>();
  let released = false;

  return {
    subscribe(deviceId: string): CommandWaiter {
      let woken = false;
      let wakeUp: (() => void) | undefined;
      const onNotify = () => {
        woken = true;
        wakeUp?.();
      };
      let set = waiters.get(deviceId);
      if (!set) {
        set = new Set();
        waiters.set(deviceId, set);
      }
      set.add(onNotify);
      const cancel = () => {
        const s = waiters.get(deviceId);
        s?.delete(onNotify);
        if (s && s.size === 0) waiters.delete(deviceId);
      };
      return {
        wait(timeoutMs, signal) {
          if (woken || released) {
            cancel();
            return Promise.resolve(woken);
          }
          return new Promise<boolean>((resolve) => {
            const finish = (result: boolean) => {
              clearTimeout(timer);
              signal?.removeEventListener('abort', onAbort);
              parked.delete(onRelease);
              cancel();
              resolve(result);
            };
            const onAbort = () => finish(false);
            const onRelease = () => finish(false);
            const timer = setTimeout(() => finish(false), timeoutMs);
            wakeUp = () => finish(true);
            signal?.addEventListener('abort', onAbort, { once: true });
            parked.add(onRelease);
          });
        },
        cancel,
      };
    },
    notify(deviceId: string): void {
      const set = waiters.get(deviceId);
      if (!set) return;
      for (const wake of [...set]) wake();
    },
    /**
     * Shutdown: every parked poll is answered now (with what is pending, usually nothing) instead of holding
     * the instance open for up to 30 s, and later polls no longer wait: the chargers move on to another instance.
     */
    releaseAll(): void {
      released = true;
      for (const release of [...parked]) release();
    },
    /** Chargers holding an open long poll right now. */
    connectedDevices(): number {
      return waiters.size;
    },
  };
}
export type CommandNotifier = ReturnType<typeof createCommandNotifier>;
