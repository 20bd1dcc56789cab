/**
 * Remote maintenance (DESIGN.md §20), pure: what a finished `set_availability` command does to its connector, and
 * which configuration a charger's events report. Services hand these to storage; storage only moves them.
 */
import { SetAvailabilityParams } from '../../shared/commands.js';
import { CONFIGURATION_EVENT_KIND, reportedConfiguration } from '../../shared/configuration.js';

/**
 * The connector availability a command now in `status` sets: only a `set_availability` that succeeded does, to
 * what its own params say (the platform trusts what it asked for, not what the charger's result repeats).
 */
export function availabilityAfter(command: {
  command: string;
  status: string;
  params: Record<string, unknown>;
}): { connector_id: number; available: boolean } | undefined {
  if (command.command !== 'set_availability' || command.status !== 'succeeded') return undefined;
  const params = SetAvailabilityParams.safeParse(command.params);
  return params.success ? params.data : undefined;
}

/**
 * The newest configuration report among a charger's events, as the platform keeps it (`reportedConfiguration`):
 * its values and its timestamp; undefined when there is none. Storage keeps it only if it is newer than what it
 * holds, so a replayed or late report changes nothing.
 */
export function configurationFromEvents(
  events: ReadonlyArray<{ kind: string; ts_ms: number; data: Record<string, unknown> | null }>,
): { values: Record<string, string | number | boolean>; reported_at_ms: number } | undefined {
  let newest: { ts_ms: number; data: Record<string, unknown> | null } | undefined;
  for (const e of events) {
    if (e.kind !== CONFIGURATION_EVENT_KIND) continue;
    if (!newest || e.ts_ms > newest.ts_ms) newest = e;
  }
  return newest && { values: reportedConfiguration(newest.data ?? {}), reported_at_ms: newest.ts_ms };
}

/** The keys whose value differs between two reported configurations (every key of `next` when there was none). */
export function changedKeys(
  previous: Readonly<Record<string, unknown>> | undefined,
  next: Readonly<Record<string, unknown>>,
): string[] {
  const keys = new Set([...Object.keys(previous ?? {}), ...Object.keys(next)]);
  return [...keys].filter((key) => previous?.[key] !== next[key]).sort();
}
