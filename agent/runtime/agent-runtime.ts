/**
 * The running agent: wires the store, the HAL, the control loop, the command executor, the sampler and the
 * platform loops together, and takes them down cleanly.
 *
 * Start order puts autonomy first: the store and the hardware come up and the control loop applies the stored
 * schedules and limits before the platform is even tried, so a charger that boots without a network still does
 * the right thing. Registration (first start only) and the platform loops follow in the background; the
 * sampler's telemetry waits in the outbox until they are up.
 *
 * Shutdown (SIGTERM) is shutdown.ts; the platform loops are platform-loops.ts; this module only wires.
 *
 * Every clock, timer, random source and the HTTP dispatcher are injectable, so tests drive it with fake time
 * and a real platform.
 */
import type { Logger } from 'pino';
import type { Dispatcher } from 'undici';
import type { AgentFatalError } from '../agent-errors.js';
import { type Clock, iso, sleep, systemClock } from '../clock.js';
import { bootEvent, newEventId } from '../core/device-events.js';
import type { OutboxKind } from '../core/outbox-policy.js';
import { configurationEvent, type RunningConfiguration } from '../core/remote-configuration.js';
import { DEFAULT_SECRET_ROTATION_DAYS } from '../core/secret-rotation-policy.js';
import type { DeviceInfo, Hal } from '../hal.js';
import type { DeviceCredentials } from '../link/device-credentials.js';
import { createHeartbeatLoop, type HeartbeatLoop } from '../link/heartbeat-loop.js';
import { createUplink, type Uplink, type UplinkStats } from '../link/uplink.js';
import { type AgentStore, type Identity, openAgentStore } from '../store/agent-store.js';
import type { UpdateRunner } from '../updates/update-runner.js';
import { type AgentUpdateOptions, wireUpdateRunner } from '../updates/update-wiring.js';
import { AGENT_VERSION } from '../version.js';
import { createChargerControl } from './charger-control.js';
import type { CommandExecutor } from './command-executor.js';
import type { ControlLoop } from './control-loop.js';
import { createDiagnosticsJobs } from './diagnostics-job.js';
import { createFatalLatch } from './fatal-latch.js';
import { routeHardwareEvents } from './hardware-events.js';
import { createLiveConfiguration } from './live-configuration.js';
import { createMaintenance, type Maintenance } from './maintenance.js';
import { createPlatformLink } from './platform-link.js';
import { startPlatformLoops } from './platform-loops.js';
import { createPruner } from './pruning.js';
import type { Sampler } from './sampler.js';
import type { SerialRunner } from './serial-runner.js';
import { shutDown } from './shutdown.js';
import { type AgentRuntimeConfig, type AgentTuning, DEFAULT_TUNING } from './tuning.js';

export { type AgentRuntimeConfig, type AgentTuning, DEFAULT_TUNING } from './tuning.js';

export interface AgentRuntimeOptions {
  config: AgentRuntimeConfig;
  hal: Hal;
  logger: Logger;
  clock?: Clock;
  /** Replaces the HTTP connection pool (tests). */
  dispatcher?: Dispatcher;
  random?: () => number;
  tuning?: Partial<AgentTuning>;
  /** The effective configuration, stored for the technician's `diag` (never a secret). */
  runConfig?: Record<string, unknown>;
  /**
   * Keep the store in memory instead of `DIR/agent.sqlite` (`openAgentStore(dir, { memory: true })`): for
   * simulated chargers, which the fleet simulator runs by the thousand in one process. Nothing survives a stop.
   */
  memoryStore?: boolean;
  /** Over-the-air updates beyond the trusted keys (DESIGN.md §19): the A/B release layer, the build target. */
  updates?: AgentUpdateOptions;
  /**
   * The version this start runs as and reports (default AGENT_VERSION, the code's own): the simulated fleet's
   * release layer (simulators/fleet/simulated-releases.ts) runs the same code as the release it switched to.
   */
  agentVersion?: string;
  /**
   * Stops the agent and exits with the launcher's restart code (run-command.ts), for the `reset` command (DESIGN.md
   * §20); absent (an agent embedded in a test or the fleet simulator): resets are refused, saying so.
   */
  restart?: () => void;
}

export interface AgentRuntimeStats {
  uplink: UplinkStats;
  /** What waits in the outbox (after `stop()`: what was left when the store closed). */
  outbox: { items: number; bytes: number };
  /** Items that entered the outbox since the start, by kind (telemetry only when it had to wait). */
  enqueued: Record<OutboxKind, number>;
  registered: boolean;
}

export interface AgentRuntime {
  readonly store: AgentStore;
  readonly hal: Hal;
  readonly controlLoop: ControlLoop;
  readonly executor: CommandExecutor;
  readonly uplink: Uplink;
  readonly sampler: Sampler;
  readonly heartbeat: HeartbeatLoop;
  readonly credentials: DeviceCredentials;
  readonly runner: SerialRunner;
  readonly updates: UpdateRunner;
  /** Settles once registered (undefined when stopped first). */
  readonly registered: Promise<Identity | undefined>;
  /** Settles with the first fatal error; never settles otherwise. */
  readonly fatal: Promise<AgentFatalError>;
  stats(): AgentRuntimeStats;
  /** Rotates the device secret now, or finishes a rotation under way (also done every `secretRotationDays`). */
  rotateSecret(): Promise<void>;
  stop(): Promise<void>;
}

export async function startAgent(options: AgentRuntimeOptions): Promise<AgentRuntime> {
  const { config, hal, logger } = options;
  const clock = options.clock ?? systemClock;
  const random = options.random ?? Math.random;
  const tuning: AgentTuning = { ...DEFAULT_TUNING, ...options.tuning };
  const agentVersion = options.agentVersion ?? AGENT_VERSION;

  const store = openAgentStore(config.dataDir, {
    now: () => clock.now(),
    ...(options.memoryStore ? { memory: true } : {}),
    ...(tuning.outboxCap ? { outboxCap: tuning.outboxCap } : {}),
  });
  const startedAt = clock.now();
  const abort = new AbortController();
  const latch = createFatalLatch(store, clock, logger);
  const fail = latch.fail;

  let halInfo = await deviceInfoOrClose(hal, store);
  const connectors = halInfo.connectors.map((c) => ({ ...c }));
  const configuration = createLiveConfiguration({
    store,
    fromFile: {
      log_level: logger.level,
      secret_rotation_days: config.secretRotationDays ?? DEFAULT_SECRET_ROTATION_DAYS,
    },
    tuned: {
      pollWaitSeconds: tuning.pollWaitSeconds,
      telemetryActiveMs: tuning.telemetry.activeMs,
      telemetryIdleMs: tuning.telemetry.idleMs,
    },
  });
  recordStart(store, connectors, startedAt, {
    runConfig: options.runConfig ?? { platformUrl: config.platformUrl, sn: config.sn },
    agentVersion,
    configuration: configuration.values(),
  });

  let heartbeat: HeartbeatLoop | undefined;
  const { client, credentials, deviceApi, rotation } = createPlatformLink({
    config,
    store,
    clock,
    logger,
    random,
    tuning,
    ...(options.dispatcher ? { dispatcher: options.dispatcher } : {}),
    connectors,
    deviceInfo: () => halInfo,
    skewMs: () => heartbeat?.skewMs() ?? 0,
    agentVersion,
    secretRotationDays: configuration.secretRotationDays,
  });
  let registered = false;
  const api = () => (registered ? deviceApi : undefined);
  const prune = createPruner(store, clock);

  const uplink = createUplink({
    store,
    clock,
    logger,
    api,
    random,
    backoff: tuning.backoff,
    paceMs: tuning.flushPaceMs,
    onFatal: fail,
  });
  let updates: UpdateRunner | undefined;
  let maintenance: Maintenance | undefined;
  const { runner, controlLoop, executor, sampler } = createChargerControl({
    store,
    hal,
    clock,
    logger,
    connectors,
    tuning,
    uplink,
    skewMs: () => heartbeat?.skewMs() ?? 0,
    updates: () => updates,
    maintenance: () => maintenance,
    onCommandReport: () => {
      updates?.recheck();
      maintenance?.recheck();
    },
  });
  updates = wireUpdateRunner({
    dataDir: config.dataDir,
    store,
    hal,
    clock,
    logger,
    random,
    keys: config.updateKeys ?? [],
    ...((config.model ?? halInfo.model) !== undefined ? { model: config.model ?? halInfo.model } : {}),
    connectors,
    runner,
    controlLoop,
    api,
    startedAt,
    agentVersion,
    onReport: () => uplink.notify(),
    ...(options.updates ? { options: options.updates } : {}),
  });
  const updateRunner = updates;
  const heartbeatLoop = createHeartbeatLoop({
    api,
    hal,
    store,
    clock,
    logger,
    executor,
    intervalMs: tuning.heartbeatIntervalMs,
    random,
    onFatal: fail,
    afterSuccess: async () => {
      prune();
      await rotation.check();
    },
  });
  heartbeat = heartbeatLoop;
  const configurationTargets = { heartbeat: heartbeatLoop, sampler, logger };
  configuration.apply(configurationTargets);
  maintenance = createMaintenance({
    store,
    hal,
    clock,
    logger,
    controlLoop,
    runner,
    configuration,
    configurationTargets: () => configurationTargets,
    drain: (ms) => uplink.drain(clock.now() + ms),
    ...(options.restart ? { restart: options.restart } : {}),
    diagnostics: createDiagnosticsJobs({
      dataDir: config.dataDir,
      store,
      clock,
      logger,
      random,
      api,
      backoff: tuning.backoff,
      signal: abort.signal,
    }),
  });
  const maintenanceRunner = maintenance;
  const route = routeHardwareEvents({ store, uplink, sampler, controlLoop, logger });
  const unsubscribe = hal.subscribe((event) => {
    route(event);
    // A connector's state may have changed: a waiting install or reset looks again.
    updateRunner.recheck();
    maintenanceRunner.recheck();
  });

  try {
    await hal.start?.();
    halInfo = await hal.getDeviceInfo().catch(() => halInfo);
    prune();
    await sampler.init();
  } catch (error) {
    unsubscribe();
    await client.close().catch(() => undefined);
    store.close();
    throw error;
  }
  controlLoop.start();
  // Before the executor resumes its commands: an update command it finds accepted is the runner's already.
  updateRunner.resume();
  executor.resumeUnfinished();
  sampler.start();
  logger.info(
    {
      sn: config.sn,
      platform_url: config.platformUrl,
      connectors: connectors.length,
      version: agentVersion,
    },
    'agent started',
  );

  const platform = startPlatformLoops(
    {
      credentials,
      heartbeat: heartbeatLoop,
      uplink,
      executor,
      api,
      clock,
      logger,
      random,
      tuning,
      pollWaitSeconds: configuration.pollWaitSeconds,
      fail,
      onRegistered: () => {
        registered = true;
      },
    },
    abort.signal,
  );

  let stopping: Promise<void> | undefined;
  /** The outbox as the store closed, so `stats()` still answers after `stop()`. */
  let finalOutbox: { items: number; bytes: number } | undefined;
  return {
    store,
    hal,
    controlLoop,
    executor,
    uplink,
    sampler,
    heartbeat: heartbeatLoop,
    credentials,
    runner,
    updates: updateRunner,
    registered: platform.registered,
    fatal: latch.fatal,
    stats: () => ({
      uplink: uplink.stats(),
      outbox: finalOutbox ?? store.outbox.size(),
      enqueued: store.outbox.enqueuedCounts(),
      registered,
    }),
    rotateSecret: () => credentials.rotateSecret(deviceApi),
    stop() {
      // A download or a wait stops where it is (its progress is stored); an install under way is let finish.
      stopping ??= Promise.race([updateRunner.stop(), sleep(clock, 2_000)]).then(() =>
        shutDown({
          abort,
          unsubscribe,
          controlLoop,
          sampler,
          runner,
          platform,
          uplink,
          heartbeat: heartbeatLoop,
          hal,
          client,
          store,
          clock,
          logger,
          tuning,
          isRegistered: () => registered,
          hasFailed: latch.failed,
          keepFinalOutbox: (usage) => {
            finalOutbox = usage;
          },
        }),
      );
      return stopping;
    },
  };
}

/** The hardware's description; a HAL that cannot give one fails the start, and the store is closed first. */
async function deviceInfoOrClose(hal: Hal, store: AgentStore): Promise<DeviceInfo> {
  try {
    return await hal.getDeviceInfo();
  } catch (error) {
    store.close();
    throw error;
  }
}

/**
 * What this start leaves in the store: the connectors, the process and its configuration, a boot event and the
 * report of the remote configuration it runs with (DESIGN.md §20).
 */
function recordStart(
  store: AgentStore,
  connectors: DeviceInfo['connectors'],
  startedAt: number,
  start: { runConfig: Record<string, unknown>; agentVersion: string; configuration: RunningConfiguration },
): void {
  store.saveConnectors(connectors);
  store.transaction(() => {
    store.setState('agent_process', {
      pid: process.pid,
      startedAt: iso(startedAt),
      version: start.agentVersion,
    });
    store.setState('run_config', start.runConfig);
    store.enqueueEvents([
      bootEvent(startedAt, newEventId(startedAt), start.agentVersion),
      configurationEvent(start.configuration, startedAt, newEventId(startedAt)),
    ]);
  });
}
