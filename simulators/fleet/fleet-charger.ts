/**
 * One simulated charger of the fleet: its state, its start (the simulated HAL, its link, the real agent) and
 * its graceful stop, and the read-only view the fleet hands out.
 */
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import { type AgentLogger, createAgentLogger } from '../../agent/logger.js';
import { type AgentRuntime, startAgent } from '../../agent/runtime/agent-runtime.js';
import { AGENT_VERSION } from '../../agent/version.js';
import { createSeededRandom } from '../seeded-random.js';
import { createSimulatedHal, type SimulatedHal, type SimulatedTimers } from '../simulated-hal.js';
import type { AttestedConnections } from './attested-connections.js';
import { type ChargerLink, type ChargerLinkState, createChargerLink } from './charger-link.js';
import type { FleetConnections } from './fleet-connections.js';
import { chargerLogForwarder } from './fleet-logger.js';
import { type ChargerPlan, halOptionsFor, tirelessVehicle } from './fleet-mix.js';
import type { FleetOptions, FleetSettings } from './fleet-options.js';
import type { FleetStats } from './fleet-stats.js';
import { type ChargerReleases, createChargerReleases } from './simulated-releases.js';

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

export interface ChargerState extends ChargerLinkState {
  plan: ChargerPlan;
  /** Offset from the fleet's start at which its simulated outage ends, once it began. */
  outageEndsAt?: number;
  link?: ChargerLink;
  hal?: SimulatedHal;
  runtime?: AgentRuntime;
  deviceId?: string;
  starting?: Promise<void>;
  stopping?: Promise<void>;
  /** Agent releases (`--agent-releases`): the charger's A/B layout and what its launcher would do. */
  releases?: ChargerReleases;
  /** A restart into another release under way (the agent asked for it, or its trial's deadline passed). */
  restarting?: Promise<void>;
  trialTimer?: NodeJS.Timeout;
  /** The agent's own logger and log file (`--agent-logs`), one per run of the agent. */
  agentLog?: AgentLogger;
}

/** How far the chargers of a run got. */
export interface FleetProgress {
  started: number;
  registered: number;
  /** When the last of them registered, ms since the epoch. */
  allRegisteredAt?: number;
}

export interface ChargerLifecycleDeps {
  options: FleetOptions;
  settings: FleetSettings;
  stats: FleetStats;
  logger: Logger;
  connections: FleetConnections;
  /** The shared wheel for the simulated hardware's physics ticks (`tick-wheel.ts`). */
  timers: SimulatedTimers;
  progress: FleetProgress;
  /** The chargers this run has: when as many registered, all did. */
  count: number;
}

export interface ChargerLifecycle {
  /** Starts a charger; a failure to start is counted (`start_failed`), never thrown. */
  start(state: ChargerState): Promise<void>;
  /** Stops its agent gracefully, once however often it is called (after its start finished). */
  stop(state: ChargerState): Promise<void>;
}

/** The simulated hardware of a planned charger, on the fleet's shared tick wheel. */
function simulatedHalFor(plan: ChargerPlan, settings: FleetSettings, timers: SimulatedTimers): SimulatedHal {
  const hal = createSimulatedHal({
    // The physics tick at the sampling cadence: readings and commands bring the simulation up to date
    // themselves, so a finer tick would only cost CPU (vehicles arriving, leaving or faulting are noticed
    // within one tick).
    tickIntervalMs: settings.telemetryMs,
    ...halOptionsFor(plan, { allCharging: settings.allCharging, overrides: settings.halOverrides }),
    timers,
  });
  if (settings.allCharging) {
    const random = createSeededRandom(plan.seed ^ 0x2545f491);
    for (let c = 1; c <= plan.connectors; c++) hal.plugIn(c, tirelessVehicle(random));
  }
  return hal;
}

export function createChargerLifecycle(deps: ChargerLifecycleDeps): ChargerLifecycle {
  const { options, settings, stats, progress } = deps;

  function watch(state: ChargerState, runtime: AgentRuntime): void {
    state.runtime = runtime;
    state.lookupCommand = (commandId) =>
      runtime.store.db.open ? runtime.store.journalGet(commandId) : undefined;
    void runtime.registered.then((identity) => {
      // A restart into another release finds the identity stored: counted once.
      if (!identity || state.deviceId !== undefined) return;
      state.deviceId = identity.deviceId;
      progress.registered += 1;
      if (progress.registered === deps.count) progress.allRegisteredAt = Date.now();
    });
    void runtime.fatal.then((error) => {
      stats.error('fatal', `${state.plan.sn}: ${error.message}`);
      void stop(state);
    });
  }

  async function start(state: ChargerState): Promise<void> {
    const { plan } = state;
    progress.started += 1;
    const { attested, pool, pollConnection } = deps.connections;
    let own: Awaited<ReturnType<AttestedConnections['forCharger']>> | undefined;
    try {
      own = await attested?.forCharger(plan.sn);
    } catch (error) {
      stats.error('start_failed', `${plan.sn}: no charger certificate: ${(error as Error).message}`);
      return;
    }
    const link = createChargerLink(own?.pool ?? pool, own?.poll ?? pollConnection, state, stats);
    state.link = link;
    state.hal = simulatedHalFor(plan, settings, deps.timers);
    if (settings.agentReleases) {
      const dataDir = chargerDataDir(state);
      // The charger's directory is its store's, owner-only as the agent makes it (the releases come first).
      mkdirSync(dataDir, { recursive: true, mode: 0o700 });
      state.releases = createChargerReleases({
        prefix: path.join(dataDir, 'releases'),
        dataDir,
        initialVersion: AGENT_VERSION,
        logger: deps.logger.child({ sn: plan.sn }),
      });
    }
    await runAgent(state);
  }

  /**
   * The fleet's logger, or with `--agent-logs` the agent's own as on hardware: its rotating file under the
   * charger's data directory, its stderr handed to the fleet's logger.
   */
  async function chargerLogger(state: ChargerState): Promise<Logger> {
    const { sn } = state.plan;
    if (!settings.agentLogs) return settings.logLevel === 'silent' ? deps.logger : deps.logger.child({ sn });
    state.agentLog = await createAgentLogger({
      dataDir: chargerDataDir(state),
      stderr: chargerLogForwarder(deps.logger, sn),
    });
    return state.agentLog.logger;
  }

  function closeLog(state: ChargerState): void {
    state.agentLog?.close();
    state.agentLog = undefined;
  }

  const chargerDataDir = (state: ChargerState) => path.join(options.dataDir ?? 'memory', state.plan.sn);

  /** Starts the charger's agent (again, after a restart into another release). */
  async function runAgent(state: ChargerState): Promise<void> {
    const { plan, link, hal, releases } = state;
    if (!link || !hal) return;
    const launch = await releases?.prepareStart();
    const logger = await chargerLogger(state);
    let runtime: AgentRuntime;
    try {
      runtime = await startAgent({
        config: {
          dataDir: chargerDataDir(state),
          platformUrl: options.platformUrl.replace(/\/+$/, ''),
          sn: plan.sn,
          updateKeys: settings.updateKeys,
        },
        hal,
        logger,
        dispatcher: link.dispatcher,
        random: createSeededRandom(plan.seed ^ 0x5bd1e995),
        tuning: settings.tuning,
        memoryStore: options.dataDir === undefined,
        ...(releases && launch
          ? {
              agentVersion: launch.version,
              updates: releases.updates(() => restart(state, launch.version, 'restart')),
            }
          : {}),
        // A `reset` (DESIGN.md §20) restarts the agent as the launcher would; a store in memory would not survive it.
        ...(options.dataDir !== undefined
          ? { restart: () => restart(state, launch?.version ?? AGENT_VERSION, 'restart') }
          : {}),
      });
    } catch (error) {
      stats.error('start_failed', `${plan.sn}: ${(error as Error).message}`);
      closeLog(state);
      await hal.close();
      return;
    }
    watch(state, runtime);
    if (launch?.deadlineAt !== undefined) {
      // As the launcher: a release in trial that has not committed by its deadline is stopped and rolled back.
      state.trialTimer = setTimeout(
        () => {
          if (state.runtime === runtime && releases?.inTrial(launch.version))
            restart(state, launch.version, 'deadline');
        },
        Math.max(0, launch.deadlineAt - Date.now()),
      );
    }
  }

  /**
   * What the launcher does when the agent ends for a release or a reset: stop it, decide (with A/B releases),
   * start it again.
   */
  function restart(state: ChargerState, version: string, how: 'restart' | 'deadline'): void {
    if (state.stopping || state.restarting) return;
    const releases = state.releases;
    state.restarting = (async () => {
      clearTimeout(state.trialTimer);
      await state.runtime?.stop().catch((error: unknown) => {
        stats.error('stop_failed', `${state.plan.sn}: ${(error as Error).message}`);
      });
      closeLog(state);
      // A trial that committed meanwhile leaves nothing to decide (afterRun then starts it again).
      releases?.afterRun(version, how);
      if (!state.stopping) await runAgent(state);
    })().finally(() => {
      state.restarting = undefined;
    });
  }

  function stop(state: ChargerState): Promise<void> {
    state.stopping ??= (async () => {
      await state.starting;
      clearTimeout(state.trialTimer);
      await state.restarting;
      await state.runtime?.stop().catch((error: unknown) => {
        stats.error('stop_failed', `${state.plan.sn}: ${(error as Error).message}`);
      });
      closeLog(state);
    })();
    return state.stopping;
  }

  return { start, stop };
}

export function chargerView(s: ChargerState): FleetCharger {
  return {
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
  };
}
