/**
 * A fleet's stop: every charger's agent shuts down gracefully (flush the outbox, offline heartbeat) once the
 * long polls are closed and the simulated outages lifted, a bounded number of chargers at a time; then the
 * shared connections close and the summary is made.
 */
import type { Logger } from 'pino';
import type { ChargerLifecycle, ChargerState, FleetProgress } from './fleet-charger.js';
import type { FleetConnections } from './fleet-connections.js';
import type { LogCounts } from './fleet-logger.js';
import { defaultConnections, type FleetOptions, type FleetSettings } from './fleet-options.js';
import { liftOutages } from './fleet-outages.js';
import type { FleetStats } from './fleet-stats.js';
import { chargerTotals, type FleetSummary, type SummaryReadings, summarizeFleet } from './fleet-summary.js';
import type { ProcessGauges } from './process-gauges.js';
import type { TickWheel } from './tick-wheel.js';

/** One running fleet thread: what its stop reads and closes. */
export interface FleetRun {
  options: FleetOptions;
  settings: FleetSettings;
  /** The chargers this thread runs. */
  count: number;
  stats: FleetStats;
  logCounts: LogCounts;
  logger: Logger;
  connections: FleetConnections;
  wheel: TickWheel;
  states: readonly ChargerState[];
  outageStates: readonly ChargerState[];
  gauges: ProcessGauges;
  startedAt: number;
  progress: FleetProgress;
  chargers: ChargerLifecycle;
  online(): number;
}

/** Runs `fn` over `items` with at most `limit` at a time. */
async function eachLimited<T>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const item = items[next++]!;
      await fn(item);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

/** The readings of the moment the stop began (the timers are stopped by then). */
function readingsAtStop(run: FleetRun) {
  run.stats.steadyUntilMs = Date.now();
  run.gauges.stop();
  const onlineAtStop = run.online();
  const cpu = run.gauges.cpu();
  const wallS = (Date.now() - run.startedAt) / 1000;
  (globalThis as { gc?: () => void }).gc?.();
  const memoryAtStop = process.memoryUsage();
  run.gauges.noteRss(memoryAtStop.rss);
  return { onlineAtStop, cpu, wallS, memoryAtStop };
}

async function stopEveryCharger(run: FleetRun): Promise<void> {
  run.stats.stopping = true;
  // Long polls end first, by closing their connections: an agent aborting its own poll makes undici reconnect
  // the aborted connection at once (a TLS handshake per charger, on both sides, for nothing). Polls failed this
  // way count as aborted, not as failures.
  await run.connections.closePolls();
  liftOutages(run.outageStates);
  await eachLimited(run.states, run.options.stopConcurrency ?? 200, run.chargers.stop);
  await Promise.allSettled(run.states.map((s) => s.starting));
  run.stats.settle(run.states);
}

function summaryReadings(run: FleetRun, atStop: ReturnType<typeof readingsAtStop>): SummaryReadings {
  const { options, gauges, progress, connections } = run;
  const { memoryAtStop } = atStop;
  const { started } = progress;
  return {
    seed: run.settings.seed,
    count: run.count,
    progress,
    onlineAtStop: atStop.onlineAtStop,
    startedAt: run.startedAt,
    wallS: atStop.wallS,
    rampMs: run.settings.rampMs,
    inMemory: options.dataDir === undefined,
    allCharging: run.settings.allCharging,
    outageChargers: run.outageStates.length,
    logCounts: run.logCounts,
    connections: {
      request_pool_size: options.connections ?? defaultConnections(run.count),
      opened_for_requests: connections.opened.requests,
      opened_for_polls: connections.opened.polls,
    },
    memory: {
      rss_start_bytes: gauges.rssStart,
      rss_peak_bytes: gauges.rssPeak,
      rss_at_stop_bytes: memoryAtStop.rss,
      heap_used_at_stop_bytes: memoryAtStop.heapUsed,
      per_charger_bytes: started === 0 ? 0 : Math.round((memoryAtStop.rss - gauges.rssStart) / started),
    },
    cpu: atStop.cpu,
    loopDelay: gauges.loopDelay(),
  };
}

/** Stops every charger and returns the summary; the caller has stopped the ramp and its timers. */
export async function shutDownFleet(run: FleetRun): Promise<FleetSummary> {
  const atStop = readingsAtStop(run);
  await stopEveryCharger(run);
  const totals = chargerTotals(run.states, run.stats, run.options.dataDir === undefined);
  await run.connections.close();
  run.wheel.close();
  const summary = summarizeFleet(summaryReadings(run, atStop), run.stats, totals);
  run.logger.flush?.();
  return summary;
}
