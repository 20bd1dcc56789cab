/**
 * What the update runner (update-runner.ts) is built with; its install steps (update-steps.ts) read the same,
 * so the options live apart from both.
 */
import type { KeyObject } from 'node:crypto';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { StoredSchedule } from '../core/schedule-engine.js';
import type { UpdateTargetContext } from '../core/update-manifest.js';
import type { Hal } from '../hal.js';
import type { AgentStore } from '../store/agent-store.js';
import type { ArtifactSource, FreeSpaceReader } from './artifact-download.js';
import type { AgentReleases } from './update-install.js';

export interface UpdateRunnerOptions {
  store: AgentStore;
  hal: Hal;
  clock: Clock;
  logger: Logger;
  /** `DATA_DIR/updates`. */
  dir: string;
  keys: readonly KeyObject[];
  target: Omit<UpdateTargetContext, 'trustedKeys'>;
  /** The platform's download, once the agent is registered. */
  source: () => ArtifactSource | undefined;
  /** Connectors charging or discharging now (read on the serial runner). */
  busyConnectors: () => Promise<number[]>;
  schedules: () => StoredSchedule[];
  /** Runs HAL work that must not interleave with commands and control passes (the serial runner). */
  runExclusive: <T>(work: () => Promise<T>) => Promise<T>;
  /** The A/B release layer; absent when the agent was not installed with `charger-agent install`. */
  releases?: AgentReleases;
  runningVersion: string;
  /** The trial release's commit conditions: a token, a heartbeat, a control pass and a HAL read since start. */
  healthy?: () => Promise<boolean>;
  /** Ends the process so the launcher starts the staged release (after a graceful stop). */
  requestRestart?: () => void;
  random?: () => number;
  freeSpace?: FreeSpaceReader;
  /** A report was queued (the uplink wakes up). */
  onReport?: () => void;
}
