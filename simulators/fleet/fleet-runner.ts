/**
 * The fleet: N simulated chargers in one process, each running the REAL agent (`startAgent`) on the simulated
 * HAL, against a real platform. `runFleet(options)` starts it and returns at once with a handle that gives
 * live stats and, on `stop()` (or when `durationMs` is over), a summary. The `charger-sim fleet` command is a
 * thin shell over it; benchmarks drive it directly.
 *
 * Shared by all chargers, so that a charger costs little more than its agent's state:
 * - one undici connection pool (keep-alive, TLS with the given CA, as many connections as requests in flight:
 *   every charger keeps a long poll open, as a real one does); each charger sees it through a thin
 *   interceptor that observes and can break its link (`charger-link.ts`);
 * - one logger (silent by default; errors are counted either way);
 * - one timer wheel for the simulated hardware's physics ticks (`tick-wheel.ts`);
 * - the store: in memory unless `dataDir` is given (then each charger has `DIR/<sn>/` like a real one).
 *
 * Stopping is the agent's own graceful shutdown for every charger (flush the outbox, offline heartbeat), after
 * the simulated network outages are lifted, a bounded number of chargers at a time.
 */
import {
  type ChargerState,
  chargerView,
  createChargerLifecycle,
  type FleetCharger,
  type FleetProgress,
} from './fleet-charger.js';
import { createFleetConnections } from './fleet-connections.js';
import { countOnline, createLiveStats, type FleetLiveStats, type LiveStatsOptions } from './fleet-live.js';
import { createFleetLogger, type LogCounts } from './fleet-logger.js';
import {
  type FleetOptions,
  type FleetSettings,
  resolveFleetSettings,
  STEADY_AFTER_RAMP_MS,
} from './fleet-options.js';
import { applyOutages } from './fleet-outages.js';
import { startRamp } from './fleet-ramp.js';
import { FleetStats } from './fleet-stats.js';
import { type FleetRun, shutDownFleet } from './fleet-stop.js';
import { type FleetHistograms, type FleetSummary, fleetHistograms } from './fleet-summary.js';
import { startProcessGauges } from './process-gauges.js';
import type { FleetStatsWindow, FleetStatsWindowParts } from './stats-window.js';
import { stopOnce } from './stop-once.js';
import { createTickWheel } from './tick-wheel.js';

export interface Fleet {
  readonly seed: number;
  readonly startedAt: number;
  readonly options: Readonly<FleetOptions>;
  chargers(): readonly FleetCharger[];
  live(opts?: LiveStatsOptions): FleetLiveStats;
  /** Requests, latency, failures and errors since the previous call (or the start): soak samples, test phases. */
  takeWindow(): FleetStatsWindow;
  /** `takeWindow` with its latency histogram (mergeable across worker threads). */
  takeWindowParts(): FleetStatsWindowParts;
  /** The run's latency histograms so far (mergeable across worker threads). */
  histograms(): FleetHistograms;
  /** Only the two the live stats need (a worker sends them every second). */
  liveHistograms(): Pick<FleetHistograms, 'latency' | 'command'>;
  /** Stops every charger gracefully; the same summary however often it is called. */
  stop(): Promise<FleetSummary>;
  /** Settles with the summary once the fleet stopped (by `stop()` or at the end of `durationMs`). */
  readonly done: Promise<FleetSummary>;
}

/** What is shared by every charger of one run (see the top of this file). */
function createFleetShared(options: FleetOptions, settings: FleetSettings) {
  const count = settings.plans.length;
  const stats = new FleetStats({ strict: options.strict ?? false });
  const logCounts: LogCounts = { warn: 0, error: 0, fatal: 0 };
  const logger = createFleetLogger(settings.logLevel, options.logDestination, logCounts, (message) =>
    stats.error('agent_log_error', message),
  );
  const connections = createFleetConnections(options, count);
  const wheel = createTickWheel();
  return { count, stats, logCounts, logger, connections, wheel };
}

export async function runFleet(options: FleetOptions): Promise<Fleet> {
  const settings = resolveFleetSettings(options);
  const shared = createFleetShared(options, settings);
  const { count, stats } = shared;
  const states: ChargerState[] = settings.plans.map((plan) => ({ plan, out: false }));
  const outageStates = states.filter((s) => s.plan.outage);
  const gauges = startProcessGauges();
  const startedAt = options.startedAt ?? Date.now();
  stats.steadyFromMs = startedAt + settings.rampMs + STEADY_AFTER_RAMP_MS;
  const progress: FleetProgress = { started: 0, registered: 0 };
  const chargers = createChargerLifecycle({ ...shared, options, settings, timers: shared.wheel, progress });
  const online = () => countOnline(states, settings.tuning.heartbeatIntervalMs ?? 30_000);
  const run: FleetRun = {
    ...shared,
    options,
    settings,
    states,
    outageStates,
    gauges,
    startedAt,
    progress,
    chargers,
    online,
  };

  // Once a second: outages begin and end, the request rate is sampled, the peak RSS is noted.
  const everySecond = setInterval(() => {
    applyOutages(outageStates, Date.now() - startedAt);
    stats.sample();
    gauges.noteRss();
  }, 1_000);
  const { stop, done } = stopOnce(() => {
    ramp.stop();
    if (durationTimer) clearTimeout(durationTimer);
    clearInterval(everySecond);
    return shutDownFleet(run);
  });
  const durationTimer =
    options.durationMs !== undefined ? setTimeout(() => void stop(), options.durationMs) : undefined;
  const ramp = startRamp(states, startedAt, chargers.start, (state, error) => {
    stats.error('start_failed', `${state.plan.sn}: ${(error as Error).message}`);
  });

  return {
    seed: settings.seed,
    startedAt,
    options,
    chargers: () => states.map(chargerView),
    live: createLiveStats({ states, outageStates, stats, gauges, progress, count, startedAt, online }),
    takeWindow: () => stats.takeWindow(),
    takeWindowParts: () => stats.takeWindowParts(),
    liveHistograms: () => ({
      latency: stats.latency.snapshot(),
      command: stats.commandLatency.snapshot(),
    }),
    histograms: () => fleetHistograms(stats),
    stop,
    done,
  };
}
