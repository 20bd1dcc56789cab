/**
 * The charger's remote configuration (DESIGN.md §20), decided without touching anything: the values it runs with
 * (the table's defaults, then its config file, then what the operator set), what a change reads as in its
 * report, and the event that reports the whole configuration to the platform.
 */
import {
  CONFIGURATION_EVENT_KIND,
  CONFIGURATION_KEY_NAMES,
  type ConfigurationChange,
  type ConfigurationKey,
  DEFAULT_CONFIGURATION,
} from '../../shared/configuration.js';
import type { DeviceEvent } from '../../shared/device-api.js';
import { iso } from '../clock.js';

/**
 * Every key with the value the charger runs with. A value from the config file may lie outside what an operator
 * can set (log level `trace`): it is reported as it is.
 */
export type RunningConfiguration = Record<ConfigurationKey, string | number>;

/** What the charger runs with: the defaults, the config file's values over them, the operator's over both. */
export function runningConfiguration(
  fromFile: Partial<RunningConfiguration>,
  setRemotely: ConfigurationChange | undefined,
): RunningConfiguration {
  return { ...DEFAULT_CONFIGURATION, ...fromFile, ...setRemotely };
}

/** The keys whose value a change moves, each as `key old → new`; empty when it moves none. */
export function describeChange(before: RunningConfiguration, after: RunningConfiguration): string[] {
  return CONFIGURATION_KEY_NAMES.filter((key) => before[key] !== after[key]).map(
    (key) => `${key} ${before[key]} → ${after[key]}`,
  );
}

/** The report of the whole configuration (on every start and after every change). */
export function configurationEvent(values: RunningConfiguration, atMs: number, eventId: string): DeviceEvent {
  return {
    event_id: eventId,
    kind: CONFIGURATION_EVENT_KIND,
    severity: 'info',
    timestamp: iso(atMs),
    data: { ...values },
  };
}
