/**
 * What the fleet measures of its own process: event-loop delay (over the run and over the last few seconds),
 * CPU time, and RSS at the start and at its peak.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';

/** Nanoseconds (perf_hooks histograms) → ms, one decimal; 0 without samples. */
const ms = (ns: number) => (Number.isFinite(ns) ? Math.round(ns / 1e5) / 10 : 0);

export interface ProcessGauges {
  readonly rssStart: number;
  /** The highest RSS noted so far. */
  readonly rssPeak: number;
  /** Notes an RSS reading (the current one when none is given) toward the peak; returns it. */
  noteRss(rss?: number): number;
  /** The event-loop delay of the last few seconds (a new span begins every 5 s). */
  recentLoopDelay(): { p99: number; max: number };
  /** Stops the delay monitors; the readings stay. */
  stop(): void;
  /** CPU time since the start. */
  cpu(): NodeJS.CpuUsage;
  /** The event-loop delay over the whole run. */
  loopDelay(): { p50: number; p99: number; max: number };
}

export function startProcessGauges(): ProcessGauges {
  const loopDelay = monitorEventLoopDelay({ resolution: 10 });
  loopDelay.enable();
  const recentLoopDelay = monitorEventLoopDelay({ resolution: 10 });
  recentLoopDelay.enable();
  let recentLoopDelayAt = Date.now();
  const cpuStart = process.cpuUsage();
  const rssStart = process.memoryUsage().rss;
  let rssPeak = rssStart;
  return {
    rssStart,
    get rssPeak() {
      return rssPeak;
    },
    noteRss(rss = process.memoryUsage().rss) {
      if (rss > rssPeak) rssPeak = rss;
      return rss;
    },
    recentLoopDelay() {
      const eld = { p99: ms(recentLoopDelay.percentile(99)), max: ms(recentLoopDelay.max) };
      if (Date.now() - recentLoopDelayAt >= 5_000) {
        recentLoopDelay.reset();
        recentLoopDelayAt = Date.now();
      }
      return eld;
    },
    stop() {
      loopDelay.disable();
      recentLoopDelay.disable();
    },
    cpu: () => process.cpuUsage(cpuStart),
    loopDelay: () => ({
      p50: ms(loopDelay.percentile(50)),
      p99: ms(loopDelay.percentile(99)),
      max: ms(loopDelay.max),
    }),
  };
}
