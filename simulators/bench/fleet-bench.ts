#!/usr/bin/env node
import '../supported-node.js';
import { execFile } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { request } from 'undici';
import { runFleet } from '../fleet/fleet-runner.js';
import { runFleetInWorkers } from '../fleet/fleet-workers.js';
import { benchArgsOrExit, DATABASE_OPTION } from './bench-args.js';
import { type BenchStorage, withBenchDatabase } from './bench-database.js';
import { type BenchPlatform, call, startBenchPlatform } from './bench-platform.js';
import { type ProcessSample, sampleProcess } from './process-sampler.js';

/**
 * Fleet benchmarks against a real platform process (sandbox: open registration, chargers join its default site).
 *   fleet:   N chargers, every connector charging (telemetry every 5 s, heartbeats every 30 s), for `minutes`;
 *            errors, steady-state p99, requests per second, RSS of platform and simulator, memory per charger.
 *   command: 1,000 chargers connected; an operator stops connectors one after another; operator POST → the
 *            agent's `succeeded` report acknowledged, p50/p99 (measured by the fleet from each command's expiry).
 *   search:  the largest N that `fleet` sustains (zero errors, p99 < 100 ms), see `searchFleet`.
 * `--workers N` splits the fleet over N worker threads (`fleet-workers.ts`; default 1, the main thread).
 * Usage: node dist/simulators/bench/fleet-bench.js fleet --count 2000 --minutes 5
 *        node dist/simulators/bench/fleet-bench.js search --count 2000 --step 1000 --minutes 5 --runs 4
 *        node dist/simulators/bench/fleet-bench.js command --count 1000 --commands 300
 */
async function sandboxPlatform(database?: string): Promise<BenchPlatform> {
  return startBenchPlatform(['--env', 'sandbox'], database ? { database } : {});
}

/** A read/write client of the sandbox operator (the default site's owner), through the admin CLI. */
async function sandboxOperatorToken(p: BenchPlatform): Promise<string> {
  const ops = (await p.admin(['operators', 'list'])) as Array<{ operator_id: string; name: string }>;
  const sandbox = ops.find((o) => o.name === 'Sandbox Energy');
  if (!sandbox) throw new Error('no sandbox operator');
  const c = (await p.admin([
    'clients',
    'create',
    '--operator',
    sandbox.operator_id,
    '--scopes',
    'read,write',
  ])) as {
    client_id: string;
    client_secret: string;
  };
  const res = await call(p, 'POST', '/v1/operator/oauth/token', {
    json: { client_id: c.client_id, client_secret: c.client_secret, grant_type: 'client_credentials' },
  });
  return res.body.access_token as string;
}

const runScript = promisify(execFile);

const mib = (bytes: number) => Math.round((bytes / 1048576) * 10) / 10;

/** The fleet goal's criteria: zero errors and a steady p99 under this. */
export const FLEET_P99_GOAL_MS = 100;

/**
 * The platform's event-loop lag since the previous scrape of its metrics listener (prom-client resets its
 * histogram on every collect), ms: tells whether the platform or the simulator made a slow request slow.
 */
async function platformLoopLag(p: BenchPlatform): Promise<{ p99: number; max: number } | undefined> {
  const res = await request(p.metricsUrl);
  const text = await res.body.text();
  const read = (name: string) => {
    const m = new RegExp(
      `^charger_platform_process_nodejs_eventloop_lag_${name}_seconds(?:\\{[^}]*\\})? (\\S+)$`,
      'm',
    ).exec(text);
    return m ? Math.round(Number(m[1]) * 1e5) / 100 : undefined;
  };
  const p99 = read('p99');
  const max = read('max');
  return p99 === undefined || max === undefined ? undefined : { p99, max };
}

export async function measureFleet(
  count: number,
  minutes: number,
  connections?: number,
  workers = 1,
  storage: BenchStorage = {},
) {
  return withBenchDatabase(storage, (database) =>
    fleetOn(database.choice, database.backend, count, minutes, connections, workers),
  );
}

async function fleetOn(
  database: string,
  backend: string,
  count: number,
  minutes: number,
  connections: number | undefined,
  workers: number,
) {
  const platform = await sandboxPlatform(database);
  try {
    const rampMs = Math.max(10_000, count * 20);
    const options = {
      platformUrl: platform.url,
      ca: platform.ca,
      count,
      allCharging: true,
      outageShare: 0,
      rampMs,
      durationMs: rampMs + minutes * 60_000,
      ...(connections ? { connections } : {}),
      seed: 7,
    };
    const fleet = workers > 1 ? await runFleetInWorkers(options, workers) : await runFleet(options);
    const platformSamples: ProcessSample[] = [];
    let stopped = false;
    const sampler = (async () => {
      while (!stopped) {
        platformSamples.push(sampleProcess(platform.pid));
        await sleep(5_000);
      }
    })();
    // Scraped once the ramp is over (which resets the platform's lag histogram) and just before the stop.
    let platformLag: { p99: number; max: number } | undefined;
    const lagProbe = (async () => {
      await sleep(rampMs + 10_000);
      await platformLoopLag(platform);
      await sleep(Math.max(0, minutes * 60_000 - 15_000));
      platformLag = await platformLoopLag(platform);
    })().catch(() => undefined);
    const summary = await fleet.done;
    stopped = true;
    await sampler;
    await lagProbe;
    const first = platformSamples[Math.min(platformSamples.length - 1, Math.ceil(rampMs / 5_000))]!;
    const last = platformSamples[platformSamples.length - 1]!;
    const platformCores =
      Math.round(((last.cpuSeconds - first.cpuSeconds) / ((last.atMs - first.atMs) / 1000)) * 100) / 100;
    return {
      backend,
      count,
      minutes,
      workers,
      sustained: summary.errors === 0 && summary.requests.steady_latency_ms.p99_ms < FLEET_P99_GOAL_MS,
      registered: summary.registered,
      errors: summary.errors,
      error_kinds: summary.error_kinds,
      requests_per_s: summary.requests.per_second,
      steady_latency_ms: summary.requests.steady_latency_ms,
      telemetry: summary.telemetry,
      platform_rss_mib: { after_ramp: Math.round(first.rssMiB), end: Math.round(last.rssMiB) },
      platform_cpu_cores: platformCores,
      /** For sizing (issue 16): CPU-milliseconds the platform process spends per charger and minute at spec cadence. */
      platform_cpu_ms_per_charger_minute: Math.round(((platformCores * 60_000) / count) * 100) / 100,
      simulator_rss_mib: {
        peak: mib(summary.memory.rss_peak_bytes),
        at_stop: mib(summary.memory.rss_at_stop_bytes),
      },
      simulator_cpu_cores: summary.cpu.cores_used,
      memory_per_charger_kib: Math.round(summary.memory.per_charger_bytes / 1024),
      simulator_event_loop_delay_ms: summary.event_loop_delay_ms,
      connections: summary.connections,
      platform_event_loop_lag_ms: platformLag ?? null,
    };
  } finally {
    await platform.stop();
  }
}

export type FleetTrial = Awaited<ReturnType<typeof measureFleet>>;

/**
 * One `measureFleet` in a fresh process (this script, `fleet` mode): a process that already ran a fleet keeps
 * its grown heap, so its RSS before the next fleet's first charger says nothing about memory per charger.
 */
export async function measureFleetInChild(count: number, minutes: number, workers = 1): Promise<FleetTrial> {
  const { stdout } = await runScript(
    process.execPath,
    [
      ...process.execArgv,
      fileURLToPath(import.meta.url),
      'fleet',
      '--count',
      String(count),
      '--minutes',
      String(minutes),
      '--workers',
      String(workers),
    ],
    { maxBuffer: 16 * 1024 * 1024 },
  );
  return JSON.parse(stdout) as FleetTrial;
}

/**
 * The largest N sustained (`sustained`: zero errors, steady p99 under the goal) for `minutes`: from `start`,
 * up by `step` while it holds; after the first miss, once more halfway between; down by halves if `start`
 * already misses. At most `maxRuns` runs of `minutes` each (plus ramps), every trial reported.
 */
export async function searchFleet(
  start: number,
  step: number,
  minutes: number,
  maxRuns: number,
  workers = 1,
) {
  const trials: FleetTrial[] = [];
  let best: FleetTrial | undefined;
  let missed: number | undefined;
  let n = start;
  while (trials.length < maxRuns && n >= 50) {
    const trial = await measureFleetInChild(n, minutes, workers);
    trials.push(trial);
    process.stderr.write(
      `fleet ${n}: ${trial.sustained ? 'sustained' : 'missed'} (errors ${trial.errors}, p99 ${trial.steady_latency_ms.p99_ms} ms)\n`,
    );
    if (trial.sustained) {
      if (!best || n > best.count) best = trial;
      n = missed === undefined ? n + step : Math.round((n + missed) / 2 / 100) * 100;
    } else {
      missed = missed === undefined ? n : Math.min(missed, n);
      n = best ? Math.round((best.count + n) / 2 / 100) * 100 : Math.round(n / 2 / 100) * 100;
    }
    if (best && missed !== undefined && missed - best.count <= 250) break;
    if (trials.some((t) => t.count === n)) break;
  }
  return { largest_sustained: best?.count ?? 0, first_missed: missed ?? null, best: best ?? null, trials };
}

export async function measureCommandLatency(count: number, commands: number) {
  const platform = await sandboxPlatform();
  try {
    const fleet = await runFleet({
      platformUrl: platform.url,
      ca: platform.ca,
      count,
      outageShare: 0,
      seed: 11,
    });
    // Wait until every charger registered and the ramp settled.
    for (let i = 0; i < 600 && fleet.live().registered < count; i++) await sleep(1_000);
    await sleep(15_000);
    // Single-connector commands share a 60/min budget per client: enough clients for one command per 100 ms.
    const tokens = await Promise.all(
      Array.from({ length: Math.ceil(commands / 50) }, () => sandboxOperatorToken(platform)),
    );
    const chargers = fleet.chargers().filter((c) => c.deviceId);
    let refused = 0;
    for (let i = 0; i < commands; i++) {
      const c = chargers[(i * 7919) % chargers.length]!;
      const res = await call(platform, 'POST', `/v1/operator/devices/${c.deviceId}/connectors/1/stop`, {
        token: tokens[Math.floor(i / 50)]!,
        json: { reason: 'bench' },
      });
      if (res.status !== 200) refused++;
      await sleep(100);
    }
    await sleep(10_000);
    const summary = await fleet.stop();
    return {
      chargers: count,
      commands_sent: commands,
      refused,
      outcomes: summary.commands.outcomes,
      latency_ms: summary.commands.latency_ms,
      errors: summary.errors,
    };
  } finally {
    await platform.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { mode, values, given, texts } = benchArgsOrExit({
    usage: `Usage: node dist/simulators/bench/fleet-bench.js [fleet|search|command] [options]
  fleet    N chargers all charging for --minutes: errors, steady p99, requests/s, RSS (default mode)
  search   the largest N that fleet sustains (zero errors, p99 < ${FLEET_P99_GOAL_MS} ms), from --count by --step
  command  --count chargers connected; --commands operator stops, POST to the agent's succeeded report`,
    modes: ['fleet', 'search', 'command'],
    options: {
      count: { default: 2000, defaultText: '2000; command: 1000', integer: true, help: 'chargers' },
      minutes: { default: 5, help: 'fleet, search: minutes of steady load per run' },
      workers: { default: 1, integer: true, help: 'fleet, search: worker threads of the simulator' },
      connections: {
        default: 0,
        zero: true,
        integer: true,
        help: 'fleet: request pool size, 0 = the default',
      },
      step: { default: 1000, integer: true, help: 'search: chargers added or removed per run' },
      runs: { default: 4, integer: true, help: 'search: runs at most' },
      commands: { default: 300, integer: true, help: 'command: stops sent' },
    },
    texts: { database: DATABASE_OPTION },
  });
  const result =
    mode === 'command'
      ? await measureCommandLatency(given.has('count') ? values.count : 1000, values.commands)
      : mode === 'search'
        ? await searchFleet(values.count, values.step, values.minutes, values.runs, values.workers)
        : await measureFleet(values.count, values.minutes, values.connections || undefined, values.workers, {
            database: texts.database,
          });
  process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
}
