#!/usr/bin/env node
import '../supported-node.js';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { registerLoadChargers } from './bare-baseline.js';
import { benchArgsOrExit, DATABASE_OPTION, REDIS_OPTION } from './bench-args.js';
import { withBenchDatabase } from './bench-database.js';
import {
  type BenchPlatform,
  benchClient,
  benchDevice,
  benchTenant,
  call,
  startBenchPlatform,
  summarize,
} from './bench-platform.js';
import { type LoadRound, type Request, runLoad, summarizeLoad } from './load-generator.js';
import { sampleProcess } from './process-sampler.js';

/**
 * Several instances (issue 16, DESIGN.md §13): 1, 2 and 3 platform processes on this machine over one
 * PostgreSQL database (a throw-away one on the `--database` server) and one Redis, each measured beside one
 * instance without Redis on the same database (the baseline: the ratio shows what coordination costs).
 *   ingest:  the same autocannon load (authenticated telemetry POSTs from many chargers), its connections and
 *            its chargers split evenly over the instances (a charger keeps its connection, and so its instance,
 *            as behind a TCP balancer); requests per second of them all together;
 *   wake-up: a charger's long poll parked on the last instance, the operator's stop sent to the first; time from
 *            sending the stop to the poll's answer (with one instance, both on it).
 * On 2 cores more instances cannot add throughput: the point is the overhead of sharing, not scaling.
 * Usage: npm run bench:instances [-- --database postgres://postgres@127.0.0.1:5432/postgres
 *          --redis redis://127.0.0.1:6379 --devices 2000 --connections 64 --seconds 10 --samples 100]
 */
export async function measureInstances(options: {
  database: string;
  redis: string;
  devices: number;
  connections: number;
  seconds: number;
  samples: number;
}) {
  return withBenchDatabase({ database: options.database }, async (database) => {
    const dataDir = await mkdtemp(join(tmpdir(), 'cp-bench-instances-'));
    try {
      const start = (n: number, redis: boolean) =>
        Promise.all(
          Array.from({ length: n }, (_, i) =>
            startBenchPlatform(redis ? ['--redis', options.redis, '--instance-id', `bench-${i + 1}`] : [], {
              database: database.choice,
              dataDir,
              keep: true,
            }),
          ),
        );
      // Chargers and a tenant once, on the database every run shares; tokens survive restarts (same key).
      const [first] = await start(1, false);
      const headers = await registerLoadChargers(first!, 'INST', options.devices);
      const tenant = await benchTenant(first!, 'Instances Bench');
      const pollers = await Promise.all(
        Array.from({ length: Math.ceil(options.samples / SAMPLES_PER_CHARGER) }, (_, i) =>
          benchDevice(first!, `INST-POLL-${i}`, tenant.site_id),
        ),
      );
      await first!.stop();

      const next = headers.map(() => 0);
      const runs: Array<Record<string, unknown>> = [];
      let baselineRps = 0;
      for (const [n, redis] of [
        [1, false],
        [1, true],
        [2, true],
        [3, true],
      ] as const) {
        const instances = await start(n, redis);
        process.stderr.write(`instances: ${n}${redis ? ' with redis' : ''}\n`);
        try {
          const loads = instances.map((_, i) => telemetryLoad(headers, next, i, instances.length));
          await ingest(instances, options.connections, 2_000, loads); // warm-up
          const measured = await ingest(instances, options.connections, options.seconds * 1000, loads);
          if (!redis) baselineRps = measured.rps;
          // Clients of their own: the instances share each client's budget of stops a minute through Redis.
          const operatorTokens = await Promise.all(
            Array.from({ length: Math.ceil(options.samples / SAMPLES_PER_CLIENT) }, () =>
              benchClient(instances[0]!, tenant.operator_id),
            ),
          );
          const wake = await wakeUps(instances, pollers, operatorTokens, options.samples);
          runs.push({
            instances: n,
            redis,
            ingest: { ...measured, ratio_to_one_without_redis: round3(measured.rps / baselineRps) },
            wake_up_ms: wake,
          });
        } finally {
          for (const p of instances) await p.stop();
        }
      }
      return {
        machine: `${process.platform} ${process.arch}, node ${process.version}`,
        backend: database.backend,
        devices: options.devices,
        connections: options.connections,
        seconds: options.seconds,
        runs,
      };
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });
}

const round3 = (x: number) => Math.round(x * 1000) / 1000;
/**
 * A charger polls at most 10 times a second (and a run of samples takes a second or so): 10 samples each. A
 * client sends at most 60 stops a minute: 50 each.
 */
const SAMPLES_PER_CHARGER = 10;
const SAMPLES_PER_CLIENT = 50;

const BASE_MS = Date.now() - 86_400_000;
const TAIL = '","connector_id":1,"state":"charging","voltage":231.2,"current":31.9,"power":22.1}';

/**
 * The load of instance `k` of `n`: chargers k, k + n, k + 2n, ... in turn (none over its own rate limit), each
 * request a new record (`next` counts each charger's records across every run).
 */
function telemetryLoad(headers: ReadonlyArray<Record<string, string>>, next: number[], k: number, n: number) {
  const mine = headers.map((_, i) => i).filter((i) => i % n === k);
  let sent = 0;
  return (request: Request): Request => {
    const i = mine[sent++ % mine.length]!;
    request.path = '/v1/device/telemetry';
    request.headers = headers[i]!;
    request.body = `{"timestamp":"${new Date(BASE_MS + next[i]!++ * 1000).toISOString()}${TAIL}`;
    return request;
  };
}

/** The load's connections split over the instances, all at once; the instances' CPU summed. */
async function ingest(
  instances: readonly BenchPlatform[],
  connections: number,
  durationMs: number,
  loads: ReadonlyArray<(request: Request) => Request>,
) {
  const before = instances.map((p) => sampleProcess(p.pid).cpuSeconds);
  const rounds: LoadRound[] = await Promise.all(
    instances.map((p, i) =>
      runLoad({
        origin: p.url.replace('localhost', '127.0.0.1'),
        connections:
          Math.floor(connections / instances.length) + (i < connections % instances.length ? 1 : 0),
        durationMs,
        requests: loads[i]!,
      }),
    ),
  );
  const cpu = instances.reduce((s, p, i) => s + sampleProcess(p.pid).cpuSeconds - before[i]!, 0);
  const perInstance = rounds.map((r) => summarizeLoad([r]));
  const requests = perInstance.reduce((s, r) => s + r.requests, 0);
  const seconds = Math.max(...perInstance.map((r) => r.seconds));
  return {
    rps: Math.round(requests / seconds),
    errors: perInstance.reduce((s, r) => s + r.errors, 0),
    rps_by_instance: perInstance.map((r) => r.rps),
    p99_ms_by_instance: perInstance.map((r) => r.p99_ms),
    platform_cores: Math.round((cpu / seconds) * 100) / 100,
  };
}

/** Stop sent to the first instance → the poll parked on the last one answered, ms. */
async function wakeUps(
  instances: readonly BenchPlatform[],
  pollers: ReadonlyArray<{ deviceId: string; token: string }>,
  operatorTokens: readonly string[],
  samples: number,
) {
  const sender = instances[0]!;
  const holder = instances[instances.length - 1]!;
  const times: number[] = [];
  for (let i = 0; i < samples; i++) {
    const dev = pollers[Math.floor(i / SAMPLES_PER_CHARGER)]!;
    const polledAt = performance.now();
    const poll = call(holder, 'GET', '/v1/device/commands?wait=30', { token: dev.token }).then((r) => {
      if (process.env.BENCH_DEBUG)
        process.stderr.write(`poll ${i} answered after ${Math.round(performance.now() - polledAt)} ms\n`);
      if (r.body?.data?.commands?.length !== 1) return { at: Number.NaN, commandId: '' };
      return { at: performance.now(), commandId: r.body.data.commands[0].command_id as string };
    });
    await sleep(15); // let the poll park
    const sentAt = performance.now();
    const stop = await call(sender, 'POST', `/v1/operator/devices/${dev.deviceId}/connectors/1/stop`, {
      token: operatorTokens[Math.floor(i / SAMPLES_PER_CLIENT)]!,
      json: {},
    });
    if (stop.status !== 200) throw new Error(`stop: ${stop.status} ${JSON.stringify(stop.body)}`);
    const answered = await poll;
    if (Number.isNaN(answered.at)) {
      const relayLines = async (p: BenchPlatform) => {
        const res = await request(p.metricsUrl);
        return (await res.body.text())
          .split('\n')
          .filter((l) => /relay_messages|redis_up/.test(l) && !l.startsWith('#'));
      };
      throw new Error(
        `poll ${i} on ${instances.length} instance(s) not woken: sender ${JSON.stringify(await relayLines(sender))} holder ${JSON.stringify(await relayLines(holder))}`,
      );
    }
    times.push(answered.at - sentAt);
    const report = await call(holder, 'POST', `/v1/device/commands/${answered.commandId}/status`, {
      token: dev.token,
      json: { status: 'succeeded' },
    });
    if (report.status !== 200) throw new Error(`report: ${report.status}`);
  }
  return summarize(times);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values, texts } = benchArgsOrExit({
    usage: `Usage: npm run bench:instances [-- --database URL --redis URL --devices 2000 --connections 64 --seconds 10 --samples 100]
  1, 2 and 3 instances over one PostgreSQL database and one Redis: ingest and cross-instance wake-up`,
    options: {
      devices: { default: 2000, integer: true, help: 'chargers sending (none over its own rate limit)' },
      connections: { default: 64, integer: true, help: 'keep-alive connections, split over the instances' },
      seconds: { default: 10, help: 'seconds of ingest load per configuration' },
      samples: { default: 100, integer: true, help: 'wake-ups measured per configuration' },
    },
    texts: {
      database: DATABASE_OPTION,
      redis: REDIS_OPTION,
    },
  });
  const figures = await measureInstances({
    database: texts.database ?? 'postgres://postgres@127.0.0.1:5432/postgres',
    redis: texts.redis ?? 'redis://127.0.0.1:6379',
    devices: values.devices,
    connections: values.connections,
    seconds: values.seconds,
    samples: values.samples,
  });
  process.stdout.write(`${JSON.stringify(figures, null, 2)}\n`);
}
