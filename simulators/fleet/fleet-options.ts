/**
 * The options of a fleet run: what `runFleet` (and `runFleetInWorkers`) accept, how they are checked (the
 * `charger-sim fleet` flags' messages), their defaults, and the settings a run resolves from them once.
 */
import type { KeyObject } from 'node:crypto';
import type { DestinationStream, Level } from 'pino';
import { ConfigError } from '../../agent/agent-config.js';
import { DEFAULT_TELEMETRY_INTERVALS } from '../../agent/core/telemetry.js';
import type { AgentTuning } from '../../agent/runtime/agent-runtime.js';
import { readUpdateKeys } from '../../agent/updates/update-keys.js';
import { randomSeed } from '../seeded-random.js';
import type { SimulatedHalOptions } from '../simulated-hal.js';
import { checkEnrolmentCa, type EnrolmentCa } from './charger-certificates.js';
import {
  type ChargerPlan,
  FLEET_PACES,
  type FleetPace,
  type OutageWindowOptions,
  paceHalOptions,
  planFleet,
} from './fleet-mix.js';

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
  /** OEM public keys (PEM files) every agent trusts for updates (`--update-key`); none: updates are refused. */
  updateKeyFiles?: readonly string[];
  /**
   * Give each charger an A/B layout under its data directory so that it takes agent updates
   * (`--agent-releases`, simulated-releases.ts); needs `dataDir`.
   */
  agentReleases?: boolean;
  /**
   * Each charger also writes its own log file, DATA_DIR/SN/logs/agent.log, as the agent does on hardware, at the
   * agent's own level (info unless configured remotely): what its diagnostics archive holds (`--agent-logs`);
   * needs `dataDir`.
   */
  agentLogs?: boolean;
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
  if (options.agentReleases && options.dataDir === undefined)
    throw new FleetOptionsError('--agent-releases needs --data-dir (each charger keeps its releases there)');
  if (options.agentLogs && options.dataDir === undefined)
    throw new FleetOptionsError('--agent-logs needs --data-dir (each charger keeps its log files there)');
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

/** What one `runFleet` call follows, resolved from its options once. */
export interface FleetSettings {
  seed: number;
  rampMs: number;
  allCharging: boolean;
  /** The chargers this call runs: all of them, or its slice. */
  plans: ChargerPlan[];
  halOverrides: Partial<SimulatedHalOptions>;
  /** The telemetry interval while charging, also the agent's sampling tick and the HAL's physics tick. */
  telemetryMs: number;
  tuning: Partial<AgentTuning>;
  /** `updateKeyFiles`, read once. */
  updateKeys: KeyObject[];
  agentReleases: boolean;
  agentLogs: boolean;
  logLevel: FleetLogLevel;
}

/** The update keys, read and checked once for the whole fleet; a bad file is an option error. */
function updateKeysOf(files: readonly string[] | undefined): KeyObject[] {
  try {
    return readUpdateKeys(files ?? []);
  } catch (error) {
    if (error instanceof ConfigError) throw new FleetOptionsError(error.message);
    throw error;
  }
}

/** Checks the options (`FleetOptionsError`) and resolves their defaults. */
export function resolveFleetSettings(options: FleetOptions): FleetSettings {
  checkOptions(options);
  const seed = options.seed ?? randomSeed();
  const slice = options.slice;
  const telemetryMs = options.telemetryIntervalMs ?? DEFAULT_TELEMETRY_INTERVALS.activeMs;
  return {
    seed,
    rampMs: options.rampMs ?? options.count * DEFAULT_RAMP_MS_PER_CHARGER,
    allCharging: options.allCharging ?? false,
    plans: fleetPlan(options, seed).filter((plan) => !slice || plan.index % slice.of === slice.index),
    halOverrides: { ...paceHalOptions(options.pace ?? 'realistic'), ...options.hal },
    telemetryMs,
    tuning: {
      telemetry: { activeMs: telemetryMs, idleMs: Math.max(telemetryMs, DEFAULT_TELEMETRY_INTERVALS.idleMs) },
      sampleTickMs: telemetryMs,
      ...(options.heartbeatIntervalMs !== undefined
        ? { heartbeatIntervalMs: options.heartbeatIntervalMs }
        : {}),
      ...options.tuning,
    },
    updateKeys: updateKeysOf(options.updateKeyFiles),
    agentReleases: options.agentReleases ?? false,
    agentLogs: options.agentLogs ?? false,
    logLevel: options.logLevel ?? 'silent',
  };
}
