/**
 * At most `perTick` turns per turn of the event loop, shared by everyone who asks: work that could fill the loop
 * (artifact downloads pumping chunks to 64 sockets) takes its turns a few at a time, and the requests waiting
 * between them (a charger's heartbeat) are served in between, not after everything the loop had queued.
 */
export function createTickBudget(perTick: number) {
  let used = 0;
  let scheduled = false;
  const waiting: Array<() => void> = [];

  function nextTick(): void {
    if (scheduled) return;
    scheduled = true;
    // setImmediate runs after the loop's I/O: what arrived meanwhile is handled before the next turns.
    setImmediate(() => {
      scheduled = false;
      used = 0;
      while (used < perTick && waiting.length > 0) {
        used += 1;
        waiting.shift()!();
      }
      if (waiting.length > 0 || used > 0) nextTick();
    });
  }

  /** Resolves when the caller may take its turn: at once while this turn of the loop has budget left. */
  return function turn(): Promise<void> {
    nextTick();
    if (used < perTick && waiting.length === 0) {
      used += 1;
      return Promise.resolve();
    }
    return new Promise((resolve) => waiting.push(resolve));
  };
}
