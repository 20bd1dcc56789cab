import { CONFIGURATION_KEYS, type ConfigurationKey } from '../../shared/configuration-table.js';
import type { DiagnosticsStatus } from '../../shared/diagnostics.js';

/**
 * The charger page's remote-maintenance rules (DESIGN.md §20), pure so that table tests cover them: the
 * configuration table and the checks of an edit, which field an API error names, the diagnostics window and when
 * its status is read again, what a connector's availability command says it did.
 */

/**
 * The configuration table itself (shared/configuration-table.ts, a module without zod, so it may enter the
 * bundle): bounds, defaults, units and descriptions as the platform checks them.
 */
export const CONFIGURATION_TABLE = CONFIGURATION_KEYS;
export const CONFIGURATION_KEY_ORDER = Object.keys(CONFIGURATION_TABLE) as ConfigurationKey[];

export type ReportedValue = string | number | boolean;

const isTableKey = (key: string): key is ConfigurationKey => Object.hasOwn(CONFIGURATION_TABLE, key);

/** A reported value as the page shows it and as an edit starts from; empty before any report. */
export function valueText(value: ReportedValue | undefined): string {
  return value === undefined ? '' : String(value);
}

/** "1–60 s", "0–3650 days", "debug, info, warn, error". */
export function boundsText(key: ConfigurationKey): string {
  const spec = CONFIGURATION_TABLE[key];
  if (spec.type === 'choice') return spec.choices.join(', ');
  return `${spec.min}–${spec.max} ${spec.unit}`;
}

/** Keys the charger reported that this table does not know (a newer agent): shown, not editable. */
export function unknownReportedKeys(values: Record<string, ReportedValue>): string[] {
  return Object.keys(values)
    .filter((k) => !isTableKey(k))
    .sort();
}

export interface ConfigurationEdit {
  /** The changed keys with their values, as `PATCH …/configuration`'s `values`. */
  values: Partial<Record<ConfigurationKey, string | number>>;
  /** Why a typed value cannot be sent, by key. */
  errors: Partial<Record<ConfigurationKey, string>>;
}

/**
 * What an edit of the table sends: each key whose typed text differs from the text it started from (the reported
 * value, or the default before any report), checked against the table first. A key with an error is not sent;
 * the page sends nothing while any key has one.
 */
export function configurationEdit(
  typed: Partial<Record<ConfigurationKey, string>>,
  startedFrom: Partial<Record<ConfigurationKey, string>>,
): ConfigurationEdit {
  const edit: ConfigurationEdit = { values: {}, errors: {} };
  for (const key of CONFIGURATION_KEY_ORDER) {
    const text = (typed[key] ?? '').trim();
    if (text === (startedFrom[key] ?? '').trim()) continue;
    const spec = CONFIGURATION_TABLE[key];
    if (spec.type === 'choice') {
      if ((spec.choices as readonly string[]).includes(text)) edit.values[key] = text;
      else edit.errors[key] = `must be one of ${spec.choices.join(', ')}`;
      continue;
    }
    const n = Number(text);
    if (text === '' || !Number.isInteger(n) || n < spec.min || n > spec.max) {
      edit.errors[key] = `must be a whole number from ${spec.min} to ${spec.max}`;
    } else {
      edit.values[key] = n;
    }
  }
  return edit;
}

/** The table's key an API validation error names (`details.field`: `values.log_level`), for the message's place. */
export function configurationFieldOf(
  details: Record<string, unknown> | undefined,
): ConfigurationKey | undefined {
  const field = details?.field;
  if (typeof field !== 'string') return undefined;
  const [head, key] = field.split('.');
  return head === 'values' && key !== undefined && isTableKey(key) ? key : undefined;
}

/** Whether the reported configuration holds every value a change set (the charger applied it and reported). */
export function reportedHolds(
  reported: Record<string, ReportedValue>,
  sent: Partial<Record<ConfigurationKey, string | number>>,
): boolean {
  return Object.entries(sent).every(([k, v]) => reported[k] === v);
}

export const RESET_TARGETS = ['agent', 'charger'] as const;
export const RESET_MODES = ['when_idle', 'immediate'] as const;
export type ResetTarget = (typeof RESET_TARGETS)[number];
export type ResetMode = (typeof RESET_MODES)[number];

/** The confirmation's words: what the restart will do to the charger. */
export function resetConsequence(target: ResetTarget, mode: ResetMode): string {
  const what =
    target === 'charger'
      ? 'The charger reboots: every session on it ends and it is offline until it is back.'
      : 'The charger’s agent restarts: for a few seconds it sends nothing and takes no commands.';
  const when =
    mode === 'immediate'
      ? 'It happens as soon as the charger gets the command, even while a vehicle charges.'
      : 'It waits until no connector charges or discharges.';
  return `${what} ${when}`;
}

/** A boot event among `events` that was not there before the restart was sent: the agent came back. */
export function newBoot<E extends { event_id: string; kind: string }>(
  events: readonly E[],
  before: ReadonlySet<string>,
): E | undefined {
  return events.find((e) => e.kind === 'boot' && !before.has(e.event_id));
}

/**
 * What a `set_availability` that succeeded says the connector does: a charging connector goes out of service
 * only once its vehicle leaves (`result.effective: "when_vehicle_leaves"`).
 */
export function availabilityNote(available: boolean, result: Record<string, unknown> | undefined): string {
  if (available) return 'Back in service.';
  return result?.effective === 'when_vehicle_leaves'
    ? 'Out of service once the current session ends.'
    : 'Out of service.';
}

export const DIAGNOSTICS_WINDOWS = [
  { value: '1h', label: 'Last hour', hours: 1 },
  { value: '24h', label: 'Last 24 hours', hours: 24 },
  { value: '7d', label: 'Last 7 days', hours: 24 * 7 },
] as const;
export type DiagnosticsWindow = (typeof DIAGNOSTICS_WINDOWS)[number]['value'];
export const DEFAULT_DIAGNOSTICS_WINDOW: DiagnosticsWindow = '24h';

/** `POST …/diagnostics`'s body for a window ending now. */
export function diagnosticsRequest(
  window: DiagnosticsWindow,
  nowMs: number,
): { start_time: string; end_time: string } {
  const hours = DIAGNOSTICS_WINDOWS.find((w) => w.value === window)?.hours ?? 24;
  return {
    start_time: new Date(nowMs - hours * 3_600_000).toISOString(),
    end_time: new Date(nowMs).toISOString(),
  };
}

/** How often a requested archive's status is read while the charger builds and uploads it. */
export const DIAGNOSTICS_POLL_MS = 2_000;

/** Requested or uploading: the page reads it again; available or failed: it stops. */
export function diagnosticsPending(status: DiagnosticsStatus): boolean {
  return status === 'requested' || status === 'uploading';
}

/** The name a downloaded archive is saved under. */
export function diagnosticsFileName(diagnosticsId: string): string {
  return `${diagnosticsId}.tar.gz`;
}
