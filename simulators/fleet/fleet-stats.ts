/**
 * What the fleet measures, and what counts as an error.
 *
 * Every request of every simulated charger passes the charger's link (`charger-link.ts`), which reports here:
 * its kind (from the path), its latency (from dispatch to the last byte of the answer) and how it ended.
 *
 * Classification of a failed request (`classifyFailure` in failure-classes.ts), from the agent's point of view:
 * - `outage`: the charger's simulated network outage failed it. Expected; never an error.
 * - `aborted`: the agent abandoned it itself (its long poll, when it stops), or the fleet closed the long-poll
 *   pool at its stop. Not a failure.
 * - `rate_limited`: 429. The agent waits the platform's `retry_after` and retries: counted as retried, not
 *   an error (with `strict`, an error).
 * - `transient`: no answer (refused, reset, TLS, timeout), 5xx, or 401 (the agent renews its token and
 *   retries). Counted as retried once the same charger later gets a 2xx for the same kind of request —
 *   the agent recovered — and as an error (`unrecovered:<kind>`) if it never does before the fleet stops.
 *   Kinds that do the same job recover each other (`RECOVERY_GROUP` in request-kinds.ts): single and batch
 *   telemetry; heartbeat and long poll (both fetch commands — and a long poll still waiting when the fleet
 *   stops never answers).
 *   With `strict`, every one is an error.
 * - `refused`: any other 4xx. The platform refused the request for good (the agent drops what it carried):
 *   always an error (`http_<status>:<kind>`).
 * Besides requests, errors are: an agent that ended fatally (`fatal`), could not start (`start_failed`) or
 * never registered (`not_registered`); an agent log line at level error or fatal (`agent_log_error`); and, for
 * in-memory stores, a charger whose outbox still held items when it stopped (`backlog_lost`: that data is gone;
 * with `--data-dir` it stays on disk for the next run and is only reported).
 *
 * Besides the totals, a window (`takeWindow`, stats-window.ts) counts the same since the previous window: soak runs sample it
 * every interval, and tests read what happened during one phase of a run (a platform restart).
 */
import { classifyFailure, type FailureClass, failureCauseOf, zeroFailures } from './failure-classes.js';
import { LatencyHistogram, type LatencySummary } from './latency-histogram.js';
import { RECOVERY_GROUP, REQUEST_KINDS, type RequestKind } from './request-kinds.js';
import { type FleetStatsWindow, type FleetStatsWindowParts, summarizeWindow } from './stats-window.js';

/** What the stats keep per charger (the link's state carries it). */
export interface ChargerTally {
  /** Transient failures not yet followed by a success of the same kind, by `RECOVERY_GROUP`. */
  pending?: Map<string, number>;
  /** Agent clock of the last successful heartbeat; undefined after a failed one. */
  heartbeatOkAt?: number;
}

interface KindCounters {
  requests: number;
  ok: number;
  failed: number;
}

export interface FleetStatsOptions {
  strict?: boolean;
  now?: () => number;
}

/** Seconds of request counts the per-second rate looks back over. */
const RATE_WINDOW_S = 5;

export class FleetStats {
  readonly strict: boolean;
  private readonly now: () => number;
  readonly kinds = Object.fromEntries(
    REQUEST_KINDS.map((k) => [k, { requests: 0, ok: 0, failed: 0 }]),
  ) as Record<RequestKind, KindCounters>;
  /** Every request except long polls (whose duration is their wait). */
  readonly latency = new LatencyHistogram();
  /** The same, for requests started once the ramp was over and before the stop (steady state). */
  readonly steadyLatency = new LatencyHistogram();
  readonly latencyByKind = new Map<RequestKind, LatencyHistogram>();
  /** Operator-issued command → the agent's final report acknowledged by the platform. */
  readonly commandLatency = new LatencyHistogram();
  readonly commandOutcomes = new Map<string, number>();
  readonly failures: Record<FailureClass, number> = zeroFailures();
  retriedRateLimited = 0;
  recoveredTransient = 0;
  /**
   * Set when the fleet's stop begins: a request that then fails with no answer was cut by the stop itself (its
   * charger's connections torn down mid-handshake), not by the platform, and counts as aborted.
   */
  stopping = false;
  readonly errors = new Map<string, number>();
  readonly errorSamples = new Map<string, string>();
  totalRequests = 0;
  /** Requests started in [steadyFromMs, steadyUntilMs) count toward `steadyLatency`. */
  steadyFromMs = Number.POSITIVE_INFINITY;
  steadyUntilMs = Number.POSITIVE_INFINITY;
  private readonly perSecond: Array<{ at: number; total: number }> = [];
  private window = {
    from: 0,
    requests: 0,
    latency: new LatencyHistogram(),
    failures: zeroFailures(),
    causes: new Map<string, number>(),
    errorsBefore: 0,
  };

  constructor(options: FleetStatsOptions = {}) {
    this.strict = options.strict ?? false;
    this.now = options.now ?? Date.now;
    this.window.from = this.now();
  }

  get errorCount(): number {
    let n = 0;
    for (const v of this.errors.values()) n += v;
    return n;
  }

  error(key: string, sample?: string, count = 1): void {
    if (count <= 0) return;
    this.errors.set(key, (this.errors.get(key) ?? 0) + count);
    if (sample !== undefined && !this.errorSamples.has(key)) this.errorSamples.set(key, sample.slice(0, 300));
  }

  requestSucceeded(tally: ChargerTally, kind: RequestKind, startedAt: number, endedAt: number): void {
    const counters = this.kinds[kind];
    counters.requests += 1;
    counters.ok += 1;
    this.totalRequests += 1;
    this.window.requests += 1;
    if (kind !== 'poll') {
      const ms = endedAt - startedAt;
      this.latency.record(ms);
      this.window.latency.record(ms);
      if (startedAt >= this.steadyFromMs && startedAt < this.steadyUntilMs) this.steadyLatency.record(ms);
      let byKind = this.latencyByKind.get(kind);
      if (!byKind) {
        byKind = new LatencyHistogram();
        this.latencyByKind.set(kind, byKind);
      }
      byKind.record(ms);
    }
    if (kind === 'heartbeat') tally.heartbeatOkAt = endedAt;
    const group = RECOVERY_GROUP[kind];
    const pending = tally.pending?.get(group);
    if (pending !== undefined) {
      this.recoveredTransient += pending;
      tally.pending!.delete(group);
      if (tally.pending!.size === 0) tally.pending = undefined;
    }
  }

  requestFailed(
    tally: ChargerTally,
    kind: RequestKind,
    failure: { status?: number; error?: unknown },
    out: boolean,
  ): FailureClass {
    const cls = this.stopping && failure.status === undefined ? 'aborted' : classifyFailure(failure, out);
    this.failures[cls] += 1;
    this.window.failures[cls] += 1;
    if (cls === 'aborted') return cls;
    const counters = this.kinds[kind];
    counters.requests += 1;
    counters.failed += 1;
    this.totalRequests += 1;
    this.window.requests += 1;
    const cause = failureCauseOf(failure);
    this.window.causes.set(cause, (this.window.causes.get(cause) ?? 0) + 1);
    if (kind === 'heartbeat') tally.heartbeatOkAt = undefined;
    const what =
      failure.status !== undefined ? `HTTP ${failure.status}` : String((failure.error as Error)?.message);
    switch (cls) {
      case 'outage':
        break;
      case 'refused':
        this.error(`http_${failure.status}:${kind}`, what);
        break;
      case 'rate_limited':
        if (this.strict) this.error(`http_429:${kind}`, what);
        else this.retriedRateLimited += 1;
        break;
      case 'transient':
        if (this.strict) this.error(`transient:${kind}`, what);
        else {
          const group = RECOVERY_GROUP[kind];
          tally.pending ??= new Map();
          tally.pending.set(group, (tally.pending.get(group) ?? 0) + 1);
          if (!this.errorSamples.has(`unrecovered:${group}`))
            this.errorSamples.set(`unrecovered:${group}`, what.slice(0, 300));
        }
        break;
    }
    return cls;
  }

  commandFinished(command: string, status: string, latencyMs: number | undefined): void {
    const key = `${command}:${status}`;
    this.commandOutcomes.set(key, (this.commandOutcomes.get(key) ?? 0) + 1);
    if (latencyMs !== undefined) this.commandLatency.record(latencyMs);
  }

  /** Called once a second: remembers the request total for the rate. */
  sample(): void {
    this.perSecond.push({ at: this.now(), total: this.totalRequests });
    while (this.perSecond.length > RATE_WINDOW_S + 1) this.perSecond.shift();
  }

  /** Requests per second over the last few seconds. */
  rate(): number {
    const first = this.perSecond[0];
    const last = this.perSecond[this.perSecond.length - 1];
    if (!first || !last || last.at <= first.at) return 0;
    return ((last.total - first.total) * 1000) / (last.at - first.at);
  }

  /** What happened since the previous call (or the start); the next window begins now. */
  takeWindow(): FleetStatsWindow {
    return summarizeWindow(this.takeWindowParts());
  }

  /** `takeWindow` with the latency histogram itself (mergeable). */
  takeWindowParts(): FleetStatsWindowParts {
    const w = this.window;
    const now = this.now();
    const errors = this.errorCount;
    this.window = {
      from: now,
      requests: 0,
      latency: new LatencyHistogram(),
      failures: zeroFailures(),
      causes: new Map(),
      errorsBefore: errors,
    };
    return {
      from_ms: w.from,
      until_ms: now,
      requests: w.requests,
      latency: w.latency.snapshot(),
      failures: w.failures,
      failed_by_cause: Object.fromEntries(w.causes),
      errors: errors - w.errorsBefore,
    };
  }

  /** At the end: transient failures the charger never recovered from become errors. */
  settle(tallies: Iterable<ChargerTally>): void {
    for (const tally of tallies) {
      if (!tally.pending) continue;
      for (const [group, n] of tally.pending) this.error(`unrecovered:${group}`, undefined, n);
      tally.pending = undefined;
    }
  }

  requestsByKind(): Record<string, { requests: number; ok: number; failed: number }> {
    const out: Record<string, KindCounters> = {};
    for (const k of REQUEST_KINDS) if (this.kinds[k].requests > 0) out[k] = { ...this.kinds[k] };
    return out;
  }

  latencyByKindSummary(): Record<string, LatencySummary> {
    const out: Record<string, LatencySummary> = {};
    for (const [k, h] of this.latencyByKind) out[k] = h.summary();
    return out;
  }
}
