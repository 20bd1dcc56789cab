/**
 * A/B agent releases (DESIGN.md §19), the agent's side: the update runner stages a verified bundle as a trial
 * and exits with RESTART_EXIT_CODE; the launcher (release-launcher.ts) starts the new release, which commits
 * once healthy, or rolls it back. Layout and power-cut safety: release-files.ts.
 *
 * Staging, step by step (each safe to cut; the launcher's next start repairs, release-trial-files.ts):
 * unpack into releases/.staging-* and check the bundle → snapshot the store → move the release into place →
 * record the trial (the point of no return: from here on a start runs the new release in trial) → swap
 * `current`. A refusal before the trial is recorded removes what it made and changes nothing else.
 */
import { existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import path from 'node:path';
import { ARTIFACT_NAME } from '../../shared/artifact-manifest.js';
import { type BundleTarget, checkBundle, parseBundleManifest } from '../core/release-checks.js';
import {
  newTrial,
  RESTART_EXIT_CODE,
  type RollbackOutcome,
  releasesToPrune,
  type TrialRecord,
} from '../core/release-trial.js';
import {
  currentVersion,
  fsyncPath,
  installedVersions,
  killPoint,
  PREFIX_ENV,
  pointCurrentAt,
  type ReleaseLayout,
  readJsonFile,
  releaseDir,
  releasesDir,
  removeDurably,
  removeRelease,
  rollbackFile,
  snapshotFile,
  tempName,
  trialFile,
  writeJsonAtomic,
} from './release-files.js';
import { readRollbackFile, readTrialFile } from './release-trial-files.js';
import { unpackBundle } from './release-unpack.js';

export type { RollbackOutcome, TrialRecord } from '../core/release-trial.js';
export type { ReleaseLayout } from './release-files.js';
export { RESTART_EXIT_CODE };

/** The A/B layout this process runs from (env CHARGER_AGENT_PREFIX set by the launcher), else undefined. */
export function releaseLayoutFromEnv(env: NodeJS.ProcessEnv = process.env): ReleaseLayout | undefined {
  const prefix = env[PREFIX_ENV];
  return prefix ? { prefix: path.resolve(prefix) } : undefined;
}

export interface StageInput {
  archive: string;
  version: string;
  snapshot: (toFile: string) => Promise<void>;
  trial: { update_id: string; command_id: string };
  healthSeconds: number;
  now: number;
}

export type StageResult = { ok: true } | { ok: false; reason: string };

/** Why staging cannot begin at all, or the version running now. */
function precheck(layout: ReleaseLayout, input: StageInput): { from: string } | { reason: string } {
  const from = currentVersion(layout);
  if (from === undefined) return { reason: `${layout.prefix} is not an A/B install (no current release)` };
  if (existsSync(trialFile(layout))) return { reason: 'a trial of another release is under way' };
  if (!ARTIFACT_NAME.test(input.version))
    return { reason: `${JSON.stringify(input.version)} is not a version` };
  if (input.version === from) return { reason: `${from} is already the current release` };
  if (!Number.isFinite(input.healthSeconds) || input.healthSeconds <= 0)
    return { reason: 'the health time must be a positive number of seconds' };
  return { from };
}

/** The target of the running release (its package.json), or why it cannot be read. */
function runningTarget(layout: ReleaseLayout, version: string) {
  const read = readJsonFile(path.join(releaseDir(layout, version), 'package.json'));
  const manifest = read === undefined || read === 'malformed' ? undefined : parseBundleManifest(read.value);
  return manifest === undefined || 'error' in manifest ? undefined : manifest;
}

async function takeSnapshot(layout: ReleaseLayout, snapshot: StageInput['snapshot']): Promise<StageResult> {
  const tmp = tempName(snapshotFile(layout));
  try {
    await snapshot(tmp);
    killPoint('stage-snapshotting');
    fsyncPath(tmp);
    renameSync(tmp, snapshotFile(layout));
    fsyncPath(layout.prefix);
    return { ok: true };
  } catch (error) {
    rmSync(tmp, { force: true });
    const code = (error as NodeJS.ErrnoException).code;
    const why = code === 'ENOSPC' ? 'no room' : (error as Error).message;
    return { ok: false, reason: `cannot snapshot the store: ${why}` };
  }
}

/**
 * Unpacks the verified archive into releases/<version>, checks its Node lines (the running Node must be one)
 * and target (must equal the running bundle's), snapshots the store (`snapshot` writes a consistent copy to the
 * file it is given: VACUUM INTO, or better-sqlite3's backup from the running process's handle), records the
 * trial with its deadline, and swaps current. The caller then exits with RESTART_EXIT_CODE. Refusals (bad
 * archive, wrong target/Node, no room) leave everything as it was and say why.
 */
export async function stageRelease(layout: ReleaseLayout, input: StageInput): Promise<StageResult> {
  const pre = precheck(layout, input);
  if ('reason' in pre) return { ok: false, reason: pre.reason };
  const running = runningTarget(layout, pre.from);
  if (running === undefined)
    return { ok: false, reason: `the running release ${pre.from} has no readable package.json` };
  const staging = path.join(releasesDir(layout), `.staging-${path.basename(tempName(input.version))}`);
  try {
    return await stageSteps(layout, input, { from: pre.from, target: running.target, staging });
  } catch (error) {
    // A failing disk or file system: undo whatever this call made, and say why (never a crash of the agent).
    undoStaging(layout, staging, input.version, pre.from);
    return { ok: false, reason: `cannot stage the release: ${(error as Error).message}` };
  }
}

async function stageSteps(
  layout: ReleaseLayout,
  input: StageInput,
  at: { from: string; target: BundleTarget | null; staging: string },
): Promise<StageResult> {
  const { staging } = at;
  mkdirSync(staging, { recursive: true });
  const refuse = (reason: string): StageResult => {
    rmSync(staging, { recursive: true, force: true });
    return { ok: false, reason };
  };
  const unpacked = await unpackBundle(input.archive, staging);
  if (!unpacked.ok) return refuse(unpacked.reason);
  const fits = checkBundle(unpacked.manifest, {
    version: input.version,
    nodeVersion: process.versions.node,
    runningTarget: at.target,
  });
  if (!fits.ok) return refuse(fits.reason);
  killPoint('stage-unpacked');

  const snapped = await takeSnapshot(layout, input.snapshot);
  if (!snapped.ok) return refuse(snapped.reason);
  killPoint('stage-snapshotted');

  // A release of this version left from before (an earlier trial, or older than the previous) is replaced.
  removeRelease(layout, input.version);
  renameSync(staging, releaseDir(layout, input.version));
  fsyncPath(releasesDir(layout));
  killPoint('stage-release-placed');

  const trial = newTrial({
    ...input.trial,
    from_version: at.from,
    to_version: input.version,
    healthSeconds: input.healthSeconds,
    now: input.now,
  });
  writeJsonAtomic(trialFile(layout), trial);
  killPoint('stage-trial-recorded');
  pointCurrentAt(layout, input.version);
  killPoint('stage-swapped');
  return { ok: true };
}

/** After an unexpected error while staging: back to the old release alone, as far as the disk allows. */
function undoStaging(layout: ReleaseLayout, staging: string, version: string, from: string): void {
  try {
    rmSync(staging, { recursive: true, force: true });
    if (currentVersion(layout) !== from) pointCurrentAt(layout, from);
    if (readTrialFile(layout)?.to_version === version) removeDurably(trialFile(layout));
    removeDurably(snapshotFile(layout));
    removeRelease(layout, version);
  } catch {
    // What is left is what a power cut would leave: the launcher's repair tidies it before the next start.
  }
}

export function readTrial(layout: ReleaseLayout): TrialRecord | undefined {
  return readTrialFile(layout);
}

/** The new release is healthy: the trial is committed (trial record removed, snapshot removed). */
export async function commitTrial(layout: ReleaseLayout): Promise<void> {
  const trial = readTrialFile(layout);
  if (trial === undefined) return;
  if (trial.rollback !== undefined) throw new Error(`the trial of ${trial.to_version} is being rolled back`);
  const current = currentVersion(layout);
  if (current !== trial.to_version)
    throw new Error(`the trial is of ${trial.to_version}, but ${current ?? 'nothing'} is current`);
  // Removing the record is the commit; what follows is tidying a cut may leave to the launcher's repair.
  removeDurably(trialFile(layout));
  killPoint('commit-trial-removed');
  removeDurably(snapshotFile(layout));
  for (const version of releasesToPrune(installedVersions(layout), current, trial.from_version))
    removeRelease(layout, version);
}

/** A rollback the launcher performed, for the old release to report once; cleared by clearRollback. */
export function readRollback(layout: ReleaseLayout): RollbackOutcome | undefined {
  return readRollbackFile(layout);
}

export function clearRollback(layout: ReleaseLayout): void {
  removeDurably(rollbackFile(layout));
}

export function listReleases(layout: ReleaseLayout): { version: string; current: boolean }[] {
  const current = currentVersion(layout);
  return installedVersions(layout).map((version) => ({ version, current: version === current }));
}
