/**
 * The fleet's inventory (DESIGN.md §19), pure: which versions a charger's reports say it runs. Services store
 * what these answer; storage only moves it.
 */
import type { ArtifactKind } from '../../shared/artifacts.js';
import type { FirmwareState } from '../../shared/device-api.js';
import { WITHOUT_CONTROL_CHARACTERS } from '../../shared/primitives.js';

/** The versions to store on the device; an absent one is left as it is. */
export interface ReportedVersions {
  firmware_version?: string;
  agent_version?: string;
}

/** The bound of `firmware_version` at registration, applied to any version a charger reports. */
export const VERSION_MAX_LENGTH = 64;

/**
 * What a firmware status report changes in the inventory: only `installed` with a `version` does.
 * - Without `update_id` (every report before DESIGN.md §19): the version is the firmware's, as it always was.
 * - With `update_id`: the update's kind says which (`updateKind`); the report alone does not say agent or
 *   firmware, so while the kind is unknown nothing changes.
 */
export function versionsFromFirmwareReport(
  report: {
    status: FirmwareState | string;
    version?: string | null | undefined;
    update_id?: string | null | undefined;
  },
  updateKind: ArtifactKind | undefined,
): ReportedVersions {
  if (report.status !== 'installed' || !report.version) return {};
  if (report.update_id === undefined || report.update_id === null)
    return { firmware_version: report.version };
  if (updateKind === 'agent') return { agent_version: report.version };
  if (updateKind === 'firmware') return { firmware_version: report.version };
  return {};
}

/** A plausible version: what registration would accept for `firmware_version`. */
export function isVersionText(value: unknown): value is string {
  return (
    typeof value === 'string' &&
    value.length > 0 &&
    value.length <= VERSION_MAX_LENGTH &&
    WITHOUT_CONTROL_CHARACTERS.test(value)
  );
}

/**
 * The agent's version from a charger's events (the agent's `boot` event carries `data.version`): that of the
 * newest boot among `events` with a plausible version, or undefined. Only events newly stored should be given,
 * so that a replay changes nothing.
 */
export function agentVersionFromEvents(
  events: ReadonlyArray<{ kind: string; ts_ms: number; data: Record<string, unknown> | null }>,
): string | undefined {
  let newest: { ts_ms: number; version: string } | undefined;
  for (const e of events) {
    const version = e.data?.version;
    if (e.kind !== 'boot' || !isVersionText(version)) continue;
    if (!newest || e.ts_ms >= newest.ts_ms) newest = { ts_ms: e.ts_ms, version };
  }
  return newest?.version;
}
