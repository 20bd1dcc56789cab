/**
 * Passes that run one after another, where a caller needs a pass that starts after its call: one that has
 * started may have read before the caller's rows were committed. Callers join the pass that has not started
 * yet, which runs after the current one (energy rollups on both backends).
 */
export function createPassQueue<T>(
  /** `wait`: some caller of this pass asked it to wait for other instances rather than leave work to them. */
  pass: (wait: boolean) => Promise<T>,
) {
  let current: Promise<unknown> = Promise.resolve();
  let next: Promise<T> | undefined;
  let nextWaits = false;
  return {
    schedule(wait = false): Promise<T> {
      if (wait) nextWaits = true;
      if (!next) {
        next = current
          .catch(() => undefined)
          .then(() => {
            next = undefined;
            const waits = nextWaits;
            nextWaits = false;
            return pass(waits);
          });
        current = next;
      }
      return next;
    },
    /** Settles when no pass is running or waiting to. */
    async idle(): Promise<void> {
      await current.catch(() => undefined);
    },
  };
}
