/**
 * Keeps the store small on a charger that runs for years: journal entries, closed sessions and ended limits
 * go once they stop mattering. Run after each successful heartbeat and at start; it acts at most once a day.
 */
import { type Clock, iso } from '../clock.js';
import type { AgentStore } from '../store/agent-store.js';

const DAY_MS = 86_400_000;
/** Journal entries, closed sessions and ended limits are kept this long after they stop mattering. */
const RETENTION_MS = 30 * DAY_MS;

export function createPruner(store: AgentStore, clock: Clock): () => void {
  let lastPrune = Number.NEGATIVE_INFINITY;
  return function prune(): void {
    const now = clock.now();
    if (now - lastPrune < DAY_MS) return;
    lastPrune = now;
    const before = iso(now - RETENTION_MS);
    store.transaction(() => {
      store.pruneJournal(before);
      store.pruneSessions(before);
      store.pruneLimits(iso(now - DAY_MS));
    });
  };
}
