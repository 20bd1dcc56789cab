/** The fleet's live stats: what the progress line shows and a worker thread reports every second. */
import type { ChargerState, FleetProgress } from './fleet-charger.js';
import type { FleetStats } from './fleet-stats.js';
import type { ProcessGauges } from './process-gauges.js';

export interface FleetLiveStats {
  elapsed_s: number;
  count: number;
  started: number;
  registered: number;
  online: number;
  out: number;
  requests: number;
  requests_per_s: number;
  errors: number;
  retried: number;
  outage_failures: number;
  latency_ms: { p50: number; p99: number };
  /** The fleet's own event-loop delay over the last few seconds. */
  event_loop_delay_ms: { p99: number; max: number };
  command_latency_ms: { count: number; p50: number; p99: number };
  telemetry: { produced: number; delivered: number };
  /** Summed over every outbox; only when asked for (it queries every charger's store). */
  outbox_backlog?: number;
  /**
   * Transient failures no charger has recovered from yet (the same kind of request has not succeeded since): they
   * become `unrecovered` errors if the fleet stops now. Only with the backlog.
   */
  awaiting_recovery?: number;
  /** This thread's V8 heap in use and active handles (summed over worker threads); only when asked for. */
  heap_used_bytes?: number;
  active_handles?: number;
  rss_bytes: number;
  per_charger_bytes: number;
}

export interface LiveStatsOptions {
  backlog?: boolean;
  resources?: boolean;
}

/** Chargers online: not out, and a heartbeat answered within three heartbeat periods (and 5 s). */
export function countOnline(states: readonly ChargerState[], heartbeatIntervalMs: number): number {
  const now = Date.now();
  const window = 3 * heartbeatIntervalMs + 5_000;
  let n = 0;
  for (const s of states)
    if (!s.out && s.heartbeatOkAt !== undefined && now - s.heartbeatOkAt < window) n += 1;
  return n;
}

export interface LiveStatsSources {
  states: readonly ChargerState[];
  outageStates: readonly ChargerState[];
  stats: FleetStats;
  gauges: ProcessGauges;
  progress: FleetProgress;
  count: number;
  startedAt: number;
  online: () => number;
}

/** The live-stats reader of one fleet thread. */
export function createLiveStats(sources: LiveStatsSources): (opts?: LiveStatsOptions) => FleetLiveStats {
  const { states, stats, gauges, progress } = sources;
  /**
   * Telemetry totals are summed over every charger only when the backlog is asked for (every few seconds): a
   * worker reports its live stats every second, and its thousands of chargers need not be walked each time.
   */
  let telemetryTotals = { produced: 0, delivered: 0 };
  return (opts = {}) => {
    let backlog = 0;
    let awaiting = 0;
    let out = 0;
    for (const s of sources.outageStates) if (s.out) out += 1;
    if (opts.backlog) {
      let produced = 0;
      let delivered = 0;
      for (const s of states) {
        if (!s.runtime) continue;
        const { uplink, outbox } = s.runtime.stats();
        produced += uplink.telemetryProduced;
        delivered += uplink.delivered.telemetry;
        backlog += outbox.items;
        for (const n of s.pending?.values() ?? []) awaiting += n;
      }
      telemetryTotals = { produced, delivered };
    }
    const rss = gauges.noteRss(process.memoryUsage.rss());
    const eld = gauges.recentLoopDelay();
    const { started } = progress;
    return {
      elapsed_s: Math.round((Date.now() - sources.startedAt) / 100) / 10,
      count: sources.count,
      started,
      registered: progress.registered,
      online: sources.online(),
      out,
      requests: stats.totalRequests,
      requests_per_s: Math.round(stats.rate()),
      errors: stats.errorCount,
      retried: stats.retriedRateLimited + stats.recoveredTransient,
      outage_failures: stats.failures.outage,
      latency_ms: {
        p50: Math.round(stats.latency.percentile(0.5) * 10) / 10,
        p99: Math.round(stats.latency.percentile(0.99) * 10) / 10,
      },
      event_loop_delay_ms: eld,
      command_latency_ms: {
        count: stats.commandLatency.count,
        p50: Math.round(stats.commandLatency.percentile(0.5)),
        p99: Math.round(stats.commandLatency.percentile(0.99)),
      },
      telemetry: telemetryTotals,
      ...(opts.backlog ? { outbox_backlog: backlog, awaiting_recovery: awaiting } : {}),
      ...(opts.resources
        ? {
            heap_used_bytes: process.memoryUsage().heapUsed,
            active_handles: process.getActiveResourcesInfo().length,
          }
        : {}),
      rss_bytes: rss,
      per_charger_bytes: started === 0 ? 0 : Math.round((rss - gauges.rssStart) / started),
    };
  };
}
