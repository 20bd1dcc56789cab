/**
 * The update runner as the running agent builds it (agent-runtime.ts): its reads of the charger go through the
 * serial runner, its downloads through the platform client once registered, and a trial release's health is
 * judged from what this start has done (DESIGN.md §19: a token, a heartbeat, a control pass and a HAL read).
 */
import type { KeyObject } from 'node:crypto';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { ConnectorInfo, Hal } from '../hal.js';
import type { DeviceApi } from '../link/platform-client.js';
import type { ControlLoop } from '../runtime/control-loop.js';
import type { SerialRunner } from '../runtime/serial-runner.js';
import type { AgentStore } from '../store/agent-store.js';
import type { FreeSpaceReader } from './artifact-download.js';
import type { AgentReleases } from './update-install.js';
import { createUpdateRunner, type UpdateRunner, updatesDirOf } from './update-runner.js';

/** What the agent's start knows about updates beyond its configuration. */
export interface AgentUpdateOptions {
  /** The A/B release layer bound to its layout (`releaseLayoutFromEnv()`); absent: no agent updates. */
  releases?: AgentReleases;
  /** The bundle's build target (`linux-arm64`...), for an agent artifact's `target`. */
  agentTarget?: string;
  /** Stops the agent gracefully and exits with the launcher's restart code. */
  requestRestart?: () => void;
  freeSpace?: FreeSpaceReader;
}

export interface UpdateWiring {
  dataDir: string;
  store: AgentStore;
  hal: Hal;
  clock: Clock;
  logger: Logger;
  random: () => number;
  keys: readonly KeyObject[];
  model?: string;
  connectors: readonly ConnectorInfo[];
  runner: SerialRunner;
  controlLoop: ControlLoop;
  api: () => DeviceApi | undefined;
  startedAt: number;
  /** The version this start runs as (AGENT_VERSION unless a simulated release layer runs another). */
  agentVersion: string;
  onReport: () => void;
  options?: AgentUpdateOptions;
}

export function wireUpdateRunner(w: UpdateWiring): UpdateRunner {
  const { store, hal, runner } = w;
  const busyConnectors = () =>
    runner.run(async () => {
      const busy: number[] = [];
      for (const c of w.connectors) {
        // A connector that cannot be read may be charging: an install waits for it.
        const state = await hal.readConnector(c.connectorId).then(
          (r) => r.state,
          () => 'unknown' as const,
        );
        if (state !== 'idle' && state !== 'fault') busy.push(c.connectorId);
      }
      return busy;
    });
  const healthy = async () => {
    const beat = store.getState('last_heartbeat');
    if (!beat?.ok || Date.parse(beat.at) < w.startedAt) return false;
    return runner
      .run(async () => {
        await w.controlLoop.applyNow();
        const first = w.connectors[0];
        if (first) await hal.readConnector(first.connectorId);
        return true;
      })
      .catch(() => false);
  };
  const extra = w.options ?? {};
  return createUpdateRunner({
    store,
    hal,
    clock: w.clock,
    logger: w.logger,
    dir: updatesDirOf(w.dataDir),
    keys: w.keys,
    target: {
      ...(extra.agentTarget !== undefined ? { agentTarget: extra.agentTarget } : {}),
      ...(w.model !== undefined ? { model: w.model } : {}),
    },
    source: () => {
      const api = w.api();
      return api ? (id, request) => api.downloadArtifact(id, request) : undefined;
    },
    busyConnectors,
    schedules: () => store.listSchedules().map((s) => s.schedule),
    runExclusive: (work) => runner.run(work),
    ...(extra.releases ? { releases: extra.releases } : {}),
    runningVersion: w.agentVersion,
    healthy,
    ...(extra.requestRestart ? { requestRestart: extra.requestRestart } : {}),
    random: w.random,
    ...(extra.freeSpace ? { freeSpace: extra.freeSpace } : {}),
    onReport: w.onReport,
  });
}
