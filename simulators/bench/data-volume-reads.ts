import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, request } from 'undici';
import * as z from 'zod';
import {
  ChargingRecordsPage,
  DevicesPage,
  ENERGY_INTERVAL_MS,
  EnergySeries,
  envelopeOf,
  OperatorTokenResponse,
  RATE_LIMITS,
  TelemetryHistoryPage,
  toTimestamp,
} from '../../shared/index.js';
import { type BenchPlatform, summarize } from './bench-platform.js';
import { type Answer, chargerToken, expectOk, type Http, send } from './data-volume-http.js';
import { startCpuMeter } from './process-sampler.js';

/**
 * The data-volume benchmark's reads: each operator read timed end to end, with operator clients taken in turn
 * so that no read waits on the 60/min query budget, while probe chargers heart-beat on their own connections
 * (the latency that an operator read imposes on chargers).
 */
const DAY = 86_400_000;
const HOUR = 3_600_000;
const PROBE_EVERY_MS = 20;
const LOOP_RESOLUTION_MS = 5;
const round = (x: number) => Math.round(x * 100) / 100;

/** What the reads need to know of the loaded data. */
export interface ReadTarget {
  end_ms: number;
  records: number;
  operator_id: string;
  site_id: string;
  charger_id: string;
  charger_records: number;
  devices_total: number;
  probes: Array<{ device_id: string; secret: string }>;
}

export interface ProbeSample {
  sentMs: number;
  doneMs: number;
}

export interface HeartbeatProbe {
  samples: ProbeSample[];
  /** Ticks skipped because that charger's previous heartbeat had not been answered yet. */
  skipped(): number;
  refused(): number;
  errors(): number;
  stop(): Promise<void>;
}

/**
 * Every `everyMs` the next charger in turn sends a heartbeat on its own keep-alive connection, unless its last
 * one is still waiting (a charger never queues behind itself, so a slow answer is the platform's, not ours).
 * With 10 chargers every 20 ms each sends 5/s, within its 10/s realtime budget.
 */
export function startHeartbeatProbe(origin: string, ca: string, tokens: readonly string[], everyMs: number) {
  const clients = tokens.map(() => new Client(origin, { connect: { ca }, pipelining: 1 }));
  const busy = tokens.map(() => false);
  const samples: ProbeSample[] = [];
  let next = 0;
  let skipped = 0;
  let refused = 0;
  let errors = 0;
  const beat = async (i: number) => {
    busy[i] = true;
    const sentMs = performance.now();
    try {
      const res = await request(`${origin}/v1/device/heartbeat`, {
        method: 'POST',
        dispatcher: clients[i]!,
        headers: { authorization: `Bearer ${tokens[i]}`, 'content-type': 'application/json' },
        body: JSON.stringify({ timestamp: new Date().toISOString(), status: 'online', fault_code: 0 }),
      });
      await res.body.text();
      if (res.statusCode === 200) samples.push({ sentMs, doneMs: performance.now() });
      else if (res.statusCode === 429) refused++;
      else errors++;
    } catch {
      errors++;
    } finally {
      busy[i] = false;
    }
  };
  const timer = setInterval(() => {
    const i = next++ % tokens.length;
    if (busy[i]) skipped++;
    else void beat(i);
  }, everyMs);
  const probe: HeartbeatProbe = {
    samples,
    skipped: () => skipped,
    refused: () => refused,
    errors: () => errors,
    async stop() {
      clearInterval(timer);
      while (busy.some(Boolean)) await sleep(10);
      await Promise.all(clients.map((c) => c.close()));
    },
  };
  return probe;
}

/** The longest heartbeat under way at some moment of [fromMs, toMs]; undefined when none was. */
export function worstOverlapping(samples: readonly ProbeSample[], fromMs: number, toMs: number) {
  let worst: number | undefined;
  for (const s of samples)
    if (s.sentMs <= toMs && s.doneMs >= fromMs) worst = Math.max(worst ?? 0, s.doneMs - s.sentMs);
  return worst;
}

const CreatedClient = z.object({ client_id: z.string(), client_secret: z.string() });

/** `count` read-only clients of the operator (admin CLI) and their access tokens. */
export async function operatorReadTokens(p: BenchPlatform, http: Http, operatorId: string, count: number) {
  const tokens: string[] = [];
  for (let i = 0; i < count; i++) {
    const c = CreatedClient.parse(
      await p.admin(['clients', 'create', '--operator', operatorId, '--scopes', 'read']),
    );
    const body = JSON.stringify({
      client_id: c.client_id,
      client_secret: c.client_secret,
      grant_type: 'client_credentials',
    });
    const answer = await send(http, 'POST', '/v1/operator/oauth/token', { body });
    tokens.push(expectOk('operator token', answer, OperatorTokenResponse).access_token);
  }
  return tokens;
}

/**
 * Reads as the operator, each time with the client that has sent the fewest requests in the last minute (kept
 * a little under the query budget); waits when all are spent. A 429 anyway is waited out, retried and counted,
 * never returned as a read.
 */
export function operatorReader(http: Http, tokens: readonly string[]) {
  const { limit, windowSeconds } = RATE_LIMITS.operatorQuery;
  const windowMs = windowSeconds * 1000;
  const sent = tokens.map(() => [] as number[]);
  let refused = 0;
  return {
    refused: () => refused,
    async read(path: string): Promise<Answer> {
      for (;;) {
        const now = performance.now();
        for (const times of sent) while (times.length > 0 && times[0]! <= now - windowMs) times.shift();
        const i = sent.reduce((best, times, k) => (times.length < sent[best]!.length ? k : best), 0);
        const times = sent[i]!;
        if (times.length >= limit - 2) {
          await sleep(times[0]! + windowMs - now + 10);
          continue;
        }
        times.push(now);
        const answer = await send(http, 'GET', path, { token: tokens[i]! });
        if (answer.status !== 429) return answer;
        refused++;
        await sleep(answer.retryAfterMs);
      }
    },
  };
}

interface ReadSpec {
  name: string;
  path: string;
  /** A short account of the answer; throws when it is not what the load implies. */
  check(body: unknown): string;
}

function readSpecs(m: ReadTarget): ReadSpec[] {
  const end = Math.ceil(m.end_ms / HOUR) * HOUR;
  const energy = (
    name: string,
    target: Record<string, string>,
    days: number,
    interval: keyof typeof ENERGY_INTERVAL_MS,
  ) => ({
    name,
    path: `/v1/operator/energy?${new URLSearchParams({ ...target, start_time: toTimestamp(end - days * DAY), end_time: toTimestamp(end), interval })}`,
    check(body: unknown) {
      const items = envelopeOf(EnergySeries).parse(body).data.items;
      const buckets = (days * DAY) / ENERGY_INTERVAL_MS[interval];
      const samples = items.reduce((n, b) => n + b.samples, 0);
      if (items.length !== buckets || samples === 0)
        throw new Error(`${name}: ${items.length} buckets (expected ${buckets}), ${samples} samples`);
      const kwh = items.reduce((n, b) => n + b.energy_imported, 0);
      return `${buckets} buckets, ${Math.round(kwh)} kWh, ${samples} samples`;
    },
  });
  const records = (name: string, query: Record<string, string>, total?: number) => ({
    name,
    path: `/v1/operator/charging-records?${new URLSearchParams(query)}`,
    check(body: unknown) {
      const page = envelopeOf(ChargingRecordsPage).parse(body).data;
      const items = Math.max(0, Math.min(page.size, page.total - (page.page - 1) * page.size));
      if ((total !== undefined && page.total !== total) || page.items.length !== items)
        throw new Error(`${name}: total ${page.total} (expected ${total}), ${page.items.length} items`);
      return `total ${page.total}, ${page.items.length} items`;
    },
  });
  const site = { site_id: m.site_id };
  const device = { device_id: m.charger_id };
  /** The history read (DESIGN.md §21) of the site's first charger: a page of `resolution` over `days`. */
  const telemetry = (
    name: string,
    query: Record<string, string>,
    days: number,
    expected: (n: number) => boolean,
  ) => ({
    name,
    path: `/v1/operator/devices/${m.charger_id}/telemetry?${new URLSearchParams({ ...query, start_time: toTimestamp(end - days * DAY), end_time: toTimestamp(end) })}`,
    check(body: unknown) {
      const page = envelopeOf(TelemetryHistoryPage).parse(body).data;
      if (!expected(page.items.length)) throw new Error(`${name}: ${page.items.length} items`);
      return `${page.items.length} items${page.next_cursor ? ', more' : ''}`;
    },
  });
  return [
    // One connector's day raw: the first page (2,000 of its 17,280 samples).
    telemetry('telemetry 1 conn 1d raw', { connector_id: '1' }, 1, (n) => n === 2000),
    // A day at 1m, both connectors: the first page (2,000 of 2,880 buckets).
    telemetry('telemetry 1d 1m', { resolution: '1m' }, 1, (n) => n === 2000),
    // A week at 15m, both connectors: one page of 1,344 buckets.
    telemetry('telemetry 7d 15m', { resolution: '15m' }, 7, (n) => n >= 1300),
    energy('energy site 1d 15m', site, 1, '15m'),
    energy('energy site 1d 1h', site, 1, '1h'),
    energy('energy site 1d 1d', site, 1, '1d'),
    energy('energy site 7d 15m', site, 7, '15m'),
    energy('energy site 7d 1h', site, 7, '1h'),
    energy('energy site 7d 1d', site, 7, '1d'),
    energy('energy charger 7d 1h', device, 7, '1h'),
    records('records page 1', { size: '20' }, m.records),
    records('records last day', {
      start_time: toTimestamp(end - DAY),
      end_time: toTimestamp(end),
      size: '20',
    }),
    records('records one charger', { ...device, size: '20' }, m.charger_records),
    records('records page 5000', { page: '5000', size: '20' }, m.records),
    {
      name: 'devices page 1 (100)',
      path: '/v1/operator/devices?size=100',
      check(body: unknown) {
        const page = envelopeOf(DevicesPage).parse(body).data;
        if (page.total !== m.devices_total || page.items.length !== Math.min(100, m.devices_total))
          throw new Error(
            `devices: total ${page.total} (expected ${m.devices_total}), ${page.items.length} items`,
          );
        return `total ${page.total}, ${page.items.length} items`;
      },
    },
  ];
}

/** Every read `repeats` times, a quarter second apart: its time, its window and its answer (checked later). */
async function timeReads(
  reader: ReturnType<typeof operatorReader>,
  specs: ReturnType<typeof readSpecs>,
  repeats: number,
) {
  const runs = specs.map(() => ({
    ms: [] as number[],
    windows: [] as Array<[number, number]>,
    bodies: [] as unknown[],
  }));
  for (let r = 0; r < repeats; r++) {
    for (const [k, spec] of specs.entries()) {
      const answer = await reader.read(spec.path);
      if (answer.status !== 200)
        throw new Error(`${spec.name}: HTTP ${answer.status} ${JSON.stringify(answer.body).slice(0, 300)}`);
      const run = runs[k]!;
      run.ms.push(answer.doneMs - answer.sentMs);
      run.windows.push([answer.sentMs, answer.doneMs]);
      // Checked once the probes are stopped: schema parsing here would delay their callbacks.
      run.bodies.push(answer.body);
      // Probes in between answer at idle speed again: each read's worst heartbeat is its own.
      await sleep(250);
    }
  }
  return runs;
}

export async function measureReads(p: BenchPlatform, m: ReadTarget, repeats: number) {
  const specs = readSpecs(m);
  // A connection of its own for the reads, opened (TLS) by the token requests before any read is timed.
  const http: Http = { origin: p.url, dispatcher: new Client(p.url, { connect: { ca: p.ca } }) };
  const clients = Math.ceil((specs.length * repeats) / 50) + 1;
  const reader = operatorReader(http, await operatorReadTokens(p, http, m.operator_id, clients));
  const probeTokens = await Promise.all(m.probes.map((c) => chargerToken(http, c.device_id, c.secret)));
  const probe = startHeartbeatProbe(p.url, p.ca, probeTokens, PROBE_EVERY_MS);
  await sleep(2_000); // the probes' connections open before the idle baseline
  const idle = { from: performance.now(), to: 0 };
  await sleep(5_000);
  idle.to = performance.now();
  // The bench's own event loop: a late callback would lengthen the probes' latencies, not the platform.
  const loopDelay = monitorEventLoopDelay({ resolution: LOOP_RESOLUTION_MS });
  loopDelay.enable();
  const cpu = startCpuMeter(p.pid);
  const runs = await timeReads(reader, specs, repeats);
  loopDelay.disable();
  const cores = cpu();
  await sleep(1_000);
  await probe.stop();
  await http.dispatcher.close();

  const latency = (s: ProbeSample) => s.doneMs - s.sentMs;
  const windows = runs.flatMap((r) => r.windows);
  const during = probe.samples.filter((s) => windows.some(([a, b]) => s.sentMs <= b && s.doneMs >= a));
  const reads = specs.map((spec, k) => {
    const run = runs[k]!;
    // A read shorter than the probes' period may overlap none: no heartbeat, nothing to blame on it.
    const worst = run.windows
      .map(([a, b]) => worstOverlapping(probe.samples, a, b))
      .filter((w) => w !== undefined);
    const ms = summarize(run.ms);
    const hb = summarize(worst);
    return {
      name: spec.name,
      path: spec.path,
      ms: { p50: ms.p50, max: ms.max },
      times_ms: run.ms.map(round),
      worst_heartbeat_ms: { p50: worst.length ? hb.p50 : null, max: worst.length ? hb.max : null },
      reads_with_heartbeats: worst.length,
      answer: run.bodies.map((body) => spec.check(body)).at(-1),
    };
  });
  return {
    reads,
    heartbeat_probe: {
      chargers: probeTokens.length,
      every_ms: PROBE_EVERY_MS,
      idle_ms: summarize(
        probe.samples.filter((s) => s.sentMs >= idle.from && s.sentMs <= idle.to).map(latency),
      ),
      during_reads_ms: summarize(during.map(latency)),
      skipped_busy: probe.skipped(),
      refused_429: probe.refused(),
      errors: probe.errors(),
    },
    bench_event_loop_delay_ms: {
      // Its samples include the timer's own period.
      p99: round(Math.max(0, loopDelay.percentile(99) / 1e6 - LOOP_RESOLUTION_MS)),
      max: round(Math.max(0, loopDelay.max / 1e6 - LOOP_RESOLUTION_MS)),
    },
    cpu_cores_during_reads: { platform: cores.target, bench: cores.self, others: cores.others },
    operator_clients: clients,
    operator_429s_waited_out: reader.refused(),
  };
}
