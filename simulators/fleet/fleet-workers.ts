/**
 * A fleet split over worker threads: worker i runs the chargers whose index ≡ i (mod workers) of the same
 * planned fleet (same serials, mix and ramp as one thread would run), each with its own agents, connection
 * pools, timers and V8 heap. Why: one thread holding thousands of agents stalls them all whenever its heap is
 * collected (docs/simulators.md), and a second thread can use the second core. The main thread only merges
 * what the workers report: live stats once a second, windows on request, and their summaries at the stop.
 *
 * Process-wide figures (RSS, CPU time) are the main thread's readings; event-loop delay is the worst worker's.
 */
import { Worker } from 'node:worker_threads';
import { randomSeed } from '../seeded-random.js';
import {
  checkOptions,
  defaultConnections,
  type FleetHistograms,
  type FleetLiveStats,
  type FleetOptions,
  type FleetSummary,
  stopOnce,
} from './fleet-runner.js';
import {
  type FleetStatsWindow,
  type FleetStatsWindowParts,
  mergeWindowParts,
  summarizeWindow,
} from './fleet-stats.js';
import { LatencyHistogram, type LatencySnapshot } from './latency-histogram.js';

export type MainToFleet = { type: 'window'; id: number } | { type: 'stop' };
export type FleetToMain =
  | { type: 'live'; live: FleetLiveStats; latency: LatencySnapshot; command: LatencySnapshot }
  | { type: 'window'; id: number; parts: FleetStatsWindowParts }
  | { type: 'summary'; summary: FleetSummary; histograms: FleetHistograms }
  | { type: 'failed'; message: string };

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

const sum = (values: readonly number[]) => values.reduce((a, b) => a + b, 0);
const round1 = (v: number) => Math.round(v * 10) / 10;

function mergeHistograms(snapshots: readonly LatencySnapshot[]): LatencyHistogram {
  const h = new LatencyHistogram();
  for (const s of snapshots) h.merge(LatencyHistogram.from(s));
  return h;
}

function addCounts<T extends Record<string, number>>(records: readonly T[]): T {
  const out: Record<string, number> = {};
  for (const r of records) for (const [k, v] of Object.entries(r)) out[k] = (out[k] ?? 0) + v;
  return out as T;
}

type KindCounts = Record<string, { requests: number; ok: number; failed: number }>;

function addKindCounts(records: readonly KindCounts[]): KindCounts {
  const out: KindCounts = {};
  for (const r of records)
    for (const [kind, v] of Object.entries(r)) {
      const a = out[kind] ?? { requests: 0, ok: 0, failed: 0 };
      out[kind] = { requests: a.requests + v.requests, ok: a.ok + v.ok, failed: a.failed + v.failed };
    }
  return Object.fromEntries(Object.entries(out).sort(([a], [b]) => a.localeCompare(b)));
}

/** The live stats of the whole fleet from each worker's latest. Pure but for `process` readings passed in. */
export function mergeLive(
  parts: ReadonlyArray<{ live: FleetLiveStats; latency: LatencySnapshot; command: LatencySnapshot }>,
  whole: { count: number; elapsedS: number; rss: number; rssStart: number },
): FleetLiveStats {
  const lives = parts.map((p) => p.live);
  const latency = mergeHistograms(parts.map((p) => p.latency));
  const command = mergeHistograms(parts.map((p) => p.command));
  const started = sum(lives.map((l) => l.started));
  const present = (values: ReadonlyArray<number | undefined>) =>
    values.length > 0 && values.every((v) => v !== undefined) ? sum(values as number[]) : undefined;
  const backlog = present(lives.map((l) => l.outbox_backlog));
  const heap = present(lives.map((l) => l.heap_used_bytes));
  const handles = present(lives.map((l) => l.active_handles));
  return {
    elapsed_s: round1(whole.elapsedS),
    count: whole.count,
    started,
    registered: sum(lives.map((l) => l.registered)),
    online: sum(lives.map((l) => l.online)),
    out: sum(lives.map((l) => l.out)),
    requests: sum(lives.map((l) => l.requests)),
    requests_per_s: sum(lives.map((l) => l.requests_per_s)),
    errors: sum(lives.map((l) => l.errors)),
    retried: sum(lives.map((l) => l.retried)),
    outage_failures: sum(lives.map((l) => l.outage_failures)),
    latency_ms: {
      p50: round1(latency.percentile(0.5)),
      p99: round1(latency.percentile(0.99)),
    },
    event_loop_delay_ms: {
      p99: Math.max(0, ...lives.map((l) => l.event_loop_delay_ms.p99)),
      max: Math.max(0, ...lives.map((l) => l.event_loop_delay_ms.max)),
    },
    command_latency_ms: {
      count: command.count,
      p50: Math.round(command.percentile(0.5)),
      p99: Math.round(command.percentile(0.99)),
    },
    telemetry: {
      produced: sum(lives.map((l) => l.telemetry.produced)),
      delivered: sum(lives.map((l) => l.telemetry.delivered)),
    },
    ...(backlog !== undefined ? { outbox_backlog: backlog } : {}),
    ...(heap !== undefined ? { heap_used_bytes: heap } : {}),
    ...(handles !== undefined ? { active_handles: handles } : {}),
    rss_bytes: whole.rss,
    per_charger_bytes: started === 0 ? 0 : Math.round((whole.rss - whole.rssStart) / started),
  };
}

export interface WholeFleetReadings {
  seed: number;
  count: number;
  workers: number;
  durationS: number;
  rssStart: number;
  rssPeak: number;
  rssAtStop: number;
  cpu: NodeJS.CpuUsage;
}

/** One summary of the whole fleet from every worker's summary and histograms. Pure. */
export function mergeSummaries(
  parts: ReadonlyArray<{ summary: FleetSummary; histograms: FleetHistograms }>,
  whole: WholeFleetReadings,
): FleetSummary {
  const s = parts.map((p) => p.summary);
  const h = parts.map((p) => p.histograms);
  const byKind: Record<string, LatencySnapshot[]> = {};
  for (const hist of h)
    for (const [kind, snap] of Object.entries(hist.byKind)) byKind[kind] = [...(byKind[kind] ?? []), snap];
  const registeredAfter = s.map((x) => x.all_registered_after_s);
  const samples: Record<string, string> = {};
  for (const x of s) for (const [k, v] of Object.entries(x.error_samples)) samples[k] ??= v;
  const total = sum(s.map((x) => x.requests.total));
  const started = sum(s.map((x) => x.started));
  const cpuS = (whole.cpu.user + whole.cpu.system) / 1e6;
  return {
    seed: whole.seed,
    count: whole.count,
    started,
    registered: sum(s.map((x) => x.registered)),
    online_at_stop: sum(s.map((x) => x.online_at_stop)),
    all_registered_after_s: registeredAfter.some((v) => v === null)
      ? null
      : Math.max(...(registeredAfter as number[])),
    duration_s: round1(whole.durationS),
    ramp_s: s[0]?.ramp_s ?? 0,
    store: s[0]?.store ?? 'memory',
    mix: {
      all_charging: s[0]?.mix.all_charging ?? false,
      connectors: sum(s.map((x) => x.mix.connectors)),
      twin_connector_chargers: sum(s.map((x) => x.mix.twin_connector_chargers)),
      v2g_chargers: sum(s.map((x) => x.mix.v2g_chargers)),
      outage_chargers: sum(s.map((x) => x.mix.outage_chargers)),
    },
    requests: {
      total,
      per_second: whole.durationS > 0 ? Math.round(total / whole.durationS) : 0,
      by_kind: addKindCounts(s.map((x) => x.requests.by_kind)),
      latency_ms: mergeHistograms(h.map((x) => x.latency)).summary(),
      steady_latency_ms: mergeHistograms(h.map((x) => x.steady)).summary(),
      latency_by_kind_ms: Object.fromEntries(
        Object.entries(byKind).map(([k, snaps]) => [k, mergeHistograms(snaps).summary()]),
      ),
    },
    workers: whole.workers,
    errors: sum(s.map((x) => x.errors)),
    error_kinds: addCounts(s.map((x) => x.error_kinds)),
    error_samples: samples,
    retried: {
      rate_limited: sum(s.map((x) => x.retried.rate_limited)),
      transient_recovered: sum(s.map((x) => x.retried.transient_recovered)),
    },
    failures: addCounts(s.map((x) => x.failures)),
    telemetry: addCounts(s.map((x) => x.telemetry)),
    outbox: {
      enqueued: addCounts(s.map((x) => x.outbox.enqueued)),
      delivered: addCounts(s.map((x) => x.outbox.delivered)),
      refused: addCounts(s.map((x) => x.outbox.refused)),
      backlog_items: sum(s.map((x) => x.outbox.backlog_items)),
      chargers_with_backlog: sum(s.map((x) => x.outbox.chargers_with_backlog)),
    },
    commands: {
      outcomes: Object.fromEntries(
        Object.entries(addCounts(s.map((x) => x.commands.outcomes))).sort(([a], [b]) => a.localeCompare(b)),
      ),
      latency_ms: mergeHistograms(h.map((x) => x.command)).summary(),
    },
    agent_logs: addCounts(s.map((x) => x.agent_logs)),
    connections: addCounts(s.map((x) => x.connections)),
    memory: {
      rss_start_bytes: whole.rssStart,
      rss_peak_bytes: whole.rssPeak,
      rss_at_stop_bytes: whole.rssAtStop,
      heap_used_at_stop_bytes: sum(s.map((x) => x.memory.heap_used_at_stop_bytes)),
      per_charger_bytes: started === 0 ? 0 : Math.round((whole.rssAtStop - whole.rssStart) / started),
    },
    cpu: {
      user_s: Math.round(whole.cpu.user / 1e4) / 100,
      system_s: Math.round(whole.cpu.system / 1e4) / 100,
      cores_used: whole.durationS > 0 ? Math.round((cpuS / whole.durationS) * 100) / 100 : 0,
    },
    event_loop_delay_ms: {
      p50: Math.max(0, ...s.map((x) => x.event_loop_delay_ms.p50)),
      p99: Math.max(0, ...s.map((x) => x.event_loop_delay_ms.p99)),
      max: Math.max(0, ...s.map((x) => x.event_loop_delay_ms.max)),
    },
  };
}

function withoutDuration(options: WorkerFleetOptions): WorkerFleetOptions {
  const { durationMs: _ignored, ...rest } = options;
  return rest;
}

const WORKER_URL = new URL('./fleet-worker.js', import.meta.url);

/**
 * Starts `workers` worker threads, each running its slice of the fleet. Resolves once every worker has started
 * its fleet (rejects if one could not). `options.logDestination` is not supported (workers log to stderr).
 */
export async function runFleetInWorkers(options: WorkerFleetOptions, workers: number): Promise<FleetHandle> {
  checkOptions(options);
  if (!Number.isInteger(workers) || workers < 1) throw new Error('workers must be a whole number ≥ 1');
  const seed = options.seed ?? randomSeed();
  const rssStart = process.memoryUsage().rss;
  let rssPeak = rssStart;
  const cpuStart = process.cpuUsage();
  const startedAt = Date.now();
  // The pool's size is the whole fleet's, shared out: a worker's share of the fleet needs its share of it.
  const perWorkerConnections = Math.max(
    1,
    Math.ceil((options.connections ?? defaultConnections(options.count)) / workers),
  );

  interface Slot {
    worker: Worker;
    latest?: { live: FleetLiveStats; latency: LatencySnapshot; command: LatencySnapshot };
    windows: Map<number, { resolve: (parts: FleetStatsWindowParts) => void; reject: (e: Error) => void }>;
    exited: Promise<number>;
    gone?: boolean;
    failure?: string;
    /** The backlog, heap and handles of its last report that had them. */
    lastResources?: Pick<FleetLiveStats, 'outbox_backlog' | 'heap_used_bytes' | 'active_handles'>;
  }
  const slots: Slot[] = [];
  let started = false;
  const { stop, done, stopped } = stopOnce(shutDown);
  for (let index = 0; index < workers; index++) {
    const worker = new Worker(WORKER_URL, {
      // The main thread alone times the run (`durationMs`), so that every worker stops on the same word.
      workerData: {
        ...withoutDuration(options),
        seed,
        slice: { index, of: workers },
        startedAt,
        connections: perWorkerConnections,
      } satisfies FleetOptions,
    });
    const slot: Slot = {
      worker,
      windows: new Map(),
      exited: new Promise((resolve) => worker.once('exit', resolve)),
    };
    worker.on('error', (error) => {
      slot.failure ??= error.message;
    });
    // A worker gone answers no more windows; one gone before the stop (a crash) stops the fleet, whose summary
    // counts it as an error (`worker_failed`).
    void slot.exited.then(() => {
      slot.gone = true;
      for (const pending of slot.windows.values())
        pending.reject(new Error(slot.failure ?? 'a fleet worker exited'));
      slot.windows.clear();
      if (!stopped() && started) {
        slot.failure ??= 'a fleet worker exited';
        void stop();
      }
    });
    slots.push(slot);
  }

  // Every worker reports once its fleet runs (its first `live`), or fails.
  await Promise.all(
    slots.map(
      (slot) =>
        new Promise<void>((resolve, reject) => {
          slot.worker.on('message', (message: FleetToMain) => {
            switch (message.type) {
              case 'live':
                slot.latest = {
                  live: { ...slot.lastResources, ...message.live },
                  latency: message.latency,
                  command: message.command,
                };
                if (message.live.active_handles !== undefined)
                  slot.lastResources = {
                    outbox_backlog: message.live.outbox_backlog ?? 0,
                    heap_used_bytes: message.live.heap_used_bytes ?? 0,
                    active_handles: message.live.active_handles,
                  };
                resolve();
                break;
              case 'window':
                slot.windows.get(message.id)?.resolve(message.parts);
                slot.windows.delete(message.id);
                break;
              case 'failed':
                slot.failure = message.message;
                reject(new Error(message.message));
                break;
              case 'summary':
                break;
            }
          });
          void slot.exited.then(() => reject(new Error(slot.failure ?? 'a fleet worker exited')));
        }),
    ),
  ).catch(async (error: unknown) => {
    await Promise.all(slots.map((s) => s.worker.terminate()));
    throw error;
  });
  started = true;

  const everySecond = setInterval(() => {
    const rss = process.memoryUsage().rss;
    if (rss > rssPeak) rssPeak = rss;
  }, 1_000);

  const live = (): FleetLiveStats => {
    const rss = process.memoryUsage().rss;
    if (rss > rssPeak) rssPeak = rss;
    return mergeLive(
      slots.flatMap((s) => (s.latest ? [s.latest] : [])),
      { count: options.count, elapsedS: (Date.now() - startedAt) / 1000, rss, rssStart },
    );
  };

  let nextWindowId = 0;
  const takeWindow = async (): Promise<FleetStatsWindow> => {
    const id = nextWindowId++;
    const parts = await Promise.all(
      slots.map(
        (slot) =>
          new Promise<FleetStatsWindowParts>((resolve, reject) => {
            slot.windows.set(id, { resolve, reject });
            slot.worker.postMessage({ type: 'window', id } satisfies MainToFleet);
          }),
      ),
    );
    return summarizeWindow(mergeWindowParts(parts));
  };

  /** The worker's summary once it stopped its chargers; undefined if it is gone. */
  const summaryOf = (slot: Slot) =>
    new Promise<{ summary: FleetSummary; histograms: FleetHistograms } | undefined>((resolve) => {
      if (slot.gone) return resolve(undefined);
      slot.worker.on('message', (message: FleetToMain) => {
        if (message.type === 'summary') resolve({ summary: message.summary, histograms: message.histograms });
      });
      void slot.exited.then(() => resolve(undefined));
      slot.worker.postMessage({ type: 'stop' } satisfies MainToFleet);
    });

  async function shutDown(): Promise<FleetSummary> {
    if (durationTimer) clearTimeout(durationTimer);
    clearInterval(everySecond);
    const cpu = process.cpuUsage(cpuStart);
    const durationS = (Date.now() - startedAt) / 1000;
    const rssAtStop = process.memoryUsage().rss;
    if (rssAtStop > rssPeak) rssPeak = rssAtStop;
    const results = await Promise.all(slots.map(summaryOf));
    await Promise.all(slots.map((s) => s.exited));
    const parts = results.flatMap((r) => (r ? [r] : []));
    const summary = mergeSummaries(parts, {
      seed,
      count: options.count,
      workers,
      durationS,
      rssStart,
      rssPeak,
      rssAtStop,
      cpu,
    });
    const failed = slots.filter((_, i) => !results[i]);
    if (failed.length > 0) {
      summary.errors += failed.length;
      summary.error_kinds.worker_failed = failed.length;
      summary.error_samples.worker_failed = failed[0]!.failure ?? 'a fleet worker exited before its summary';
    }
    return summary;
  }

  let durationTimer: NodeJS.Timeout | undefined;
  if (options.durationMs !== undefined) durationTimer = setTimeout(() => void stop(), options.durationMs);

  return { seed, startedAt, live, takeWindow, stop, done };
}
