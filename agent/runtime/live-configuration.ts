/**
 * Applies the remote configuration (DESIGN.md §20) to the running agent without a restart: the heartbeat and
 * telemetry cadences, the long poll's wait, the log level and the secret rotation. The operator's values are
 * stored in the agent's store (state `configuration`), so they hold across restarts and win over the config file.
 *
 * At start only keys the operator has set are applied: the rest keep the agent's tuning (which tests and the
 * fleet simulator shorten; on a charger it is the table's defaults) and the config file.
 */
import type { Logger } from 'pino';
import type { ConfigurationChange } from '../../shared/configuration.js';
import { type RunningConfiguration, runningConfiguration } from '../core/remote-configuration.js';
import type { AgentStore } from '../store/agent-store.js';

export interface ConfigurationTargets {
  heartbeat: { setIntervalMs(ms: number): void };
  sampler: { setIntervals(intervals: { activeMs: number; idleMs: number }): void };
  logger: Logger;
}

export interface LiveConfiguration {
  /** Every key with the value the charger runs with. */
  values(): RunningConfiguration;
  pollWaitSeconds(): number;
  secretRotationDays(): number;
  /** The values a change would leave, without storing it. */
  preview(change: ConfigurationChange): RunningConfiguration;
  /** Stores a change (call it inside the transaction that reports the command); `apply` then makes it live. */
  store(change: ConfigurationChange): void;
  /** Makes the operator's stored values live (at start, and after `store`). */
  apply(targets: ConfigurationTargets): void;
}

export interface LiveConfigurationOptions {
  store: AgentStore;
  /** The values the agent starts with before the operator's: its config file's and its tuning's. */
  fromFile: Partial<RunningConfiguration>;
  /** What the tuning runs at before the operator's values, ms (tests shorten these). */
  tuned: { pollWaitSeconds: number; telemetryActiveMs: number; telemetryIdleMs: number };
}

export function createLiveConfiguration(options: LiveConfigurationOptions): LiveConfiguration {
  const { store, tuned } = options;
  let setRemotely: ConfigurationChange = store.getState('configuration') ?? {};
  const values = () => runningConfiguration(options.fromFile, setRemotely);

  return {
    values,
    pollWaitSeconds: () => setRemotely.command_poll_wait_seconds ?? tuned.pollWaitSeconds,
    secretRotationDays: () => values().secret_rotation_days as number,
    preview: (change) => runningConfiguration(options.fromFile, { ...setRemotely, ...change }),
    store(change) {
      const next = { ...setRemotely, ...change };
      store.setState('configuration', next);
      setRemotely = next; // after the write: a failed transaction leaves the running values as they were
    },
    apply({ heartbeat, sampler, logger }) {
      const set = setRemotely;
      if (set.heartbeat_interval_seconds !== undefined)
        heartbeat.setIntervalMs(set.heartbeat_interval_seconds * 1000);
      if (set.telemetry_interval_seconds !== undefined || set.idle_telemetry_interval_seconds !== undefined) {
        sampler.setIntervals({
          activeMs: (set.telemetry_interval_seconds ?? tuned.telemetryActiveMs / 1000) * 1000,
          idleMs: (set.idle_telemetry_interval_seconds ?? tuned.telemetryIdleMs / 1000) * 1000,
        });
      }
      if (set.log_level !== undefined && logger.level !== set.log_level) logger.level = set.log_level;
    },
  };
}
