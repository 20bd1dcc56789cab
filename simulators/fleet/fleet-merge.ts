/**
 * The whole fleet's live stats and summary from those of its worker threads (`fleet-workers.ts`): counts are
 * summed, latency histograms merged; process-wide figures (RSS, CPU time) are the main thread's readings, passed
 * in; event-loop delay is the worst worker's. Pure.
 */
import type { FleetLiveStats } from './fleet-live.js';
import type { FleetHistograms, FleetSummary } from './fleet-summary.js';
import { LatencyHistogram, type LatencySnapshot } from './latency-histogram.js';

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
  const awaiting = present(lives.map((l) => l.awaiting_recovery));
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
    ...(awaiting !== undefined ? { awaiting_recovery: awaiting } : {}),
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

type SummaryParts = ReadonlyArray<{ summary: FleetSummary; histograms: FleetHistograms }>;

function mergeRequests(parts: SummaryParts, durationS: number): FleetSummary['requests'] {
  const s = parts.map((p) => p.summary);
  const h = parts.map((p) => p.histograms);
  const byKind: Record<string, LatencySnapshot[]> = {};
  for (const hist of h)
    for (const [kind, snap] of Object.entries(hist.byKind)) byKind[kind] = [...(byKind[kind] ?? []), snap];
  const total = sum(s.map((x) => x.requests.total));
  return {
    total,
    per_second: durationS > 0 ? Math.round(total / durationS) : 0,
    by_kind: addKindCounts(s.map((x) => x.requests.by_kind)),
    latency_ms: mergeHistograms(h.map((x) => x.latency)).summary(),
    steady_latency_ms: mergeHistograms(h.map((x) => x.steady)).summary(),
    latency_by_kind_ms: Object.fromEntries(
      Object.entries(byKind).map(([k, snaps]) => [k, mergeHistograms(snaps).summary()]),
    ),
  };
}

function mergeOutboxes(s: readonly FleetSummary[]): FleetSummary['outbox'] {
  return {
    enqueued: addCounts(s.map((x) => x.outbox.enqueued)),
    delivered: addCounts(s.map((x) => x.outbox.delivered)),
    refused: addCounts(s.map((x) => x.outbox.refused)),
    backlog_items: sum(s.map((x) => x.outbox.backlog_items)),
    chargers_with_backlog: sum(s.map((x) => x.outbox.chargers_with_backlog)),
  };
}

/** Memory, CPU and event-loop delay: the main thread's readings, and the worst worker's delay. */
function mergeProcess(
  s: readonly FleetSummary[],
  whole: WholeFleetReadings,
  started: number,
): Pick<FleetSummary, 'memory' | 'cpu' | 'event_loop_delay_ms'> {
  const cpuS = (whole.cpu.user + whole.cpu.system) / 1e6;
  return {
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

/** One summary of the whole fleet from every worker's summary and histograms. Pure. */
export function mergeSummaries(parts: SummaryParts, whole: WholeFleetReadings): FleetSummary {
  const s = parts.map((p) => p.summary);
  const registeredAfter = s.map((x) => x.all_registered_after_s);
  const samples: Record<string, string> = {};
  for (const x of s) for (const [k, v] of Object.entries(x.error_samples)) samples[k] ??= v;
  const started = sum(s.map((x) => x.started));
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
    requests: mergeRequests(parts, whole.durationS),
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
    outbox: mergeOutboxes(s),
    commands: {
      outcomes: Object.fromEntries(
        Object.entries(addCounts(s.map((x) => x.commands.outcomes))).sort(([a], [b]) => a.localeCompare(b)),
      ),
      latency_ms: mergeHistograms(parts.map((x) => x.histograms.command)).summary(),
    },
    agent_logs: addCounts(s.map((x) => x.agent_logs)),
    connections: addCounts(s.map((x) => x.connections)),
    ...mergeProcess(s, whole, started),
  };
}
