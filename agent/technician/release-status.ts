/**
 * The A/B releases part of `charger-agent status` (DESIGN.md §19): the current and previous release, and a
 * trial or a rollback under way. Read-only; shown under the launcher (env CHARGER_AGENT_PREFIX) or with
 * `--prefix DIR`.
 */
import type { RollbackOutcome, TrialRecord } from '../core/release-trial.js';
import {
  currentVersion,
  installedVersions,
  PREFIX_ENV,
  type ReleaseLayout,
} from '../updates/release-files.js';
import { readRollbackFile, readTrialFile } from '../updates/release-trial-files.js';
import { relative, when } from './format.js';

export interface ReleasesReport {
  prefix: string;
  current: string | null;
  /** The release a rollback returns to: the trial's old one, else the one other release kept. */
  previous: string | null;
  installed: string[];
  trial: (TrialRecord & { rolling_back: string | null }) | null;
  /** A rollback the launcher performed that the old release has not reported yet. */
  rollback: RollbackOutcome | null;
}

/** `--prefix DIR`, else the launcher's CHARGER_AGENT_PREFIX, else no A/B install. */
export function releaseLayoutFor(prefix: string | undefined, env = process.env): ReleaseLayout | undefined {
  const dir = prefix ?? env[PREFIX_ENV];
  return dir ? { prefix: dir } : undefined;
}

export function collectReleases(layout: ReleaseLayout): ReleasesReport {
  const current = currentVersion(layout) ?? null;
  const installed = installedVersions(layout);
  const trial = readTrialFile(layout);
  const others = installed.filter((v) => v !== current);
  const rollback = readRollbackFile(layout);
  return {
    prefix: layout.prefix,
    current,
    previous: trial?.from_version ?? (others.length === 1 ? (others[0] ?? null) : null),
    installed,
    trial: trial
      ? {
          update_id: trial.update_id,
          command_id: trial.command_id,
          from_version: trial.from_version,
          to_version: trial.to_version,
          started_at: trial.started_at,
          deadline_at: trial.deadline_at,
          failed_starts: trial.failed_starts,
          rolling_back: trial.rollback?.reason ?? null,
        }
      : null,
    rollback: rollback ?? null,
  };
}

/** The terminal lines (label, text) for the releases. */
export function releaseFields(r: ReleasesReport, now: number): Array<[string, string]> {
  const fields: Array<[string, string]> = [
    ['Release', `${r.current ?? 'none'}${r.previous ? ` (previous ${r.previous})` : ''} in ${r.prefix}`],
  ];
  if (r.trial) {
    const t = r.trial;
    fields.push([
      'Trial',
      t.rolling_back !== null
        ? `rolling back ${t.to_version} → ${t.from_version}: ${t.rolling_back}`
        : `${t.from_version} → ${t.to_version} (update ${t.update_id}) since ${relative(t.started_at, now)}, ` +
          `commits by ${when(t.deadline_at, now)}; failed starts ${t.failed_starts}`,
    ]);
  }
  if (r.rollback) {
    const b = r.rollback;
    fields.push([
      'Rolled back',
      `${b.to_version} → ${b.from_version} ${relative(b.rolled_back_at, now)} (update ${b.update_id}): ${b.reason}`,
    ]);
  }
  return fields;
}
