/**
 * What a person watching `charger-sim fleet` sees: one live line on the terminal, refreshed every second, and
 * a summary at the end.
 */
import type { FleetLiveStats } from './fleet-live.js';
import type { FleetSummary } from './fleet-summary.js';
import type { FleetHandle } from './fleet-workers.js';
import type { LatencySummary } from './latency-histogram.js';

const MIB = 1024 * 1024;

function clock(seconds: number): string {
  const s = Math.floor(seconds);
  const hh = Math.floor(s / 3600);
  const mm = Math.floor((s % 3600) / 60);
  const ss = s % 60;
  const two = (n: number) => String(n).padStart(2, '0');
  return hh > 0 ? `${hh}:${two(mm)}:${two(ss)}` : `${two(mm)}:${two(ss)}`;
}

export function formatProgress(live: FleetLiveStats): string {
  const parts = [
    clock(live.elapsed_s),
    `registered ${live.registered}/${live.count}`,
    `online ${live.online}${live.out > 0 ? ` (${live.out} cut off)` : ''}`,
    `${live.requests_per_s} req/s`,
    `errors ${live.errors}`,
    `retried ${live.retried}`,
    `rtt p50 ${live.latency_ms.p50} ms p99 ${live.latency_ms.p99} ms`,
  ];
  if (live.command_latency_ms.count > 0) parts.push(`cmd p50 ${live.command_latency_ms.p50} ms`);
  parts.push(`loop lag p99 ${live.event_loop_delay_ms.p99} ms`);
  if (live.outbox_backlog !== undefined) parts.push(`backlog ${live.outbox_backlog}`);
  parts.push(`rss ${Math.round(live.rss_bytes / MIB)} MiB`);
  return parts.join(' · ');
}

/**
 * Redraws the live line on `stream` (a TTY) every second; the outbox backlog, which queries every store, every
 * fifth second. Returns the function that clears the line and stops.
 */
export function startProgressLine(fleet: Pick<FleetHandle, 'live'>, stream: NodeJS.WriteStream): () => void {
  let tick = 0;
  let backlog: number | undefined;
  const draw = () => {
    tick += 1;
    const live = fleet.live({ backlog: tick % 5 === 0 });
    if (live.outbox_backlog !== undefined) backlog = live.outbox_backlog;
    const line = formatProgress({ ...live, ...(backlog !== undefined ? { outbox_backlog: backlog } : {}) });
    const width = stream.columns && stream.columns > 20 ? stream.columns - 1 : 160;
    stream.write(`\r\x1b[2K${line.slice(0, width)}`);
  };
  const timer = setInterval(draw, 1_000);
  return () => {
    clearInterval(timer);
    stream.write('\r\x1b[2K');
  };
}

const latency = (l: LatencySummary) =>
  l.count === 0 ? 'none' : `p50 ${l.p50_ms} ms, p90 ${l.p90_ms} ms, p99 ${l.p99_ms} ms, max ${l.max_ms} ms`;

export function formatSummary(s: FleetSummary): string {
  const lines: string[] = [];
  const kv = (key: string, value: string) => lines.push(`  ${key.padEnd(20)} ${value}`);
  lines.push(`charger-sim fleet: ${s.errors === 0 ? 'no errors' : `${s.errors} error(s)`}`);
  kv(
    'chargers',
    `${s.count} (seed ${s.seed}; ${s.store} stores${s.workers > 1 ? `; ${s.workers} worker threads` : ''})`,
  );
  kv(
    'mix',
    `${s.mix.connectors} connectors, ${s.mix.twin_connector_chargers} twin, ${s.mix.v2g_chargers} V2G, ` +
      `${s.mix.outage_chargers} with a network outage${s.mix.all_charging ? ', all charging' : ''}`,
  );
  kv(
    'registered',
    `${s.registered}/${s.count}` +
      (s.all_registered_after_s !== null ? ` (all after ${s.all_registered_after_s} s)` : '') +
      `; online at stop ${s.online_at_stop}`,
  );
  kv('duration', `${s.duration_s} s (ramp ${s.ramp_s} s)`);
  kv('requests', `${s.requests.total} (${s.requests.per_second}/s)`);
  for (const [kind, c] of Object.entries(s.requests.by_kind)) {
    kv(`  ${kind}`, `${c.requests}${c.failed > 0 ? ` (${c.failed} failed)` : ''}`);
  }
  kv('latency', latency(s.requests.latency_ms));
  kv('latency (steady)', latency(s.requests.steady_latency_ms));
  kv('errors', String(s.errors));
  for (const [kind, n] of Object.entries(s.error_kinds)) {
    const sample = s.error_samples[kind];
    kv(`  ${kind}`, `${n}${sample ? ` — ${sample}` : ''}`);
  }
  kv(
    'retried',
    `${s.retried.rate_limited} rate-limited, ${s.retried.transient_recovered} transient (recovered); ` +
      `${s.failures.outage} failed by simulated outages`,
  );
  kv(
    'telemetry',
    `${s.telemetry.produced} produced, ${s.telemetry.delivered} delivered, ${s.telemetry.queued} waited in an outbox`,
  );
  kv(
    'outbox',
    `${s.outbox.enqueued.charging_record} charging records, ${s.outbox.enqueued.command_status} command statuses, ` +
      `${s.outbox.enqueued.event} events; backlog left ${s.outbox.backlog_items} (${s.outbox.chargers_with_backlog} chargers)`,
  );
  const outcomes = Object.entries(s.commands.outcomes)
    .map(([k, n]) => `${k} ${n}`)
    .join(', ');
  kv('commands', outcomes === '' ? 'none' : outcomes);
  if (s.commands.latency_ms.count > 0) kv('command latency', latency(s.commands.latency_ms));
  kv(
    'memory',
    `RSS ${Math.round(s.memory.rss_at_stop_bytes / MIB)} MiB (peak ${Math.round(s.memory.rss_peak_bytes / MIB)} MiB, ` +
      `start ${Math.round(s.memory.rss_start_bytes / MIB)} MiB); ${Math.round(s.memory.per_charger_bytes / 1024)} KiB per charger`,
  );
  kv('cpu', `${s.cpu.user_s} s user, ${s.cpu.system_s} s system (${s.cpu.cores_used} cores)`);
  kv(
    'event-loop delay',
    `p50 ${s.event_loop_delay_ms.p50} ms, p99 ${s.event_loop_delay_ms.p99} ms, max ${s.event_loop_delay_ms.max} ms`,
  );
  return `${lines.join('\n')}\n`;
}
