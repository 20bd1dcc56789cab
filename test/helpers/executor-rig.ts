import { systemClock } from '../../agent/clock.js';
import type { ConnectorInfo } from '../../agent/hal.js';
import type { IncomingCommand } from '../../agent/link/platform-answers.js';
import { type CommandExecutor, createCommandExecutor } from '../../agent/runtime/command-executor.js';
import { type ControlLoop, createControlLoop } from '../../agent/runtime/control-loop.js';
import { createLiveConfiguration, type LiveConfiguration } from '../../agent/runtime/live-configuration.js';
import { createMaintenance } from '../../agent/runtime/maintenance.js';
import { createSerialRunner } from '../../agent/runtime/serial-runner.js';
import { type AgentStore, openAgentStore } from '../../agent/store/agent-store.js';
import { createUpdateRunner } from '../../agent/updates/update-runner.js';
import { createSimulatedHal, type SimulatedHal } from '../../simulators/simulated-hal.js';
import { quietLogger } from './agent.js';

/**
 * The command executor's test rig (command-executor.test.ts): a real store in a directory, the simulated HAL, the
 * control loop and the executor over them, the update runner if asked; and the status reports it queued.
 */

export const connectors: ConnectorInfo[] = [
  { connectorId: 1, ratedPowerKw: 22, v2gCapable: false },
  { connectorId: 2, ratedPowerKw: 22, v2gCapable: true },
];
export const ev = { capacityKwh: 80, soc: 50, maxChargeKw: 22, maxDischargeKw: 11 };
export const inMinutes = (m: number) => new Date(Date.now() + m * 60_000).toISOString();

export interface Rig {
  store: AgentStore;
  hal: SimulatedHal;
  loop: ControlLoop;
  executor: CommandExecutor;
  reports: () => Array<{
    command_id: string;
    status: string;
    reason?: string;
    result?: Record<string, unknown>;
  }>;
  run(...commands: IncomingCommand[]): Promise<void>;
  /** With `maintenance`: the live configuration, what it set on its targets, and the restarts asked for. */
  configuration?: LiveConfiguration;
  applied: { heartbeatMs: number[]; intervals: Array<{ activeMs: number; idleMs: number }> };
  restarts: number;
  recheck(): void;
}

export interface RigOptions {
  hal?: SimulatedHal;
  withUpdates?: boolean;
  /** Remote maintenance (agent/runtime/maintenance.ts); `restart: false` leaves the agent without one. */
  maintenance?: { restart?: boolean };
}

export function rig(dir: string, hal?: SimulatedHal, withUpdates = false): Rig {
  return rigWith(dir, { ...(hal ? { hal } : {}), withUpdates });
}

export function rigWith(dir: string, options: RigOptions): Rig {
  const { hal, withUpdates = false } = options;
  const store = openAgentStore(dir);
  const simulated =
    hal ??
    createSimulatedHal({
      connectors: 2,
      v2g: true,
      seed: 1,
      vehicles: 'manual',
      meanTimeBetweenFaultsMs: Number.POSITIVE_INFINITY,
    });
  // The agent judges commands by its declared connectors: 1 without V2G, 2 with.
  const runner = createSerialRunner();
  const logger = quietLogger();
  const loop = createControlLoop({
    store,
    hal: simulated,
    runner,
    clock: systemClock,
    logger,
    connectors: () => connectors,
  });
  // The real update runner, trusting no key: it refuses every update, saying so.
  const updates = withUpdates
    ? createUpdateRunner({
        store,
        hal: simulated,
        clock: systemClock,
        logger,
        dir: `${dir}/updates`,
        keys: [],
        target: {},
        source: () => undefined,
        busyConnectors: async () => [],
        schedules: () => [],
        runExclusive: (work) => runner.run(work),
        runningVersion: '0.1.0',
      })
    : undefined;
  const applied: Rig['applied'] = { heartbeatMs: [], intervals: [] };
  let restarts = 0;
  const configuration = options.maintenance
    ? createLiveConfiguration({
        store,
        fromFile: { log_level: 'info' },
        tuned: { pollWaitSeconds: 25, telemetryActiveMs: 5_000, telemetryIdleMs: 60_000 },
      })
    : undefined;
  const maintenance =
    options.maintenance && configuration
      ? createMaintenance({
          store,
          hal: simulated,
          clock: systemClock,
          logger,
          controlLoop: loop,
          runner,
          configuration,
          configurationTargets: () => ({
            heartbeat: { setIntervalMs: (ms) => applied.heartbeatMs.push(ms) },
            sampler: { setIntervals: (i) => applied.intervals.push(i) },
            logger,
          }),
          drain: async () => undefined,
          ...(options.maintenance.restart !== false
            ? {
                restart: () => {
                  restarts += 1;
                },
              }
            : {}),
        })
      : undefined;
  const executor = createCommandExecutor({
    store,
    hal: simulated,
    controlLoop: loop,
    runner,
    clock: systemClock,
    logger,
    connectors: () => connectors,
    ...(updates ? { updates: () => updates } : {}),
    ...(maintenance ? { maintenance: () => maintenance, onReport: () => maintenance.recheck() } : {}),
  });
  return {
    store,
    hal: simulated,
    loop,
    executor,
    ...(configuration ? { configuration } : {}),
    applied,
    get restarts() {
      return restarts;
    },
    recheck: () => maintenance?.recheck(),
    reports: () =>
      store.outbox.peek(1000, 'command_status').map(
        (i) =>
          i.payload as {
            command_id: string;
            status: string;
            reason?: string;
            result?: Record<string, unknown>;
          },
      ),
    async run(...commands) {
      executor.receive(commands);
      await executor.idle();
    },
  };
}

export function statusesOf(r: Rig, commandId: string): string[] {
  return r
    .reports()
    .filter((p) => p.command_id === commandId)
    .map((p) => p.status);
}
export function finalReason(r: Rig, commandId: string): string | undefined {
  return r
    .reports()
    .filter((p) => p.command_id === commandId)
    .at(-1)?.reason;
}
