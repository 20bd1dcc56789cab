#!/usr/bin/env node
import '../supported-node.js';
import { type BareServer, registerLoadChargers, startBareServer } from './bare-baseline.js';
import { benchArgsOrExit, DATABASE_OPTION } from './bench-args.js';
import { type BenchDatabase, type BenchStorage, withBenchDatabase } from './bench-database.js';
import { startBenchPlatform } from './bench-platform.js';
import { type LoadRound, type Request, runLoad, summarizeLoad } from './load-generator.js';
import { sampleHostCpu, sampleProcess, stealPercent } from './process-sampler.js';

/**
 * Ingest benchmark: authenticated telemetry POSTs over HTTPS keep-alive at full speed from many chargers (so
 * that none exceeds its own 10/s limit), against the platform and, in the same run with the same generator and
 * certificate, against a bare node:https server answering the same request (the goal's baseline) and a bare
 * Fastify server doing the same (what the framework alone costs). Prints rps, p50/p99 and the ratios, and checks
 * that every accepted record was stored.
 *
 * The three are measured in rotating rounds (platform, bare, Fastify; bare, Fastify, platform; ...), so that a
 * machine whose speed drifts during the run (a shared host) weighs on all alike. The generator is autocannon (load-generator.ts);
 * the CPU each server and the generator used during their rounds is reported, so that a reader can see the bare
 * server driven to its own limit (about one core: node:https is single-threaded) rather than capped by the
 * generator. Each side's server CPU per request served is the issue-37 figure: it does not depend on which of
 * server and generator is the limit. `--rate` holds every side to the same requests per second, which shows what
 * a request costs at a fleet's pace rather than at saturation (fewer requests share each wake-up and commit).
 * Usage: npm run bench:ingest [-- --devices 2000 --connections 64 --seconds 15 --rounds 5 --rate N]
 */
export function measureIngest(
  DEVICES = 2000,
  CONNECTIONS = 64,
  SECONDS = 15,
  ROUNDS = 5,
  storage: BenchStorage = {},
  RATE?: number,
) {
  return withBenchDatabase(storage, (database) =>
    ingestOn(database, storage.keep === true, DEVICES, CONNECTIONS, SECONDS, ROUNDS, RATE),
  );
}

const BODY_TAIL =
  '","connector_id":1,"state":"charging","voltage":231.2,"current":31.9,"power":22.1,' +
  '"energy_delivered":12.345,"soc":57,"temperature":31.5}';

/**
 * The requests of the load. To the platform: round robin over the chargers (none over its own 10/s limit); each
 * record its own timestamp, since the platform ignores exact repeats. To the bare servers, which read and parse
 * the body but check nothing: one request of the same size serves.
 */
function ingestRequests(headers: Array<Record<string, string>>) {
  const devices = headers.map(() => ({ n: 0 }));
  const base = Date.now() - 86_400_000;
  const counts = { sent: 0 };
  const platformRequest = (request: Request): Request => {
    const i = counts.sent++ % headers.length;
    const d = devices[i]!;
    request.path = '/v1/device/telemetry';
    request.headers = headers[i]!;
    request.body = `{"timestamp":"${new Date(base + d.n++ * 1000).toISOString()}${BODY_TAIL}`;
    return request;
  };
  const bareRequest: Request = {
    path: '/v1/device/telemetry',
    headers: headers[0]!,
    body: `{"timestamp":"${new Date(base).toISOString()}${BODY_TAIL}`,
  };
  return { counts, platformRequest, bareRequest };
}

type Side = 'platform' | 'bare' | 'fastify';
const SIDES: Side[] = ['platform', 'bare', 'fastify'];

/** One round of load against a side, with the CPU its server and the generator used during it. */
function createRounds(
  targets: Record<Side, { origin: string; pid: number }>,
  connections: number,
  requests: ReturnType<typeof ingestRequests>,
  rate: number | undefined,
) {
  /** CPU seconds the server and the generator used during each side's measured rounds. */
  const zero = () => ({ server: 0, generator: 0 });
  const meter = { cpu: { platform: zero(), bare: zero(), fastify: zero() } };
  const round = async (which: Side, ms: number) => {
    const target = targets[which];
    const serverBefore = sampleProcess(target.pid);
    const generatorBefore = process.cpuUsage();
    const result = await runLoad({
      origin: target.origin,
      connections,
      durationMs: ms,
      requests: which === 'platform' ? requests.platformRequest : requests.bareRequest,
      ...(rate ? { rate } : {}),
    });
    const serverAfter = sampleProcess(target.pid);
    const generator = process.cpuUsage(generatorBefore);
    meter.cpu[which].server += serverAfter.cpuSeconds - serverBefore.cpuSeconds;
    meter.cpu[which].generator += (generator.user + generator.system) / 1e6;
    return result;
  };
  const resetCpu = () => {
    meter.cpu = { platform: zero(), bare: zero(), fastify: zero() };
  };
  return { round, resetCpu, meter };
}

/** Warm-up rounds (not counted, but stored), then `rounds` rotating rounds over `seconds`. */
async function measureRounds(rounder: ReturnType<typeof createRounds>, seconds: number, roundCount: number) {
  // Warm-up: connections, JIT, the platform's caches; not counted (but stored, and checked below).
  const warm = [];
  for (const which of SIDES) warm.push(await rounder.round(which, 2000));
  rounder.resetCpu();
  const rounds = { platform: [] as LoadRound[], bare: [] as LoadRound[], fastify: [] as LoadRound[] };
  const hostBefore = sampleHostCpu();
  const roundMs = (seconds * 1000) / roundCount;
  for (let r = 0; r < roundCount; r++) {
    // Each round starts one side later: every side runs first, second and last in turn.
    for (let k = 0; k < SIDES.length; k++) {
      const which = SIDES[(r + k) % SIDES.length]!;
      rounds[which].push(await rounder.round(which, roundMs));
    }
  }
  const steal = stealPercent(hostBefore, sampleHostCpu());
  return { warm, rounds, steal };
}

async function ingestOn(
  database: BenchDatabase,
  keep: boolean,
  DEVICES: number,
  CONNECTIONS: number,
  SECONDS: number,
  ROUNDS: number,
  RATE: number | undefined,
) {
  const platform = await startBenchPlatform([], { database: database.choice, keep });
  let bare: BareServer | undefined;
  let fastify: BareServer | undefined;
  try {
    // Chargers register over the API; tokens for the load.
    const requests = ingestRequests(await registerLoadChargers(platform, 'INGEST', DEVICES));
    bare = await startBareServer(platform, 'node');
    fastify = await startBareServer(platform, 'fastify');
    const targets = {
      platform: { origin: platform.url.replace('localhost', '127.0.0.1'), pid: platform.pid },
      bare: { origin: bare.origin, pid: bare.pid },
      fastify: { origin: fastify.origin, pid: fastify.pid },
    };
    const rounder = createRounds(targets, CONNECTIONS, requests, RATE);
    const { warm, rounds, steal } = await measureRounds(rounder, SECONDS, ROUNDS);
    const onPlatform = summarizeLoad(rounds.platform);
    const onBare = summarizeLoad(rounds.bare);
    const onFastify = summarizeLoad(rounds.fastify);
    const { cpu } = rounder.meter;
    const cores = (which: Side, part: 'server' | 'generator') =>
      Math.round((cpu[which][part] / rounds[which].reduce((s, r) => s + r.seconds, 0)) * 100) / 100;

    // Every acknowledged record must be in the database. autocannon ends a round by closing its connections, so
    // up to one request per connection per round was sent (and maybe stored) but never answered: stored lies
    // between the acknowledged and the sent.
    const stored = await database.telemetrySamples(platform.dataDir);
    const acknowledged = [warm[0]!, ...rounds.platform].reduce((n, r) => n + (r.statusCounts['200'] ?? 0), 0);
    const { sent } = requests.counts;
    const served = (which: Side) => rounds[which].reduce((n, r) => n + r.latencies.length, 0);
    const cpuMicros = (which: Side) => Math.round((cpu[which].server / served(which)) * 1e7) / 10;
    const result = {
      machine: `${process.platform} ${process.arch}, node ${process.version}`,
      backend: database.backend,
      devices: DEVICES,
      connections: CONNECTIONS,
      seconds: SECONDS,
      rounds: ROUNDS,
      /** Requests per second the generator held each side to (null: as fast as each answered). */
      rate: RATE ?? null,
      platform: onPlatform,
      bare_https: onBare,
      bare_fastify: onFastify,
      /** The goal's figure: the platform against node:https alone. */
      ratio: Math.round((onPlatform.rps / onBare.rps) * 1000) / 1000,
      /** Server CPU µs per request served (process CPU time over the side's rounds ÷ answers): does not depend
       * on whether the generator or the server is the limit. */
      cpu_us_per_request: {
        platform: cpuMicros('platform'),
        bare: cpuMicros('bare'),
        fastify: cpuMicros('fastify'),
      },
      /** The CPU figure: platform CPU per request ÷ bare node:https CPU per request (goal ≤ 1.6). */
      cpu_ratio: Math.round((cpuMicros('platform') / cpuMicros('bare')) * 100) / 100,
      /** Fastify alone against node:https alone: the ceiling of any Fastify application on this machine. */
      fastify_ratio: Math.round((onFastify.rps / onBare.rps) * 1000) / 1000,
      /** The platform against Fastify alone: what the platform's own work (auth, validation, storage) costs. */
      ratio_to_fastify: Math.round((onPlatform.rps / onFastify.rps) * 1000) / 1000,
      /** Each round's requests per second, in the order measured: how much the machine drifted. */
      /** Share of the machine's CPU the hypervisor gave to others during the rounds, %. */
      cpu_steal_percent: steal,
      /** CPU cores used during each side's rounds (clock ticks of 10 ms: ±0.02). */
      cpu_cores: {
        platform_server: cores('platform', 'server'),
        generator_against_platform: cores('platform', 'generator'),
        bare_server: cores('bare', 'server'),
        generator_against_bare: cores('bare', 'generator'),
        fastify_server: cores('fastify', 'server'),
        generator_against_fastify: cores('fastify', 'generator'),
      },
      rps_by_round: {
        platform: rounds.platform.map((r) => Math.round(r.latencies.length / r.seconds)),
        bare: rounds.bare.map((r) => Math.round(r.latencies.length / r.seconds)),
        fastify: rounds.fastify.map((r) => Math.round(r.latencies.length / r.seconds)),
      },
      sent,
      acknowledged,
      stored,
      all_stored: acknowledged <= stored && stored <= sent,
    };
    return result;
  } finally {
    bare?.stop();
    fastify?.stop();
    await platform.stop();
    if (keep) process.stderr.write(`data directory kept: ${platform.dataDir}\n`);
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values, texts, flags } = benchArgsOrExit({
    usage: `Usage: npm run bench:ingest [-- --devices 2000 --connections 64 --seconds 15 --rounds 5 --rate N]
  authenticated telemetry POSTs at full speed (or --rate requests/s), platform against bare node:https and bare
  Fastify, in rotating rounds`,
    options: {
      devices: { default: 2000, integer: true, help: 'chargers sending (none over its own rate limit)' },
      connections: { default: 64, integer: true, help: 'keep-alive connections of the load generator' },
      seconds: { default: 15, help: 'seconds of load for each side, split over the rounds' },
      rounds: { default: 5, integer: true, help: 'rotating rounds' },
      rate: {
        default: 0,
        integer: true,
        help: 'hold every side to this many requests/s (0: full speed): CPU per request at a fleet-like load',
      },
    },
    texts: { database: DATABASE_OPTION },
    flags: { keep: { help: 'keep the data directory (and the PostgreSQL database) to look at afterwards' } },
  });
  const { devices, connections, seconds, rounds, rate } = values;
  const storage = { database: texts.database, keep: flags.keep };
  const figures = await measureIngest(devices, connections, seconds, rounds, storage, rate || undefined);
  process.stdout.write(`${JSON.stringify(figures, null, 2)}\n`);
}
