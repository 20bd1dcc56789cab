import type { Logger } from 'pino';
import type { Dispatcher } from 'undici';
import { type AgentRuntime, startAgent } from '../../agent/runtime/agent-runtime.js';
import { createSimulatedHal, type SimulatedHal } from '../../simulators/simulated-hal.js';
import { quietLogger, tempDir } from './agent.js';
import type { createTenant, TestPlatform } from './platform.js';

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
  tp: TestPlatform;
  tenant: Awaited<ReturnType<typeof createTenant>>;
  /** Where the agents connect (a proxy in front of the platform). */
  port: number;
  dispatcher: Dispatcher;
}

export function maintenanceChargers(context: () => MaintenanceChargersContext) {
  const running: MaintenanceCharger[] = [];
  const dirs: Array<{ remove(): void }> = [];

  async function start(sn: string, options: { logger?: Logger } = {}): Promise<MaintenanceCharger> {
    const { tp, tenant, port, dispatcher } = context();
    const tmp = tempDir();
    dirs.push(tmp);
    const hal = createSimulatedHal({
      connectors: 2,
      seed: 5,
      vehicles: 'manual',
      meanTimeBetweenFaultsMs: Number.POSITIVE_INFINITY,
      tickIntervalMs: 200,
    });
    let runtime: AgentRuntime;
    let restarting: Promise<void> | undefined;
    const launch = () =>
      startAgent({
        config: { dataDir: tmp.dir, platformUrl: `https://127.0.0.1:${port}`, sn, model: 'MNT-1' },
        hal,
        logger: options.logger ?? quietLogger(),
        dispatcher,
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
    await tp.store.assignDevice(charger.deviceId, tenant.siteId);
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
