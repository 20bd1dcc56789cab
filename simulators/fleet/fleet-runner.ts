/**
 * The fleet: N simulated chargers in one process, each running the REAL agent (`startAgent`) on the simulated
 * HAL, against a real platform. `runFleet(options)` starts it and returns at once with a handle that gives
 * live stats and, on `stop()` (or when `durationMs` is over), a summary. The `charger-sim fleet` command is a
 * thin shell over it; benchmarks drive it directly.
 *
 * Shared by all chargers, so that a charger costs little more than its agent's state:
 * - one undici connection pool (keep-alive, TLS with the given CA, as many connections as requests in flight:
 *   every charger keeps a long poll open, as a real one does); each charger sees it through a thin
 *   interceptor that observes and can break its link (`charger-link.ts`);
 * - one logger (silent by default; errors are counted either way);
 * - one timer wheel for the simulated hardware's physics ticks (`tick-wheel.ts`);
 * - the store: in memory unless `dataDir` is given (then each charger has `DIR/<sn>/` like a real one).
 *
 * Stopping is the agent's own graceful shutdown for every charger (flush the outbox, offline heartbeat), after
 * the simulated network outages are lifted, a bounded number of chargers at a time.
 */
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { createSecureContext } from 'node:tls';
import pino, { type DestinationStream, type Level, type Logger } from 'pino';
import { Agent, Client } from 'undici';
import { OUTBOX_KINDS, type OutboxKind } from '../../agent/core/outbox-policy.js';
import { DEFAULT_TELEMETRY_INTERVALS } from '../../agent/core/telemetry.js';
import { type AgentRuntime, type AgentTuning, startAgent } from '../../agent/runtime/agent-runtime.js';
import { createSeededRandom, randomSeed } from '../seeded-random.js';
import { createSimulatedHal, type SimulatedHal, type SimulatedHalOptions } from '../simulated-hal.js';
import { type AttestedConnections, createAttestedConnections } from './attested-connections.js';
import { checkEnrolmentCa, type EnrolmentCa } from './charger-certificates.js';
import { type ChargerLink, type ChargerLinkState, createChargerLink } from './charger-link.js';
import {
  type ChargerPlan,
  FLEET_PACES,
  type FleetPace,
  halOptionsFor,
  type OutageWindowOptions,
  paceHalOptions,
  planFleet,
  tirelessVehicle,
} from './fleet-mix.js';
import {
  type FailureClass,
  FleetStats,
  type FleetStatsWindow,
  type FleetStatsWindowParts,
} from './fleet-stats.js';
import type { LatencySnapshot, LatencySummary } from './latency-histogram.js';
import { createTickWheel } from './tick-wheel.js';

export type FleetLogLevel = Level | 'silent';

/**
 * Default ramp: 20 ms per charger (50 a second). The platform and the fleet on one 2-core machine register
 * about 100 chargers a second flat out (1,000 in ~11 s); half that leaves room for the chargers already running.
 */
export const DEFAULT_RAMP_MS_PER_CHARGER = 20;

/** "Steady" latency counts requests started this long after the last charger started (connections, JIT warm). */
export const STEADY_AFTER_RAMP_MS = 10_000;

export interface FleetOptions {
  /** `https://HOST:PORT` of the platform. */
  platformUrl: string;
  /** PEM of the CA that signed the platform's certificate; the system CAs otherwise. */
  ca?: string;
  /**
   * Attested registration (DESIGN.md §18): each charger gets a certificate for its serial signed by this CA
   * (`charger-certificates.ts`) and presents it on every connection, through connections of its own.
   */
  enrolmentCa?: EnrolmentCa;
  count: number;
  /** Stop by itself after this long; otherwise run until `stop()`. */
  durationMs?: number;
  /** Keep each charger's store on disk in `DIR/<sn>/` (like real chargers) instead of in memory. */
  dataDir?: string;
  /** Seeds the mix, the serial numbers (`SIM-<seed>-<n>`) and every simulated charger. Random when absent. */
  seed?: number;
  /** Start the chargers evenly over this long; default 20 ms per charger (50 chargers a second). */
  rampMs?: number;
  /** Every connector has a car that charges continuously (load benchmarks). */
  allCharging?: boolean;
  /** How fast vehicles come and go (`fleet-mix.ts`); default `realistic`. `sandbox`: within minutes. */
  pace?: FleetPace;
  /** Share of V2G chargers, 0..1; default 0.2. */
  v2gShare?: number;
  /** Share of chargers that lose their network once during the run, 0..1; default 0.05. */
  outageShare?: number;
  /** When those outages happen (offsets from the fleet's start); see `outageWindowFor`. */
  outageWindow?: OutageWindowOptions;
  /** Telemetry interval while charging, ms; default 5000 (DESIGN.md §7). Also the agent's sampling tick. */
  telemetryIntervalMs?: number;
  /** Heartbeat period, ms; default 30000. */
  heartbeatIntervalMs?: number;
  /** Agent log lines at this level and above go to `logDestination` (stderr); default silent. */
  logLevel?: FleetLogLevel;
  logDestination?: DestinationStream;
  /** Count retried 429s and recovered transient failures as errors too. */
  strict?: boolean;
  /**
   * Connections of the pool every request but the long polls shares; default count / 4, between 16 and 64.
   * (Long polls have a pool of their own: one connection per charger, as real chargers hold.)
   */
  connections?: number;
  /** How many chargers shut down at once when the fleet stops; default 200. */
  stopConcurrency?: number;
  /** Agent tuning beyond the flags (tests); wins over the options above. */
  tuning?: Partial<AgentTuning>;
  /** Simulated-HAL options for every charger (tests); win over the mix. */
  hal?: Partial<SimulatedHalOptions>;
  /**
   * Run only the chargers whose index ≡ `index` (mod `of`) of the fleet planned for `count`: one worker thread's
   * share (`fleet-workers.ts`). Their plans, serials and start times are those of the whole fleet.
   */
  slice?: { index: number; of: number };
  /** The whole fleet's start (ms since the epoch), so that the ramps of every slice line up; default now. */
  startedAt?: number;
}

export interface FleetCharger {
  readonly index: number;
  readonly sn: string;
  readonly connectors: number;
  readonly v2g: boolean;
  readonly ratedPowerKw: number;
  /** Offsets from the fleet's start, ms. */
  readonly outage?: { startMs: number; endMs: number };
  /** Known once registered. */
  readonly deviceId: string | undefined;
  readonly out: boolean;
  readonly hal: SimulatedHal | undefined;
  /** The running agent (still readable after the fleet stopped: `runtime.stats()`). */
  readonly runtime: AgentRuntime | undefined;
}

export interface FleetLiveStats {
  elapsed_s: number;
  count: number;
  started: number;
  registered: number;
  online: number;
  out: number;
  requests: number;
  requests_per_s: number;
  errors: number;
  retried: number;
  outage_failures: number;
  latency_ms: { p50: number; p99: number };
  /** The fleet's own event-loop delay over the last few seconds. */
  event_loop_delay_ms: { p99: number; max: number };
  command_latency_ms: { count: number; p50: number; p99: number };
  telemetry: { produced: number; delivered: number };
  /** Summed over every outbox; only when asked for (it queries every charger's store). */
  outbox_backlog?: number;
  /** This thread's V8 heap in use and active handles (summed over worker threads); only when asked for. */
  heap_used_bytes?: number;
  active_handles?: number;
  rss_bytes: number;
  per_charger_bytes: number;
}

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

export interface Fleet {
  readonly seed: number;
  readonly startedAt: number;
  readonly options: Readonly<FleetOptions>;
  chargers(): readonly FleetCharger[];
  live(opts?: { backlog?: boolean; resources?: boolean }): FleetLiveStats;
  /** Requests, latency, failures and errors since the previous call (or the start): soak samples, test phases. */
  takeWindow(): FleetStatsWindow;
  /** `takeWindow` with its latency histogram (mergeable across worker threads). */
  takeWindowParts(): FleetStatsWindowParts;
  /** The run's latency histograms so far (mergeable across worker threads). */
  histograms(): FleetHistograms;
  /** Only the two the live stats need (a worker sends them every second). */
  liveHistograms(): Pick<FleetHistograms, 'latency' | 'command'>;
  /** Stops every charger gracefully; the same summary however often it is called. */
  stop(): Promise<FleetSummary>;
  /** Settles with the summary once the fleet stopped (by `stop()` or at the end of `durationMs`). */
  readonly done: Promise<FleetSummary>;
}

export interface FleetHistograms {
  latency: LatencySnapshot;
  steady: LatencySnapshot;
  byKind: Record<string, LatencySnapshot>;
  command: LatencySnapshot;
}

interface ChargerState extends ChargerLinkState {
  plan: ChargerPlan;
  /** Offset from the fleet's start at which its simulated outage ends, once it began. */
  outageEndsAt?: number;
  link?: ChargerLink;
  hal?: SimulatedHal;
  runtime?: AgentRuntime;
  deviceId?: string;
  starting?: Promise<void>;
  stopping?: Promise<void>;
}

/**
 * count / 4, between 16 and 64. Measured (docs/simulators.md): a larger pool is mostly idle, its idle
 * connections are closed by the keep-alive timeouts and reopened in bursts of TLS handshakes after every stall
 * (at 3,000 chargers, a 512 pool: p99 0.5–1.7 s); 64 connections carried 3,000 chargers (780 requests/s) with
 * none reopened (p99 43 ms). `connections` tunes it.
 */
export function defaultConnections(count: number): number {
  return Math.min(64, Math.max(16, Math.ceil(count / 4)));
}

export class FleetOptionsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'FleetOptionsError';
  }
}

const share = (name: string, value: number | undefined, fallback: number): number => {
  const v = value ?? fallback;
  if (!Number.isFinite(v) || v < 0 || v > 1) throw new FleetOptionsError(`${name} must be between 0 and 1`);
  return v;
};

export function checkOptions(options: FleetOptions): void {
  let url: URL;
  try {
    url = new URL(options.platformUrl);
  } catch {
    throw new FleetOptionsError(`--platform-url ${options.platformUrl} is not a URL`);
  }
  if (url.protocol !== 'https:')
    throw new FleetOptionsError('--platform-url must be https:// (the platform serves HTTPS only)');
  if (!Number.isInteger(options.count) || options.count < 1)
    throw new FleetOptionsError('--count must be a whole number ≥ 1');
  if (options.enrolmentCa) {
    try {
      checkEnrolmentCa(options.enrolmentCa);
    } catch (error) {
      throw new FleetOptionsError(`--enrolment-ca-cert, --enrolment-ca-key: ${(error as Error).message}`);
    }
  }
  for (const [name, value] of [
    ['--duration', options.durationMs],
    ['--ramp', options.rampMs],
  ] as const) {
    if (value !== undefined && (!Number.isFinite(value) || value < 0))
      throw new FleetOptionsError(`${name} must be ≥ 0 seconds`);
  }
  for (const [name, value] of [
    ['--telemetry-interval', options.telemetryIntervalMs],
    ['--heartbeat-interval', options.heartbeatIntervalMs],
  ] as const) {
    if (value !== undefined && (!Number.isFinite(value) || value < 100))
      throw new FleetOptionsError(`${name} must be at least 0.1 seconds`);
  }
  if (options.seed !== undefined && (!Number.isInteger(options.seed) || options.seed < 0))
    throw new FleetOptionsError('--seed must be a whole number ≥ 0');
  share('--v2g-share', options.v2gShare, 0.2);
  share('--outage-share', options.outageShare, 0.05);
  if (options.pace !== undefined && !FLEET_PACES.includes(options.pace))
    throw new FleetOptionsError(`--pace must be one of ${FLEET_PACES.join(', ')}`);
}

/**
 * The whole fleet's plan for `seed` (every slice's too): who has how many connectors, which are V2G, when each
 * starts and loses its network. Also what `charger-sim fleet` reports to a parent process (`parent-link.ts`).
 */
export function fleetPlan(options: FleetOptions, seed: number): ChargerPlan[] {
  const v2gShare = share('--v2g-share', options.v2gShare, 0.2);
  return planFleet({
    count: options.count,
    seed,
    rampMs: options.rampMs ?? options.count * DEFAULT_RAMP_MS_PER_CHARGER,
    v2gShare,
    // The sandbox's pace promises a V2G charger to try discharge on, however few chargers it runs.
    minV2g: options.pace === 'sandbox' && v2gShare > 0 ? 1 : 0,
    outageShare: share('--outage-share', options.outageShare, 0.05),
    ...(options.durationMs !== undefined ? { durationMs: options.durationMs } : {}),
    ...(options.outageWindow ? { outageWindow: options.outageWindow } : {}),
  });
}

interface LogCounts {
  warn: number;
  error: number;
  fatal: number;
}

/**
 * One logger for every agent. It always listens at warn level so that error lines are counted (an agent
 * logging an error is an error of the run), and writes only what `level` asks for.
 */
function createFleetLogger(
  level: FleetLogLevel,
  destination: DestinationStream | undefined,
  counts: LogCounts,
  onError: (message: string) => void,
): Logger {
  const values = pino.levels.values;
  const emitFrom = level === 'silent' ? Number.POSITIVE_INFINITY : values[level]!;
  const listen = level === 'silent' || values[level]! > values.warn! ? 'warn' : level;
  return pino(
    {
      level: listen,
      base: { name: 'charger-sim' },
      timestamp: pino.stdTimeFunctions.isoTime,
      hooks: {
        logMethod(args, method, levelValue) {
          if (levelValue === values.warn) counts.warn += 1;
          else if (levelValue === values.error) {
            counts.error += 1;
            const message = args.find((a) => typeof a === 'string');
            onError(typeof message === 'string' ? message : 'agent logged an error');
          } else if (levelValue === values.fatal) counts.fatal += 1;
          if (levelValue >= emitFrom) method.apply(this, args);
        },
      },
    },
    destination ?? pino.destination({ fd: 2, sync: true }),
  );
}

/**
 * `stop()` runs `shutDown` once however often it is called, and returns its summary; `done` settles with it.
 * `stopped()` tells whether the stop has begun.
 */
export function stopOnce(shutDown: () => Promise<FleetSummary>) {
  let resolveDone: (summary: FleetSummary) => void = () => {};
  const done = new Promise<FleetSummary>((resolve) => {
    resolveDone = resolve;
  });
  let stopping: Promise<FleetSummary> | undefined;
  const stop = (): Promise<FleetSummary> => {
    stopping ??= shutDown().then((summary) => {
      resolveDone(summary);
      return summary;
    });
    return stopping;
  };
  return { stop, done, stopped: () => stopping !== undefined };
}

/** Runs `fn` over `items` with at most `limit` at a time. */
async function eachLimited<T>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const item = items[next++]!;
      await fn(item);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

/** Nanoseconds (perf_hooks histograms) → ms, one decimal; 0 without samples. */
const ms = (ns: number) => (Number.isFinite(ns) ? Math.round(ns / 1e5) / 10 : 0);

const sumKinds = (into: Record<OutboxKind, number>, from: Record<OutboxKind, number>) => {
  for (const k of OUTBOX_KINDS) into[k] += from[k];
};
const zeroKinds = (): Record<OutboxKind, number> => ({
  telemetry: 0,
  event: 0,
  charging_record: 0,
  command_status: 0,
});

export async function runFleet(options: FleetOptions): Promise<Fleet> {
  checkOptions(options);
  const seed = options.seed ?? randomSeed();
  const rampMs = options.rampMs ?? options.count * DEFAULT_RAMP_MS_PER_CHARGER;
  const allCharging = options.allCharging ?? false;
  const slice = options.slice;
  const plans = fleetPlan(options, seed).filter((plan) => !slice || plan.index % slice.of === slice.index);
  const halOverrides = { ...paceHalOptions(options.pace ?? 'realistic'), ...options.hal };
  /** The chargers this call runs: all of them, or its slice. */
  const count = plans.length;

  const telemetryMs = options.telemetryIntervalMs ?? DEFAULT_TELEMETRY_INTERVALS.activeMs;
  const tuning: Partial<AgentTuning> = {
    telemetry: { activeMs: telemetryMs, idleMs: Math.max(telemetryMs, DEFAULT_TELEMETRY_INTERVALS.idleMs) },
    sampleTickMs: telemetryMs,
    ...(options.heartbeatIntervalMs !== undefined
      ? { heartbeatIntervalMs: options.heartbeatIntervalMs }
      : {}),
    ...options.tuning,
  };

  const stats = new FleetStats({ strict: options.strict ?? false });
  const logCounts: LogCounts = { warn: 0, error: 0, fatal: 0 };
  const logLevel = options.logLevel ?? 'silent';
  const logger = createFleetLogger(logLevel, options.logDestination, logCounts, (message) =>
    stats.error('agent_log_error', message),
  );
  // One TLS context for every connection: building one per connection (what `connect: { ca }` does) parses
  // the CA again each time and costs milliseconds of CPU per connection.
  const connect = { secureContext: createSecureContext(options.ca !== undefined ? { ca: options.ca } : {}) };
  // Short requests share a bounded keep-alive pool: under load, a pool that opens a connection for every
  // request that finds none idle spends its CPU on TLS handshakes. Long polls hold their connection for the
  // whole wait, so they get a pool of their own with as many connections as chargers polling.
  const pool = new Agent({
    connect,
    keepAliveTimeout: 60_000,
    keepAliveMaxTimeout: 600_000,
    connections: options.connections ?? defaultConnections(count),
    pipelining: 1,
  });
  const opened = { requests: 0, polls: 0 };
  pool.on('connect', () => {
    opened.requests += 1;
  });
  // Each charger's long poll has a connection of its own (a `Client`, made at its first poll): in one pool of
  // thousands of connections, undici would look through them all for a free one on every poll.
  const pollConnections = new Set<Client>();
  const platformOrigin = new URL(options.platformUrl).origin;
  const pollConnection = (): Client => {
    const client = new Client(platformOrigin, {
      connect,
      keepAliveTimeout: 60_000,
      keepAliveMaxTimeout: 600_000,
      pipelining: 1,
    });
    client.on('connect', () => {
      opened.polls += 1;
    });
    pollConnections.add(client);
    return client;
  };
  // With an enrolment CA, each charger's connections carry its own client certificate.
  const attested =
    options.enrolmentCa &&
    createAttestedConnections({
      enrolmentCa: options.enrolmentCa,
      platformCa: options.ca,
      origin: platformOrigin,
      onRequestConnect: () => {
        opened.requests += 1;
      },
      onPollConnection: (client) => {
        client.on('connect', () => {
          opened.polls += 1;
        });
        pollConnections.add(client);
      },
    });
  const wheel = createTickWheel();
  const states: ChargerState[] = plans.map((plan) => ({ plan, out: false }));
  const outageStates = states.filter((s) => s.plan.outage);

  const loopDelay = monitorEventLoopDelay({ resolution: 10 });
  loopDelay.enable();
  const recentLoopDelay = monitorEventLoopDelay({ resolution: 10 });
  recentLoopDelay.enable();
  let recentLoopDelayAt = Date.now();
  const cpuStart = process.cpuUsage();
  const rssStart = process.memoryUsage().rss;
  let rssPeak = rssStart;
  const startedAt = options.startedAt ?? Date.now();
  stats.steadyFromMs = startedAt + rampMs + STEADY_AFTER_RAMP_MS;
  let started = 0;
  let registered = 0;
  let allRegisteredAt: number | undefined;
  let stopRequested = false;

  async function launch(state: ChargerState): Promise<void> {
    const { plan } = state;
    started += 1;
    let own: Awaited<ReturnType<AttestedConnections['forCharger']>> | undefined;
    try {
      own = await attested?.forCharger(plan.sn);
    } catch (error) {
      stats.error('start_failed', `${plan.sn}: no charger certificate: ${(error as Error).message}`);
      return;
    }
    const link = createChargerLink(own?.pool ?? pool, own?.poll ?? pollConnection, state, stats);
    state.link = link;
    const hal = createSimulatedHal({
      // The physics tick at the sampling cadence: readings and commands bring the simulation up to date
      // themselves, so a finer tick would only cost CPU (vehicles arriving, leaving or faulting are noticed
      // within one tick).
      tickIntervalMs: telemetryMs,
      ...halOptionsFor(plan, { allCharging, overrides: halOverrides }),
      timers: wheel,
    });
    state.hal = hal;
    if (allCharging) {
      const random = createSeededRandom(plan.seed ^ 0x2545f491);
      for (let c = 1; c <= plan.connectors; c++) hal.plugIn(c, tirelessVehicle(random));
    }
    let runtime: AgentRuntime;
    try {
      runtime = await startAgent({
        config: {
          dataDir: path.join(options.dataDir ?? 'memory', plan.sn),
          platformUrl: options.platformUrl.replace(/\/+$/, ''),
          sn: plan.sn,
        },
        hal,
        logger: logLevel === 'silent' ? logger : logger.child({ sn: plan.sn }),
        dispatcher: link.dispatcher,
        random: createSeededRandom(plan.seed ^ 0x5bd1e995),
        tuning,
        memoryStore: options.dataDir === undefined,
      });
    } catch (error) {
      stats.error('start_failed', `${plan.sn}: ${(error as Error).message}`);
      await hal.close();
      return;
    }
    state.runtime = runtime;
    state.lookupCommand = (commandId) =>
      runtime.store.db.open ? runtime.store.journalGet(commandId) : undefined;
    void runtime.registered.then((identity) => {
      if (!identity) return;
      state.deviceId = identity.deviceId;
      registered += 1;
      if (registered === count) allRegisteredAt = Date.now();
    });
    void runtime.fatal.then((error) => {
      stats.error('fatal', `${plan.sn}: ${error.message}`);
      void stopCharger(state);
    });
  }

  function stopCharger(state: ChargerState): Promise<void> {
    state.stopping ??= (async () => {
      await state.starting;
      await state.runtime?.stop().catch((error: unknown) => {
        stats.error('stop_failed', `${state.plan.sn}: ${(error as Error).message}`);
      });
    })();
    return state.stopping;
  }

  // The launcher: starts every charger whose time has come, then sleeps until the next one is due.
  let nextToLaunch = 0;
  let launchTimer: NodeJS.Timeout | undefined;
  // One charger per turn of the event loop: starting one opens its store and builds its agent synchronously
  // (milliseconds), and a late timer must not start a hundred in one block while answers wait to be read.
  function launchDue(): void {
    launchTimer = undefined;
    if (stopRequested) return;
    const next = states[nextToLaunch];
    if (!next) return;
    const wait = next.plan.startAtMs - (Date.now() - startedAt);
    if (wait > 0) {
      launchTimer = setTimeout(launchDue, wait);
      return;
    }
    nextToLaunch += 1;
    next.starting = launch(next).catch((error: unknown) => {
      stats.error('start_failed', `${next.plan.sn}: ${(error as Error).message}`);
    });
    launchTimer = setTimeout(launchDue, 0);
  }

  // Once a second: outages begin and end, the request rate is sampled, the peak RSS is noted.
  const everySecond = setInterval(() => {
    const elapsed = Date.now() - startedAt;
    for (const state of outageStates) {
      const { startMs, endMs } = state.plan.outage!;
      // Only a registered charger loses its network: a registration whose answer is lost cannot be repeated
      // (the platform answers 409 to the same serial number), and that is not what this simulates. One that
      // registers after its outage was due loses it from then on, for as long.
      if (state.outageEndsAt === undefined) {
        if (state.deviceId === undefined || elapsed < startMs || !state.link) continue;
        state.outageEndsAt = elapsed + (endMs - startMs);
        state.link.setOut(true);
      } else if (state.out && elapsed >= state.outageEndsAt) {
        state.link?.setOut(false);
      }
    }
    stats.sample();
    const rss = process.memoryUsage().rss;
    if (rss > rssPeak) rssPeak = rss;
  }, 1_000);

  const online = () => {
    const now = Date.now();
    const window = 3 * (tuning.heartbeatIntervalMs ?? 30_000) + 5_000;
    let n = 0;
    for (const s of states)
      if (!s.out && s.heartbeatOkAt !== undefined && now - s.heartbeatOkAt < window) n += 1;
    return n;
  };

  /**
   * Telemetry totals are summed over every charger only when the backlog is asked for (every few seconds): a
   * worker reports its live stats every second, and its thousands of chargers need not be walked each time.
   */
  let telemetryTotals = { produced: 0, delivered: 0 };
  function live(opts: { backlog?: boolean; resources?: boolean } = {}): FleetLiveStats {
    let backlog = 0;
    let out = 0;
    for (const s of outageStates) if (s.out) out += 1;
    if (opts.backlog) {
      let produced = 0;
      let delivered = 0;
      for (const s of states) {
        if (!s.runtime) continue;
        const { uplink, outbox } = s.runtime.stats();
        produced += uplink.telemetryProduced;
        delivered += uplink.delivered.telemetry;
        backlog += outbox.items;
      }
      telemetryTotals = { produced, delivered };
    }
    const rss = process.memoryUsage.rss();
    if (rss > rssPeak) rssPeak = rss;
    const eld = { p99: ms(recentLoopDelay.percentile(99)), max: ms(recentLoopDelay.max) };
    if (Date.now() - recentLoopDelayAt >= 5_000) {
      recentLoopDelay.reset();
      recentLoopDelayAt = Date.now();
    }
    return {
      elapsed_s: Math.round((Date.now() - startedAt) / 100) / 10,
      count,
      started,
      registered,
      online: online(),
      out,
      requests: stats.totalRequests,
      requests_per_s: Math.round(stats.rate()),
      errors: stats.errorCount,
      retried: stats.retriedRateLimited + stats.recoveredTransient,
      outage_failures: stats.failures.outage,
      latency_ms: {
        p50: Math.round(stats.latency.percentile(0.5) * 10) / 10,
        p99: Math.round(stats.latency.percentile(0.99) * 10) / 10,
      },
      event_loop_delay_ms: eld,
      command_latency_ms: {
        count: stats.commandLatency.count,
        p50: Math.round(stats.commandLatency.percentile(0.5)),
        p99: Math.round(stats.commandLatency.percentile(0.99)),
      },
      telemetry: telemetryTotals,
      ...(opts.backlog ? { outbox_backlog: backlog } : {}),
      ...(opts.resources
        ? {
            heap_used_bytes: process.memoryUsage().heapUsed,
            active_handles: process.getActiveResourcesInfo().length,
          }
        : {}),
      rss_bytes: rss,
      per_charger_bytes: started === 0 ? 0 : Math.round((rss - rssStart) / started),
    };
  }

  async function shutDown(): Promise<FleetSummary> {
    stopRequested = true;
    stats.steadyUntilMs = Date.now();
    if (launchTimer) clearTimeout(launchTimer);
    if (durationTimer) clearTimeout(durationTimer);
    clearInterval(everySecond);
    loopDelay.disable();
    recentLoopDelay.disable();
    const onlineAtStop = online();
    const cpu = process.cpuUsage(cpuStart);
    const wallS = (Date.now() - startedAt) / 1000;
    (globalThis as { gc?: () => void }).gc?.();
    const memoryAtStop = process.memoryUsage();
    if (memoryAtStop.rss > rssPeak) rssPeak = memoryAtStop.rss;
    // Long polls end first, by closing their connections: an agent aborting its own poll makes undici reconnect
    // the aborted connection at once (a TLS handshake per charger, on both sides, for nothing). Polls failed this
    // way count as aborted, not as failures.
    await Promise.all([...pollConnections].map((c) => c.destroy().catch(() => undefined)));
    // The network comes back for the graceful stop: every agent gets to flush its outbox.
    for (const state of outageStates) state.link?.setOut(false);
    await eachLimited(states, options.stopConcurrency ?? 200, stopCharger);
    await Promise.allSettled(states.map((s) => s.starting));
    stats.settle(states);

    const telemetry = { produced: 0, delivered: 0, queued: 0, refused: 0 };
    const enqueued = zeroKinds();
    const delivered = zeroKinds();
    const refused = zeroKinds();
    let backlogItems = 0;
    let withBacklog = 0;
    let connectors = 0;
    let twin = 0;
    let v2g = 0;
    for (const s of states) {
      connectors += s.plan.connectors;
      if (s.plan.connectors > 1) twin += 1;
      if (s.plan.v2g) v2g += 1;
      const runtime = s.runtime;
      if (!runtime) continue;
      if (!s.deviceId) stats.error('not_registered', s.plan.sn);
      const agentStats = runtime.stats();
      telemetry.produced += agentStats.uplink.telemetryProduced;
      telemetry.delivered += agentStats.uplink.delivered.telemetry;
      telemetry.queued += agentStats.uplink.telemetryQueued;
      telemetry.refused += agentStats.uplink.refused.telemetry;
      sumKinds(enqueued, agentStats.enqueued);
      sumKinds(delivered, agentStats.uplink.delivered);
      sumKinds(refused, agentStats.uplink.refused);
      backlogItems += agentStats.outbox.items;
      if (agentStats.outbox.items > 0) {
        withBacklog += 1;
        if (options.dataDir === undefined)
          stats.error('backlog_lost', `${s.plan.sn}: ${agentStats.outbox.items} items left in its outbox`);
      }
    }
    // Every agent has stopped: nothing is in flight. (`close()` would reconnect idle clients on its way out.)
    await pool.destroy().catch(() => undefined);
    await attested?.close();
    wheel.close();

    const summary: FleetSummary = {
      seed,
      count,
      started,
      registered,
      online_at_stop: onlineAtStop,
      all_registered_after_s:
        allRegisteredAt === undefined ? null : Math.round((allRegisteredAt - startedAt) / 100) / 10,
      duration_s: Math.round(wallS * 10) / 10,
      ramp_s: rampMs / 1000,
      store: options.dataDir === undefined ? 'memory' : 'disk',
      mix: {
        all_charging: allCharging,
        connectors,
        twin_connector_chargers: twin,
        v2g_chargers: v2g,
        outage_chargers: outageStates.length,
      },
      requests: {
        total: stats.totalRequests,
        per_second: wallS > 0 ? Math.round(stats.totalRequests / wallS) : 0,
        by_kind: stats.requestsByKind(),
        latency_ms: stats.latency.summary(),
        steady_latency_ms: stats.steadyLatency.summary(),
        latency_by_kind_ms: stats.latencyByKindSummary(),
      },
      errors: stats.errorCount,
      workers: 1,
      error_kinds: Object.fromEntries(stats.errors),
      error_samples: Object.fromEntries([...stats.errorSamples].filter(([key]) => stats.errors.has(key))),
      retried: { rate_limited: stats.retriedRateLimited, transient_recovered: stats.recoveredTransient },
      failures: { ...stats.failures },
      telemetry,
      outbox: {
        enqueued,
        delivered,
        refused,
        backlog_items: backlogItems,
        chargers_with_backlog: withBacklog,
      },
      commands: {
        outcomes: Object.fromEntries([...stats.commandOutcomes].sort(([a], [b]) => a.localeCompare(b))),
        latency_ms: stats.commandLatency.summary(),
      },
      agent_logs: { ...logCounts },
      connections: {
        request_pool_size: options.connections ?? defaultConnections(count),
        opened_for_requests: opened.requests,
        opened_for_polls: opened.polls,
      },
      memory: {
        rss_start_bytes: rssStart,
        rss_peak_bytes: rssPeak,
        rss_at_stop_bytes: memoryAtStop.rss,
        heap_used_at_stop_bytes: memoryAtStop.heapUsed,
        per_charger_bytes: started === 0 ? 0 : Math.round((memoryAtStop.rss - rssStart) / started),
      },
      cpu: {
        user_s: Math.round(cpu.user / 1e4) / 100,
        system_s: Math.round(cpu.system / 1e4) / 100,
        cores_used: wallS > 0 ? Math.round(((cpu.user + cpu.system) / 1e6 / wallS) * 100) / 100 : 0,
      },
      event_loop_delay_ms: {
        p50: ms(loopDelay.percentile(50)),
        p99: ms(loopDelay.percentile(99)),
        max: ms(loopDelay.max),
      },
    };
    logger.flush?.();
    return summary;
  }

  const { stop, done } = stopOnce(shutDown);
  let durationTimer: NodeJS.Timeout | undefined;
  if (options.durationMs !== undefined) durationTimer = setTimeout(() => void stop(), options.durationMs);
  launchDue();

  const view = (s: ChargerState): FleetCharger => ({
    index: s.plan.index,
    sn: s.plan.sn,
    connectors: s.plan.connectors,
    v2g: s.plan.v2g,
    ratedPowerKw: s.plan.ratedPowerKw,
    ...(s.plan.outage ? { outage: { ...s.plan.outage } } : {}),
    deviceId: s.deviceId,
    out: s.out,
    hal: s.hal,
    runtime: s.runtime,
  });

  return {
    seed,
    startedAt,
    options,
    chargers: () => states.map(view),
    live,
    takeWindow: () => stats.takeWindow(),
    takeWindowParts: () => stats.takeWindowParts(),
    liveHistograms: () => ({
      latency: stats.latency.snapshot(),
      command: stats.commandLatency.snapshot(),
    }),
    histograms: () => ({
      latency: stats.latency.snapshot(),
      steady: stats.steadyLatency.snapshot(),
      byKind: Object.fromEntries([...stats.latencyByKind].map(([k, h]) => [k, h.snapshot()])),
      command: stats.commandLatency.snapshot(),
    }),
    stop,
    done,
  };
}
