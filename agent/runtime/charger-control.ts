/**
 * The charger's own side of the agent, the part that works without the platform: the control loop (stored
 * schedules, limits and overrides applied to the hardware), the command executor and the sampler (telemetry,
 * sessions), sharing one serial runner so that their HAL calls never interleave.
 */
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { ConnectorInfo, Hal } from '../hal.js';
import type { Uplink } from '../link/uplink.js';
import type { AgentStore } from '../store/agent-store.js';
import { type CommandExecutor, createCommandExecutor, type UpdateTaker } from './command-executor.js';
import { type ControlLoop, createControlLoop } from './control-loop.js';
import type { Maintenance } from './maintenance.js';
import { createSampler, type Sampler } from './sampler.js';
import { createSerialRunner, type SerialRunner } from './serial-runner.js';
import type { AgentTuning } from './tuning.js';

export interface ChargerControlOptions {
  store: AgentStore;
  hal: Hal;
  clock: Clock;
  logger: Logger;
  connectors: readonly ConnectorInfo[];
  tuning: AgentTuning;
  /** Where telemetry and reports go (it sends at once when it can, else they wait in the outbox). */
  uplink: Uplink;
  /** Platform minus agent clock, ms (commands' validity windows are in platform time). */
  skewMs: () => number;
  /** Takes `update` commands (bound once the update runner exists). */
  updates?: () => UpdateTaker | undefined;
  /** A command reported something (a schedule may have changed: a waiting install looks again). */
  onCommandReport?: () => void;
  /** Takes the remote-maintenance commands (bound once the heartbeat loop exists). */
  maintenance?: () => Maintenance | undefined;
}

export interface ChargerControl {
  runner: SerialRunner;
  controlLoop: ControlLoop;
  executor: CommandExecutor;
  sampler: Sampler;
}

export function createChargerControl(options: ChargerControlOptions): ChargerControl {
  const { store, hal, clock, logger, connectors, tuning, uplink } = options;
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
  const executor = createCommandExecutor({
    store,
    hal,
    controlLoop,
    runner,
    clock,
    logger,
    connectors: () => connectors,
    skewMs: options.skewMs,
    onReport: () => {
      uplink.notify();
      options.onCommandReport?.();
    },
    ...(options.updates ? { updates: options.updates } : {}),
    ...(options.maintenance ? { maintenance: options.maintenance } : {}),
  });
  sampler = createSampler({
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
  return { runner, controlLoop, executor, sampler };
}
