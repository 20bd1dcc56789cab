/**
 * The ramp: starts each charger when its planned time (`startAtMs` from the fleet's start) has come, one per
 * turn of the event loop, until every one started or the ramp is stopped.
 */
import type { ChargerState } from './fleet-charger.js';

export interface FleetRamp {
  /** Starts no more chargers. */
  stop(): void;
}

export function startRamp(
  states: readonly ChargerState[],
  startedAt: number,
  start: (state: ChargerState) => Promise<void>,
  onStartFailed: (state: ChargerState, error: unknown) => void,
): FleetRamp {
  let stopped = false;
  let nextToStart = 0;
  let timer: NodeJS.Timeout | undefined;
  // One charger per turn of the event loop: starting one opens its store and builds its agent synchronously
  // (milliseconds), and a late timer must not start a hundred in one block while answers wait to be read.
  function startDue(): void {
    timer = undefined;
    if (stopped) return;
    const next = states[nextToStart];
    if (!next) return;
    const wait = next.plan.startAtMs - (Date.now() - startedAt);
    if (wait > 0) {
      timer = setTimeout(startDue, wait);
      return;
    }
    nextToStart += 1;
    next.starting = start(next).catch((error: unknown) => onStartFailed(next, error));
    timer = setTimeout(startDue, 0);
  }
  startDue();
  return {
    stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
    },
  };
}
