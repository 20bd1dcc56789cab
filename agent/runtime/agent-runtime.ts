/**
 * The running agent: wires the store, the HAL, the control loop, the command executor, the sampler and the
 * platform loops together, and takes them down cleanly.
 *
 * Start order puts autonomy first: the store and the hardware come up and the control loop applies the stored
 * schedules and limits before the platform is even tried, so a charger that boots without a network still does
 * the right thing. Registration (first start only) and the platform loops follow in the background; the
 * sampler's telemetry waits in the outbox until they are up.
 *
 * Shutdown (SIGTERM): stop sampling and control passes, persist session progress, flush the outbox (bounded),
 * then the last heartbeat with status `offline` — last, because any later authenticated request would mark the
 * charger online again — then close the hardware and the store.
 *
 * Every clock, timer, random source and the HTTP dispatcher are injectable, so tests drive it with fake time
 * and a real platform.
 */
import type { Logger } from 'pino';
import type { Dispatcher } from 'undici';
import type { RegisterRequest } from '../../shared/device-api.js';
import { type AgentFatalError, isAgentFatalError } from '../agent-errors.js';
import { type Clock, iso, sleep, systemClock } from '../clock.js';
import { DEFAULT_BACKOFF } from '../core/backoff.js';
import { bootEvent, newEventId, toDeviceEvent } from '../core/device-events.js';
import type { OutboxCap, OutboxKind } from '../core/outbox-policy.js';
import { DEFAULT_TELEMETRY_INTERVALS, type TelemetryIntervals } from '../core/telemetry.js';
import type { ConnectorInfo, DeviceInfo, Hal, HardwareEvent } from '../hal.js';
import { runCommandPoll } from '../link/command-poll.js';
import { createDeviceCredentials, type DeviceCredentials } from '../link/device-credentials.js';
import {
  createHeartbeatLoop,
  DEFAULT_HEARTBEAT_INTERVAL_MS,
  type HeartbeatLoop,
} from '../link/heartbeat-loop.js';
import { createPlatformClient, type DeviceApi, type PlatformClient } from '../link/platform-client.js';
import { createSecretRotation, DEFAULT_SECRET_ROTATION_DAYS } from '../link/secret-rotation.js';
import { createUplink, type Uplink, type UplinkStats } from '../link/uplink.js';
import { type AgentStore, type Identity, openAgentStore } from '../store/agent-store.js';
import { AGENT_VERSION } from '../version.js';
import { type CommandExecutor, createCommandExecutor } from './command-executor.js';
import { type ControlLoop, createControlLoop, DEFAULT_SAFETY_INTERVAL_MS } from './control-loop.js';
import { createSampler, PERSIST_INTERVAL_MS, type Sampler } from './sampler.js';
import { createSerialRunner, type SerialRunner } from './serial-runner.js';

const DAY_MS = 86_400_000;
/** Journal entries, closed sessions and ended limits are kept this long after they stop mattering. */
const RETENTION_MS = 30 * DAY_MS;

export interface AgentRuntimeConfig {
  dataDir: string;
  platformUrl: string;
  sn: string;
  model?: string;
  manufacturer?: string;
  firmware?: string;
  /** PEM of the platform's CA (`--ca` file contents). */
  ca?: string;
  /** Rotate the device secret this often (two-phase, secret-rotation.ts); absent: every 90 days; 0: never. */
  secretRotationDays?: number;
  /** Sign every write with the device secret (for a charger the operator set to require signatures). */
  signRequests?: boolean;
}

export interface AgentTuning {
  heartbeatIntervalMs: number;
  pollWaitSeconds: number;
  telemetry: TelemetryIntervals;
  sampleTickMs: number;
  controlSafetyIntervalMs: number;
  backoff: { baseMs: number; capMs: number };
  flushPaceMs: number;
  persistEveryMs: number;
  requestTimeoutMs: number;
  /** Shutdown bounds, ms. */
  shutdownFlushMs: number;
  shutdownHeartbeatMs: number;
  outboxCap?: OutboxCap;
}

export const DEFAULT_TUNING: AgentTuning = {
  heartbeatIntervalMs: DEFAULT_HEARTBEAT_INTERVAL_MS,
  pollWaitSeconds: 25,
  telemetry: DEFAULT_TELEMETRY_INTERVALS,
  sampleTickMs: DEFAULT_TELEMETRY_INTERVALS.activeMs,
  controlSafetyIntervalMs: DEFAULT_SAFETY_INTERVAL_MS,
  backoff: DEFAULT_BACKOFF,
  flushPaceMs: 200,
  persistEveryMs: PERSIST_INTERVAL_MS,
  requestTimeoutMs: 15_000,
  shutdownFlushMs: 5_000,
  shutdownHeartbeatMs: 3_000,
};

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
  /** Settles once registered (undefined when stopped first). */
  readonly registered: Promise<Identity | undefined>;
  /** Settles with the first fatal error; never settles otherwise. */
  readonly fatal: Promise<AgentFatalError>;
  stats(): AgentRuntimeStats;
  /** Rotates the device secret now, or finishes a rotation under way (also done every `secretRotationDays`). */
  rotateSecret(): Promise<void>;
  stop(): Promise<void>;
}

function registrationOf(
  config: AgentRuntimeConfig,
  connectors: readonly ConnectorInfo[],
  hal: { model?: string; manufacturer?: string; firmwareVersion?: string },
): RegisterRequest {
  return {
    sn: config.sn,
    model: config.model ?? hal.model ?? 'unknown',
    manufacturer: config.manufacturer ?? hal.manufacturer ?? 'unknown',
    firmware_version: config.firmware ?? hal.firmwareVersion ?? AGENT_VERSION,
    connectors: connectors.map((c) => ({
      connector_id: c.connectorId,
      max_power_kw: c.ratedPowerKw,
      v2g_capable: c.v2gCapable,
    })),
  };
}

export async function startAgent(options: AgentRuntimeOptions): Promise<AgentRuntime> {
  const { config, hal, logger } = options;
  const clock = options.clock ?? systemClock;
  const random = options.random ?? Math.random;
  const tuning: AgentTuning = { ...DEFAULT_TUNING, ...options.tuning };

  const store = openAgentStore(config.dataDir, {
    now: () => clock.now(),
    ...(options.memoryStore ? { memory: true } : {}),
    ...(tuning.outboxCap ? { outboxCap: tuning.outboxCap } : {}),
  });
  const startedAt = clock.now();
  const abort = new AbortController();

  let resolveFatal: (error: AgentFatalError) => void = () => {};
  const fatal = new Promise<AgentFatalError>((resolve) => {
    resolveFatal = resolve;
  });
  let failed = false;
  const fail = (error: AgentFatalError) => {
    if (failed) return;
    failed = true;
    logger.fatal({ hint: error.hint }, error.message);
    try {
      store.setState('last_error', {
        at: iso(clock.now()),
        where: 'fatal',
        message: `${error.message} — ${error.hint}`,
      });
    } catch {
      // The store is closed already (a late answer during shutdown): the log line above is what remains.
    }
    resolveFatal(error);
  };

  let info: DeviceInfo;
  try {
    info = await hal.getDeviceInfo();
  } catch (error) {
    store.close();
    throw error;
  }
  const connectors = info.connectors.map((c) => ({ ...c }));
  store.saveConnectors(connectors);
  let halInfo = info;
  store.transaction(() => {
    store.setState('agent_process', { pid: process.pid, startedAt: iso(startedAt), version: AGENT_VERSION });
    store.setState('run_config', options.runConfig ?? { platformUrl: config.platformUrl, sn: config.sn });
    store.enqueueEvents([bootEvent(startedAt, newEventId(startedAt), AGENT_VERSION)]);
  });

  const client: PlatformClient = createPlatformClient({
    baseUrl: config.platformUrl,
    ...(config.ca !== undefined ? { ca: config.ca } : {}),
    ...(options.dispatcher ? { dispatcher: options.dispatcher } : {}),
    timeoutMs: tuning.requestTimeoutMs,
    now: () => clock.now(),
    signing: () => {
      const identity = config.signRequests ? store.getIdentity() : undefined;
      if (!identity) return undefined;
      // Stamped in platform time: the platform refuses stamps more than 300 s off its own clock.
      const platformNow = clock.now() + (skewSource?.skewMs() ?? 0);
      return { secret: identity.secret, timestampSeconds: Math.floor(platformNow / 1000) };
    },
  });
  let skewSource: HeartbeatLoop | undefined;
  const credentials = createDeviceCredentials({
    store,
    client,
    clock,
    logger,
    sn: config.sn,
    platformUrl: config.platformUrl,
    registration: () => registrationOf(config, connectors, halInfo),
    random,
    backoff: tuning.backoff,
  });
  const deviceApi: DeviceApi = client.withTokens(credentials);
  const rotation = createSecretRotation({
    credentials,
    api: deviceApi,
    clock,
    days: config.secretRotationDays ?? DEFAULT_SECRET_ROTATION_DAYS,
    backoff: tuning.backoff,
    random,
  });
  let registered = false;
  const api = () => (registered ? deviceApi : undefined);

  const runner = createSerialRunner();
  let sampler: Sampler | undefined;
  const controlLoop = createControlLoop({
    store,
    hal,
    runner,
    clock,
    logger,
    connectors: () => connectors,
    safetyIntervalMs: tuning.controlSafetyIntervalMs,
    onTargetChange: (id) => sampler?.markDirty(id),
  });
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
  const executor = createCommandExecutor({
    store,
    hal,
    controlLoop,
    runner,
    clock,
    logger,
    connectors: () => connectors,
    skewMs: () => skewSource?.skewMs() ?? 0,
    onReport: () => uplink.notify(),
  });
  const heartbeat = createHeartbeatLoop({
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
  skewSource = heartbeat;
  const samplerInstance = createSampler({
    store,
    hal,
    clock,
    logger,
    uplink,
    controlLoop,
    connectors: () => connectors,
    intervals: tuning.telemetry,
    tickMs: tuning.sampleTickMs,
    persistEveryMs: tuning.persistEveryMs,
  });
  sampler = samplerInstance;

  let lastPrune = Number.NEGATIVE_INFINITY;
  function prune(): void {
    const now = clock.now();
    if (now - lastPrune < DAY_MS) return;
    lastPrune = now;
    const before = iso(now - RETENTION_MS);
    store.transaction(() => {
      store.pruneJournal(before);
      store.pruneSessions(before);
      store.pruneLimits(iso(now - DAY_MS));
    });
  }

  const onHardwareEvent = (event: HardwareEvent) => {
    const deviceEvent = toDeviceEvent(event, newEventId(event.at.getTime()));
    if (deviceEvent) {
      try {
        store.enqueueEvents([deviceEvent]);
        uplink.notify();
      } catch (error) {
        logger.error({ err: (error as Error).message }, 'queuing a hardware event failed');
      }
    }
    if (event.type === 'vehicle_unplugged') {
      void samplerInstance.vehicleLeft(event.connectorId, event.at.getTime());
      controlLoop.vehicleLeft(event.connectorId);
    } else {
      controlLoop.trigger(event.type);
    }
    void samplerInstance.sample(event.type);
  };
  const unsubscribe = hal.subscribe(onHardwareEvent);

  try {
    await hal.start?.();
    halInfo = await hal.getDeviceInfo().catch(() => halInfo);
    prune();
    await samplerInstance.init();
  } catch (error) {
    unsubscribe();
    await client.close().catch(() => undefined);
    store.close();
    throw error;
  }
  controlLoop.start();
  executor.resumeUnfinished();
  samplerInstance.start();
  logger.info(
    {
      sn: config.sn,
      platform_url: config.platformUrl,
      connectors: connectors.length,
      version: AGENT_VERSION,
    },
    'agent started',
  );

  const loops: Promise<void>[] = [];
  const registeredPromise = credentials
    .ensureRegistered(abort.signal)
    .then((identity) => {
      if (!identity || abort.signal.aborted) return identity;
      registered = true;
      logger.info({ device_id: identity.deviceId }, 'platform identity ready');
      const guard = (name: string, loop: Promise<void>) =>
        loop.catch((error: unknown) => {
          if (isAgentFatalError(error)) fail(error);
          else logger.error({ err: (error as Error).message, loop: name }, 'loop stopped unexpectedly');
        });
      loops.push(guard('heartbeat', heartbeat.run(abort.signal)));
      loops.push(
        guard(
          'poll',
          runCommandPoll(
            {
              api,
              clock,
              logger,
              executor,
              waitSeconds: tuning.pollWaitSeconds,
              random,
              onServerTime: (serverTime, receivedAt) => heartbeat.observeServerTime(serverTime, receivedAt),
              // Commands should not wait long after the platform returns: cap the poll's backoff at a minute.
              backoff: { baseMs: tuning.backoff.baseMs, capMs: Math.min(tuning.backoff.capMs, 60_000) },
              onFatal: fail,
            },
            abort.signal,
          ),
        ),
      );
      loops.push(guard('flush', uplink.run(abort.signal)));
      return identity;
    })
    .catch((error: unknown) => {
      if (isAgentFatalError(error)) fail(error);
      else logger.error({ err: (error as Error).message }, 'registration stopped unexpectedly');
      return undefined;
    });

  let stopping: Promise<void> | undefined;
  /** The outbox as the store closed, so `stats()` still answers after `stop()`. */
  let finalOutbox: { items: number; bytes: number } | undefined;
  async function stop(): Promise<void> {
    abort.abort();
    unsubscribe();
    controlLoop.stop();
    await Promise.race([samplerInstance.stop(), sleep(clock, 2_000)]);
    // A command in the middle of its HAL calls finishes; one still queued is resumed at the next start.
    await Promise.race([runner.idle(), sleep(clock, 2_000)]);
    try {
      samplerInstance.persist();
    } catch (error) {
      logger.warn({ err: (error as Error).message }, 'persisting session progress failed');
    }
    // A registration or secret rotation whose answer is on its way must be stored before the store closes:
    // the platform will not hand that secret out again. Both are bounded by the request timeout.
    const bound = tuning.requestTimeoutMs + 1_000;
    await Promise.race([registeredPromise, sleep(clock, bound)]);
    await Promise.race([Promise.allSettled(loops), sleep(clock, bound)]);
    await Promise.race([uplink.settled(), sleep(clock, tuning.shutdownFlushMs)]);
    if (registered && !failed) {
      const drained = await Promise.race([
        uplink.drain(clock.now() + tuning.shutdownFlushMs),
        sleep(clock, tuning.shutdownFlushMs + 500).then(() => false),
      ]).catch(() => false);
      const backlog = store.outbox.size().items;
      if (!drained) logger.warn({ backlog }, 'outbox not empty at shutdown; it is sent at the next start');
      const offline = await Promise.race([
        heartbeat.beat('offline').catch(() => false),
        sleep(clock, tuning.shutdownHeartbeatMs).then(() => false),
      ]);
      logger.info({ offline_heartbeat: offline, backlog }, 'agent stopping');
    }
    try {
      await hal.close?.();
    } catch (error) {
      logger.warn({ err: (error as Error).message }, 'closing the hardware failed');
    }
    await client.close().catch(() => undefined);
    const proc = store.getState('agent_process');
    if (proc) store.setState('agent_process', { ...proc, stoppedAt: iso(clock.now()) });
    finalOutbox = store.outbox.size();
    store.close();
  }

  return {
    store,
    hal,
    controlLoop,
    executor,
    uplink,
    sampler: samplerInstance,
    heartbeat,
    credentials,
    runner,
    registered: registeredPromise,
    fatal,
    stats: () => ({
      uplink: uplink.stats(),
      outbox: finalOutbox ?? store.outbox.size(),
      enqueued: store.outbox.enqueuedCounts(),
      registered,
    }),
    rotateSecret: () => credentials.rotateSecret(deviceApi),
    stop() {
      stopping ??= stop();
      return stopping;
    },
  };
}
