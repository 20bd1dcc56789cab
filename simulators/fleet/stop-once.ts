/** A run's stop, made once however often it is asked for. */
import type { FleetSummary } from './fleet-summary.js';

/**
 * `stop()` runs `shutDown` once however often it is called, and returns its summary; `done` settles with it.
 * `stopped()` tells whether the stop has begun.
 */
export function stopOnce(shutDown: () => Promise<FleetSummary>) {
  let resolveDone: (summary: FleetSummary) => void = () => {};
  const done = new Promise<FleetSummary>((resolve) => {
    resolveDone = resolve;
  });
  let stopping: Promise<FleetSummary> | undefined;
  const stop = (): Promise<FleetSummary> => {
    stopping ??= shutDown().then((summary) => {
      resolveDone(summary);
      return summary;
    });
    return stopping;
  };
  return { stop, done, stopped: () => stopping !== undefined };
}
