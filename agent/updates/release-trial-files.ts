/**
 * The trial and rollback records of an A/B install, and the two things only the launcher does with them: roll a
 * trial back, and repair whatever a power cut left half done before the agent starts. Node built-ins only (the
 * launcher bundles this module).
 *
 * A rollback is decided by writing the trial file with `rollback` set; every step after that can be repeated,
 * so the launcher's next start finishes a rollback a cut interrupted: restore the store from the snapshot, point
 * `current` at the old release, record the outcome, remove the trial (the rollback is done), then tidy up.
 */
import { chmodSync, copyFileSync, existsSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import path from 'node:path';
import {
  beforeStart,
  parseRollbackOutcome,
  parseTrialFile,
  type RollbackOutcome,
  rollbackOutcome,
  type TrialFile,
} from '../core/release-trial.js';
import {
  currentVersion,
  fsyncPath,
  killPoint,
  pointCurrentAt,
  type ReleaseLayout,
  readJsonFile,
  releaseDir,
  releasesDir,
  removeDurably,
  removeRelease,
  rollbackFile,
  setAside,
  snapshotFile,
  tempName,
  trialFile,
  writeJsonAtomic,
} from './release-files.js';

/** The store's file name in the data directory (agent/store/agent-store.ts; not imported: no SQLite here). */
export const STORE_FILE_NAME = 'agent.sqlite';

/**
 * The trial on disk, or undefined. A malformed file is never taken for a trial; with `onMalformed` (the launcher
 * only: readers may lack the right to move it) it is also set aside and reported.
 */
export function readTrialFile(
  layout: ReleaseLayout,
  onMalformed?: (message: string) => void,
): TrialFile | undefined {
  const read = readJsonFile(trialFile(layout));
  if (read === undefined) return undefined;
  const trial = read === 'malformed' ? undefined : parseTrialFile(read.value);
  if (trial === undefined && onMalformed !== undefined) {
    onMalformed(`${trialFile(layout)} is not a trial record: set aside`);
    setAside(trialFile(layout));
  }
  return trial;
}

export function readRollbackFile(layout: ReleaseLayout): RollbackOutcome | undefined {
  const read = readJsonFile(rollbackFile(layout));
  return read === undefined || read === 'malformed' ? undefined : parseRollbackOutcome(read.value);
}

/**
 * The snapshot over the data directory's store: copied beside it, fsynced, the old -wal and -shm removed (a
 * stale WAL replayed onto another database would corrupt it), then renamed over the store.
 */
export function restoreStore(snapshot: string, dataDir: string): void {
  const store = path.join(dataDir, STORE_FILE_NAME);
  const tmp = tempName(store);
  copyFileSync(snapshot, tmp);
  chmodSync(tmp, 0o600);
  fsyncPath(tmp);
  for (const side of [`${store}-wal`, `${store}-shm`, `${store}-journal`]) rmSync(side, { force: true });
  killPoint('rollback-store-half-restored');
  renameSync(tmp, store);
  fsyncPath(dataDir);
}

export interface RollbackResult {
  outcome: RollbackOutcome;
  storeRestored: boolean;
}

/**
 * Rolls the trial back (or finishes a rollback a cut interrupted). `dataDir`: where the agent keeps its store
 * (from the launcher's arguments); undefined leaves the store as it is, and the outcome's reason says so.
 */
export function rollBack(
  layout: ReleaseLayout,
  trial: TrialFile,
  reason: string,
  dataDir: string | undefined,
  now: number,
): RollbackResult {
  if (trial.rollback === undefined) {
    writeJsonAtomic(trialFile(layout), {
      ...trial,
      rollback: { reason, decided_at: new Date(now).toISOString() },
    });
  }
  killPoint('rollback-decided');
  const notes = [trial.rollback?.reason ?? reason];
  // Someone deleted the old release by hand: there is nothing to go back to, so the new one stays, untouched.
  const canGoBack = existsSync(releaseDir(layout, trial.from_version));
  const snapshot = snapshotFile(layout);
  const storeRestored = canGoBack && dataDir !== undefined && existsSync(snapshot);
  if (storeRestored) restoreStore(snapshot, dataDir);
  else if (!canGoBack) notes.push(`the release ${trial.from_version} is gone: ${trial.to_version} kept`);
  else
    notes.push(
      `the store was not restored (${dataDir === undefined ? 'no data directory known' : 'no snapshot'})`,
    );
  killPoint('rollback-store-restored');
  if (canGoBack) pointCurrentAt(layout, trial.from_version);
  killPoint('rollback-swapped');
  const { rollback: _decided, ...record } = trial;
  const outcome = rollbackOutcome(record, notes.join('; '), now);
  writeJsonAtomic(rollbackFile(layout), outcome);
  killPoint('rollback-recorded');
  removeDurably(trialFile(layout));
  killPoint('rollback-trial-removed');
  removeDurably(snapshot);
  if (currentVersion(layout) !== trial.to_version) removeRelease(layout, trial.to_version);
  return { outcome, storeRestored };
}

export type Repair =
  | { kind: 'none' }
  | { kind: 'rolled_forward'; version: string }
  | { kind: 'rolled_back'; result: RollbackResult };

/**
 * Before the launcher starts the agent (never while one runs): half-done staging and deletions are removed, a
 * snapshot without a trial is dropped, a recorded trial whose swap a cut prevented is swapped (the trial record
 * is the point of no return of staging), and a rollback that is decided or due is carried out.
 */
export function repairLayout(
  layout: ReleaseLayout,
  dataDir: string | undefined,
  now: number,
  onProblem: (message: string) => void,
): Repair {
  for (const entry of safeList(releasesDir(layout))) {
    if (entry.startsWith('.staging-') || entry.startsWith('.trash-'))
      rmSync(path.join(releasesDir(layout), entry), { recursive: true, force: true });
  }
  const strays: Array<[string, string]> = [[layout.prefix, '']];
  if (dataDir !== undefined) strays.push([dataDir, `${STORE_FILE_NAME}.tmp-`]);
  for (const [dir, start] of strays) {
    for (const entry of safeList(dir)) {
      if (entry.startsWith(start) && entry.includes('.tmp-'))
        rmSync(path.join(dir, entry), { recursive: true, force: true });
    }
  }
  const trial = readTrialFile(layout, onProblem);
  if (trial === undefined) {
    removeDurably(snapshotFile(layout));
    return { kind: 'none' };
  }
  const due = beforeStart(trial, now);
  if (due.action === 'roll_back')
    return { kind: 'rolled_back', result: rollBack(layout, trial, due.reason, dataDir, now) };
  if (!existsSync(releaseDir(layout, trial.to_version))) {
    const reason = `the release ${trial.to_version} is missing`;
    return { kind: 'rolled_back', result: rollBack(layout, trial, reason, dataDir, now) };
  }
  if (currentVersion(layout) !== trial.to_version) {
    pointCurrentAt(layout, trial.to_version);
    return { kind: 'rolled_forward', version: trial.to_version };
  }
  return { kind: 'none' };
}

function safeList(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/** The agent's data directory as `run` resolves it: --data-dir, else the --config file's data-dir. */
export function dataDirFromArgs(args: readonly string[], cwd: string): string | undefined {
  const flag = (name: string): string | undefined => {
    for (let i = 0; i < args.length; i += 1) {
      const arg = args[i] ?? '';
      if (arg === name) return args[i + 1];
      if (arg.startsWith(`${name}=`)) return arg.slice(name.length + 1);
    }
    return undefined;
  };
  const direct = flag('--data-dir');
  if (direct !== undefined) return path.resolve(cwd, direct);
  const config = flag('--config');
  if (config === undefined) return undefined;
  try {
    const file = path.resolve(cwd, config);
    const json = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
    const dir = json['data-dir'] ?? json.dataDir;
    return typeof dir === 'string' ? path.resolve(path.dirname(file), dir) : undefined;
  } catch {
    return undefined;
  }
}
