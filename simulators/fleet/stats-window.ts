/**
 * Windows of the fleet's stats: what happened between two `takeWindow` calls, and how the windows of several
 * worker threads over the same interval merge into one.
 */
import { type FailureClass, zeroFailures } from './failure-classes.js';
import { LatencyHistogram, type LatencySnapshot, type LatencySummary } from './latency-histogram.js';

/** What happened between two `takeWindow` calls (or since the start). */
export interface FleetStatsWindow {
  /** When the window began and ended, ms since the epoch. */
  from_ms: number;
  until_ms: number;
  /** Requests that ended in the window, long polls included, aborted ones not (as `requests.total`). */
  requests: number;
  /** Successful requests but long polls that ended in the window. */
  latency_ms: LatencySummary;
  failures: Record<FailureClass, number>;
  /** Failed requests by cause: `http_<status>`, else the error's code or name (`ECONNREFUSED`, `Error`...). */
  failed_by_cause: Record<string, number>;
  /** Errors counted in the window (an unrecovered transient failure only becomes one at the stop). */
  errors: number;
}

/** A window before its latency is summarized: what worker threads send, so that windows can be merged. */
export interface FleetStatsWindowParts {
  from_ms: number;
  until_ms: number;
  requests: number;
  latency: LatencySnapshot;
  failures: Record<FailureClass, number>;
  failed_by_cause: Record<string, number>;
  errors: number;
}

/** One window from the parts of several (the fleet's worker threads over the same interval). Pure. */
export function mergeWindowParts(parts: readonly FleetStatsWindowParts[]): FleetStatsWindowParts {
  const latency = new LatencyHistogram();
  const failures = zeroFailures();
  const causes: Record<string, number> = {};
  let requests = 0;
  let errors = 0;
  for (const p of parts) {
    latency.merge(LatencyHistogram.from(p.latency));
    for (const k of Object.keys(failures) as FailureClass[]) failures[k] += p.failures[k];
    for (const [cause, n] of Object.entries(p.failed_by_cause)) causes[cause] = (causes[cause] ?? 0) + n;
    requests += p.requests;
    errors += p.errors;
  }
  return {
    from_ms: Math.min(...parts.map((p) => p.from_ms)),
    until_ms: Math.max(...parts.map((p) => p.until_ms)),
    requests,
    latency: latency.snapshot(),
    failures,
    failed_by_cause: causes,
    errors,
  };
}

export function summarizeWindow(parts: FleetStatsWindowParts): FleetStatsWindow {
  const { latency, ...rest } = parts;
  return { ...rest, latency_ms: LatencyHistogram.from(latency).summary() };
}
