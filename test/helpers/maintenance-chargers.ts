import type { Logger } from 'pino';
import type { Dispatcher } from 'undici';
import { type AgentRuntime, startAgent } from '../../agent/runtime/agent-runtime.js';
import { createSimulatedHal, type SimulatedHal } from '../../simulators/simulated-hal.js';
import type { MaintenanceFault } from '../../simulators/simulated-maintenance.js';
import { quietLogger, tempDir } from './agent.js';

/**
 * Real agents (in process, simulated HAL) for the remote-maintenance tests, restartable the way the launcher
 * restarts one: `restart()` stops the runtime and starts a new one on the same data directory and the same
 * (simulated) hardware. A `reset` command calls it.
 */
export interface MaintenanceCharger {
  hal: SimulatedHal;
  dataDir: string;
  deviceId: string;
  current(): AgentRuntime;
  restarts: number;
  restart(): Promise<void>;
  stop(): Promise<void>;
}

export interface MaintenanceChargersContext {
  /** Where the agents connect (https://HOST:PORT: the platform, or a proxy in front of it). */
  platformUrl: string;
  /** The agents' HTTP pool (one that trusts the platform's CA), or the CA itself. */
  dispatcher?: Dispatcher;
  ca?: string;
  /** Puts a newly registered charger where the operator sees it (a test tenant's site). */
  assign?: (deviceId: string) => Promise<unknown>;
}

export interface MaintenanceChargerOptions {
  logger?: Logger;
  seed?: number;
  /** Remote-maintenance faults of its simulated HAL (`no_reboot`...). */
  maintenanceFaults?: MaintenanceFault[];
}

export function maintenanceChargers(context: () => MaintenanceChargersContext) {
  const running: MaintenanceCharger[] = [];
  const dirs: Array<{ remove(): void }> = [];

  async function start(sn: string, options: MaintenanceChargerOptions = {}): Promise<MaintenanceCharger> {
    const { platformUrl, dispatcher, ca, assign } = context();
    const tmp = tempDir();
    dirs.push(tmp);
    const hal = createSimulatedHal({
      connectors: 2,
      seed: options.seed ?? 5,
      vehicles: 'manual',
      meanTimeBetweenFaultsMs: Number.POSITIVE_INFINITY,
      tickIntervalMs: 200,
      ...(options.maintenanceFaults ? { maintenanceFaults: options.maintenanceFaults } : {}),
    });
    let runtime: AgentRuntime;
    let restarting: Promise<void> | undefined;
    const launch = () =>
      startAgent({
        config: { dataDir: tmp.dir, platformUrl, sn, model: 'MNT-1', ...(ca !== undefined ? { ca } : {}) },
        hal,
        logger: options.logger ?? quietLogger(),
        ...(dispatcher ? { dispatcher } : {}),
        restart: () => void charger.restart(),
        tuning: {
          heartbeatIntervalMs: 1_000,
          pollWaitSeconds: 2,
          telemetry: { activeMs: 2_000, idleMs: 4_000 },
          sampleTickMs: 2_000,
          backoff: { baseMs: 50, capMs: 500 },
          flushPaceMs: 10,
          controlSafetyIntervalMs: 1_000,
          shutdownFlushMs: 1_000,
          shutdownHeartbeatMs: 500,
        },
      });
    const charger: MaintenanceCharger = {
      hal,
      dataDir: tmp.dir,
      deviceId: '',
      current: () => runtime,
      restarts: 0,
      restart: () => {
        restarting ??= (async () => {
          await runtime.stop();
          runtime = await launch();
          charger.restarts += 1;
        })().finally(() => {
          restarting = undefined;
        });
        return restarting;
      },
      stop: async () => {
        await restarting;
        await runtime.stop();
      },
    };
    runtime = await launch();
    const identity = await runtime.registered;
    charger.deviceId = identity!.deviceId;
    await assign?.(charger.deviceId);
    running.push(charger);
    return charger;
  }

  return {
    start,
    async stopAll() {
      await Promise.all(running.splice(0).map((c) => c.stop().catch(() => undefined)));
    },
    removeDirs() {
      for (const d of dirs.splice(0)) d.remove();
    },
  };
}
