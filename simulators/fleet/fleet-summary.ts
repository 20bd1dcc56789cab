/**
 * The fleet's summary at its stop: what every charger's agent did (summed over the chargers), what the fleet
 * measured of their requests, and what it cost the process. `runFleet` builds it; `fleet-merge.ts` merges
 * those of worker threads.
 */
import { OUTBOX_KINDS, type OutboxKind } from '../../agent/core/outbox-policy.js';
import type { FailureClass } from './failure-classes.js';
import type { ChargerState, FleetProgress } from './fleet-charger.js';
import type { LogCounts } from './fleet-logger.js';
import type { FleetStats } from './fleet-stats.js';
import type { LatencySnapshot, LatencySummary } from './latency-histogram.js';

export interface FleetSummary {
  seed: number;
  count: number;
  started: number;
  registered: number;
  online_at_stop: number;
  /** Seconds from the fleet's start until every charger was registered; null if some never were. */
  all_registered_after_s: number | null;
  duration_s: number;
  ramp_s: number;
  store: 'memory' | 'disk';
  mix: {
    all_charging: boolean;
    connectors: number;
    twin_connector_chargers: number;
    v2g_chargers: number;
    outage_chargers: number;
  };
  requests: {
    total: number;
    per_second: number;
    by_kind: Record<string, { requests: number; ok: number; failed: number }>;
    /** Every request but long polls, from dispatch to the last byte of the answer. */
    latency_ms: LatencySummary;
    /**
     * The same, for requests started from 10 s after the ramp (`STEADY_AFTER_RAMP_MS`) until the stop began
     * (the shutdown's flush and offline heartbeats of every charger at once are not steady state).
     */
    steady_latency_ms: LatencySummary;
    latency_by_kind_ms: Record<string, LatencySummary>;
  };
  /** Worker threads that ran the chargers; 1: the calling thread alone. */
  workers: number;
  /** What counts as an error: see fleet-stats.ts and docs/simulators.md. */
  errors: number;
  error_kinds: Record<string, number>;
  error_samples: Record<string, string>;
  retried: { rate_limited: number; transient_recovered: number };
  failures: Record<FailureClass, number>;
  telemetry: { produced: number; delivered: number; queued: number; refused: number };
  outbox: {
    enqueued: Record<OutboxKind, number>;
    delivered: Record<OutboxKind, number>;
    refused: Record<OutboxKind, number>;
    backlog_items: number;
    chargers_with_backlog: number;
  };
  commands: {
    /** `<command>:<final status>` → count, as acknowledged by the platform. */
    outcomes: Record<string, number>;
    /** Operator issue → final report acknowledged. */
    latency_ms: LatencySummary;
  };
  agent_logs: { warn: number; error: number; fatal: number };
  /** TLS connections the fleet opened: the shared request pool (bounded) and the long-poll pool. */
  connections: { request_pool_size: number; opened_for_requests: number; opened_for_polls: number };
  memory: {
    rss_start_bytes: number;
    rss_peak_bytes: number;
    rss_at_stop_bytes: number;
    heap_used_at_stop_bytes: number;
    /** (RSS before the stop − RSS before the first charger) / chargers started. */
    per_charger_bytes: number;
  };
  cpu: { user_s: number; system_s: number; cores_used: number };
  /**
   * How late the fleet's own event loop ran (10 ms resolution). Request latencies include it: when its p99
   * approaches theirs, the simulator — not the platform — is the bottleneck.
   */
  event_loop_delay_ms: { p50: number; p99: number; max: number };
}

export interface FleetHistograms {
  latency: LatencySnapshot;
  steady: LatencySnapshot;
  byKind: Record<string, LatencySnapshot>;
  command: LatencySnapshot;
}

/** The run's latency histograms so far (mergeable across worker threads). */
export function fleetHistograms(stats: FleetStats): FleetHistograms {
  return {
    latency: stats.latency.snapshot(),
    steady: stats.steadyLatency.snapshot(),
    byKind: Object.fromEntries([...stats.latencyByKind].map(([k, h]) => [k, h.snapshot()])),
    command: stats.commandLatency.snapshot(),
  };
}

const sumKinds = (into: Record<OutboxKind, number>, from: Record<OutboxKind, number>) => {
  for (const k of OUTBOX_KINDS) into[k] += from[k];
};
const zeroKinds = (): Record<OutboxKind, number> => ({
  telemetry: 0,
  event: 0,
  charging_record: 0,
  command_status: 0,
  firmware_status: 0,
});

/** The chargers' totals at the stop: their mix, and what their agents produced, delivered and left queued. */
export interface ChargerTotals {
  mix: Omit<FleetSummary['mix'], 'all_charging' | 'outage_chargers'>;
  telemetry: FleetSummary['telemetry'];
  outbox: FleetSummary['outbox'];
}

/**
 * Sums every charger's agent stats once they stopped. Counts as errors a charger never registered and, for
 * in-memory stores, one whose outbox still held items (`backlog_lost`).
 */
export function chargerTotals(
  states: readonly ChargerState[],
  stats: FleetStats,
  inMemory: boolean,
): ChargerTotals {
  const telemetry = { produced: 0, delivered: 0, queued: 0, refused: 0 };
  const outbox = {
    enqueued: zeroKinds(),
    delivered: zeroKinds(),
    refused: zeroKinds(),
    backlog_items: 0,
    chargers_with_backlog: 0,
  };
  const mix = { connectors: 0, twin_connector_chargers: 0, v2g_chargers: 0 };
  for (const s of states) {
    mix.connectors += s.plan.connectors;
    if (s.plan.connectors > 1) mix.twin_connector_chargers += 1;
    if (s.plan.v2g) mix.v2g_chargers += 1;
    const runtime = s.runtime;
    if (!runtime) continue;
    if (!s.deviceId) stats.error('not_registered', s.plan.sn);
    const agentStats = runtime.stats();
    telemetry.produced += agentStats.uplink.telemetryProduced;
    telemetry.delivered += agentStats.uplink.delivered.telemetry;
    telemetry.queued += agentStats.uplink.telemetryQueued;
    telemetry.refused += agentStats.uplink.refused.telemetry;
    sumKinds(outbox.enqueued, agentStats.enqueued);
    sumKinds(outbox.delivered, agentStats.uplink.delivered);
    sumKinds(outbox.refused, agentStats.uplink.refused);
    outbox.backlog_items += agentStats.outbox.items;
    if (agentStats.outbox.items > 0) {
      outbox.chargers_with_backlog += 1;
      if (inMemory)
        stats.error('backlog_lost', `${s.plan.sn}: ${agentStats.outbox.items} items left in its outbox`);
    }
  }
  return { mix, telemetry, outbox };
}

/** What the summary reads besides the stats and the chargers' totals. */
export interface SummaryReadings {
  seed: number;
  count: number;
  progress: FleetProgress;
  onlineAtStop: number;
  startedAt: number;
  wallS: number;
  rampMs: number;
  inMemory: boolean;
  allCharging: boolean;
  outageChargers: number;
  logCounts: LogCounts;
  connections: FleetSummary['connections'];
  memory: FleetSummary['memory'];
  cpu: NodeJS.CpuUsage;
  loopDelay: FleetSummary['event_loop_delay_ms'];
}

function requestsSummary(stats: FleetStats, wallS: number): FleetSummary['requests'] {
  return {
    total: stats.totalRequests,
    per_second: wallS > 0 ? Math.round(stats.totalRequests / wallS) : 0,
    by_kind: stats.requestsByKind(),
    latency_ms: stats.latency.summary(),
    steady_latency_ms: stats.steadyLatency.summary(),
    latency_by_kind_ms: stats.latencyByKindSummary(),
  };
}

function cpuSummary(cpu: NodeJS.CpuUsage, wallS: number): FleetSummary['cpu'] {
  return {
    user_s: Math.round(cpu.user / 1e4) / 100,
    system_s: Math.round(cpu.system / 1e4) / 100,
    cores_used: wallS > 0 ? Math.round(((cpu.user + cpu.system) / 1e6 / wallS) * 100) / 100 : 0,
  };
}

/** One thread's summary (`workers: 1`). */
export function summarizeFleet(r: SummaryReadings, stats: FleetStats, totals: ChargerTotals): FleetSummary {
  const { progress } = r;
  return {
    seed: r.seed,
    count: r.count,
    started: progress.started,
    registered: progress.registered,
    online_at_stop: r.onlineAtStop,
    all_registered_after_s:
      progress.allRegisteredAt === undefined
        ? null
        : Math.round((progress.allRegisteredAt - r.startedAt) / 100) / 10,
    duration_s: Math.round(r.wallS * 10) / 10,
    ramp_s: r.rampMs / 1000,
    store: r.inMemory ? 'memory' : 'disk',
    mix: { all_charging: r.allCharging, ...totals.mix, outage_chargers: r.outageChargers },
    requests: requestsSummary(stats, r.wallS),
    errors: stats.errorCount,
    workers: 1,
    error_kinds: Object.fromEntries(stats.errors),
    error_samples: Object.fromEntries([...stats.errorSamples].filter(([key]) => stats.errors.has(key))),
    retried: { rate_limited: stats.retriedRateLimited, transient_recovered: stats.recoveredTransient },
    failures: { ...stats.failures },
    telemetry: totals.telemetry,
    outbox: totals.outbox,
    commands: {
      outcomes: Object.fromEntries([...stats.commandOutcomes].sort(([a], [b]) => a.localeCompare(b))),
      latency_ms: stats.commandLatency.summary(),
    },
    agent_logs: { ...r.logCounts },
    connections: r.connections,
    memory: r.memory,
    cpu: cpuSummary(r.cpu, r.wallS),
    event_loop_delay_ms: r.loopDelay,
  };
}
