/** The simulated network outages of a fleet's chargers: when each begins and ends. */
import type { ChargerState } from './fleet-charger.js';

/** Begins the outages that are due and ends those that are over, `elapsedMs` after the fleet's start. */
export function applyOutages(outageStates: readonly ChargerState[], elapsedMs: number): void {
  for (const state of outageStates) {
    const { startMs, endMs } = state.plan.outage!;
    // Only a registered charger loses its network: a registration whose answer is lost cannot be repeated
    // (the platform answers 409 to the same serial number), and that is not what this simulates. One that
    // registers after its outage was due loses it from then on, for as long.
    if (state.outageEndsAt === undefined) {
      if (state.deviceId === undefined || elapsedMs < startMs || !state.link) continue;
      state.outageEndsAt = elapsedMs + (endMs - startMs);
      state.link.setOut(true);
    } else if (state.out && elapsedMs >= state.outageEndsAt) {
      state.link?.setOut(false);
    }
  }
}

/** The network comes back for the graceful stop: every agent gets to flush its outbox. */
export function liftOutages(outageStates: readonly ChargerState[]): void {
  for (const state of outageStates) state.link?.setOut(false);
}
