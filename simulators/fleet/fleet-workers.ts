/**
 * A fleet split over worker threads: worker i runs the chargers whose index ≡ i (mod workers) of the same
 * planned fleet (same serials, mix and ramp as one thread would run), each with its own agents, connection
 * pools, timers and V8 heap. Why: one thread holding thousands of agents stalls them all whenever its heap is
 * collected (docs/simulators.md), and a second thread can use the second core. The main thread only merges
 * what the workers report: live stats once a second, windows on request, and their summaries at the stop.
 *
 * Process-wide figures (RSS, CPU time) are the main thread's readings; event-loop delay is the worst worker's.
 */
import { randomSeed } from '../seeded-random.js';
import type { FleetLiveStats } from './fleet-live.js';
import { mergeLive, mergeSummaries } from './fleet-merge.js';
import { checkOptions, defaultConnections, type FleetOptions } from './fleet-options.js';
import type { FleetSummary } from './fleet-summary.js';
import { startWorkerSlot, summaryOf, type WorkerSlot, windowOf, workerStarted } from './fleet-worker-slot.js';
import { type FleetStatsWindow, mergeWindowParts, summarizeWindow } from './stats-window.js';
import { stopOnce } from './stop-once.js';

/** What the CLI, the benchmarks and the soak use of a fleet, whether it runs in one thread or several. */
export interface FleetHandle {
  readonly seed: number;
  readonly startedAt: number;
  /** With worker threads, the backlog, heap and handles are those of the workers' last report (≤ 5 s old). */
  live(opts?: { backlog?: boolean; resources?: boolean }): FleetLiveStats;
  takeWindow(): FleetStatsWindow | Promise<FleetStatsWindow>;
  stop(): Promise<FleetSummary>;
  readonly done: Promise<FleetSummary>;
}

/** Options a worker can receive (structured clone): no log stream, no functions. */
export type WorkerFleetOptions = Omit<FleetOptions, 'logDestination' | 'slice' | 'startedAt'>;

function withoutDuration(options: WorkerFleetOptions): WorkerFleetOptions {
  const { durationMs: _ignored, ...rest } = options;
  return rest;
}

/** The main thread's own readings over the run (RSS, CPU time). */
function startMainReadings() {
  const rssStart = process.memoryUsage().rss;
  let rssPeak = rssStart;
  const cpuStart = process.cpuUsage();
  return {
    rssStart,
    get rssPeak() {
      return rssPeak;
    },
    noteRss(): number {
      const rss = process.memoryUsage().rss;
      if (rss > rssPeak) rssPeak = rss;
      return rss;
    },
    cpu: () => process.cpuUsage(cpuStart),
  };
}

/** The whole fleet's summary from the workers' at the stop; a worker gone without one is an error. */
async function stopWorkers(
  slots: readonly WorkerSlot[],
  whole: Omit<Parameters<typeof mergeSummaries>[1], 'rssPeak'>,
  rssPeak: () => number,
): Promise<FleetSummary> {
  const results = await Promise.all(slots.map(summaryOf));
  await Promise.all(slots.map((s) => s.exited));
  const parts = results.flatMap((r) => (r ? [r] : []));
  const summary = mergeSummaries(parts, { ...whole, rssPeak: rssPeak() });
  const failed = slots.filter((_, i) => !results[i]);
  if (failed.length > 0) {
    summary.errors += failed.length;
    summary.error_kinds.worker_failed = failed.length;
    summary.error_samples.worker_failed = failed[0]!.failure ?? 'a fleet worker exited before its summary';
  }
  return summary;
}

/**
 * Starts `workers` worker threads, each running its slice of the fleet. Resolves once every worker has started
 * its fleet (rejects if one could not). `options.logDestination` is not supported (workers log to stderr).
 */
export async function runFleetInWorkers(options: WorkerFleetOptions, workers: number): Promise<FleetHandle> {
  checkOptions(options);
  if (!Number.isInteger(workers) || workers < 1) throw new Error('workers must be a whole number ≥ 1');
  const seed = options.seed ?? randomSeed();
  const main = startMainReadings();
  const startedAt = Date.now();
  // The pool's size is the whole fleet's, shared out: a worker's share of the fleet needs its share of it.
  const perWorkerConnections = Math.max(
    1,
    Math.ceil((options.connections ?? defaultConnections(options.count)) / workers),
  );
  let started = false;
  const timers: { everySecond?: NodeJS.Timeout; duration?: NodeJS.Timeout } = {};
  const { stop, done, stopped } = stopOnce(async () => {
    clearTimeout(timers.duration);
    clearInterval(timers.everySecond);
    const cpu = main.cpu();
    const durationS = (Date.now() - startedAt) / 1000;
    const rssAtStop = main.noteRss();
    const whole = { seed, count: options.count, workers, durationS, rssStart: main.rssStart, rssAtStop, cpu };
    return stopWorkers(slots, whole, () => main.rssPeak);
  });
  const slots = Array.from({ length: workers }, (_, index) =>
    // The main thread alone times the run (`durationMs`), so that every worker stops on the same word.
    startWorkerSlot(
      {
        ...withoutDuration(options),
        seed,
        slice: { index, of: workers },
        startedAt,
        connections: perWorkerConnections,
      },
      (slot) => {
        if (!stopped() && started) {
          slot.failure ??= 'a fleet worker exited';
          void stop();
        }
      },
    ),
  );
  await Promise.all(slots.map(workerStarted)).catch(async (error: unknown) => {
    await Promise.all(slots.map((s) => s.worker.terminate()));
    throw error;
  });
  started = true;

  timers.everySecond = setInterval(() => main.noteRss(), 1_000);
  const live = (): FleetLiveStats =>
    mergeLive(
      slots.flatMap((s) => (s.latest ? [s.latest] : [])),
      {
        count: options.count,
        elapsedS: (Date.now() - startedAt) / 1000,
        rss: main.noteRss(),
        rssStart: main.rssStart,
      },
    );
  let nextWindowId = 0;
  const takeWindow = async (): Promise<FleetStatsWindow> => {
    const id = nextWindowId++;
    const parts = await Promise.all(slots.map((slot) => windowOf(slot, id)));
    return summarizeWindow(mergeWindowParts(parts));
  };
  if (options.durationMs !== undefined) timers.duration = setTimeout(() => void stop(), options.durationMs);

  return { seed, startedAt, live, takeWindow, stop, done };
}
