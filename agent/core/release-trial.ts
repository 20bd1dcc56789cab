/**
 * The rules of an A/B agent release's trial (DESIGN.md §19, "A/B releases"), pure: what the launcher does when
 * the agent exits, when a trial must end by rollback, which releases to keep, whether a bundle fits this
 * charger and whether an archive entry stays inside its release. The launcher (updates/release-launcher.ts)
 * and the staging library (updates/releases.ts) only perform what these decide.
 */

/** The agent's exit code meaning "start me again: `current` now points at the release to run". */
export const RESTART_EXIT_CODE = 75;
/** A trial's release that exits this many times before it commits is rolled back. */
export const MAX_FAILED_STARTS = 3;

export interface TrialRecord {
  update_id: string;
  command_id: string;
  from_version: string;
  to_version: string;
  started_at: string;
  deadline_at: string;
  failed_starts: number;
}

/** A trial the launcher decided to roll back: written before the first step, so a power cut resumes it. */
export interface TrialFile extends TrialRecord {
  rollback?: { reason: string; decided_at: string };
}

export interface RollbackOutcome {
  update_id: string;
  command_id: string;
  from_version: string;
  to_version: string;
  reason: string;
  rolled_back_at: string;
}

export function newTrial(input: {
  update_id: string;
  command_id: string;
  from_version: string;
  to_version: string;
  healthSeconds: number;
  now: number;
}): TrialRecord {
  return {
    update_id: input.update_id,
    command_id: input.command_id,
    from_version: input.from_version,
    to_version: input.to_version,
    started_at: new Date(input.now).toISOString(),
    deadline_at: new Date(input.now + input.healthSeconds * 1000).toISOString(),
    failed_starts: 0,
  };
}

export type LauncherAction =
  | { action: 'exit'; code: number }
  | { action: 'start' }
  | { action: 'count_failure'; trial: TrialRecord }
  | { action: 'roll_back'; reason: string };

/** The trial's health time in whole seconds, for the rollback's reason. */
function healthSecondsOf(trial: TrialRecord): number {
  return Math.round((Date.parse(trial.deadline_at) - Date.parse(trial.started_at)) / 1000);
}

export function deadlineReason(trial: TrialRecord): string {
  return `did not commit within ${healthSecondsOf(trial)} s`;
}

/** Milliseconds until the trial's deadline (0 when passed; an unreadable deadline counts as passed). */
export function msUntilDeadline(trial: TrialRecord, now: number): number {
  const at = Date.parse(trial.deadline_at);
  return Number.isFinite(at) ? Math.max(0, at - now) : 0;
}

/** Before the launcher starts the current release: a trial past its deadline, or one being rolled back, ends. */
export function beforeStart(trial: TrialFile | undefined, now: number): LauncherAction {
  if (trial === undefined) return { action: 'start' };
  if (trial.rollback !== undefined) return { action: 'roll_back', reason: trial.rollback.reason };
  if (msUntilDeadline(trial, now) === 0) return { action: 'roll_back', reason: deadlineReason(trial) };
  return { action: 'start' };
}

/**
 * After the agent exited with `exitCode`, having run `ranVersion`. `stopping`: the launcher was told to stop
 * (SIGTERM/SIGINT), so the exit ends the launcher and counts against nothing.
 */
export function afterExit(input: {
  trial: TrialFile | undefined;
  ranVersion: string;
  exitCode: number;
  stopping: boolean;
  /** The launcher ended the agent itself at the trial's deadline. */
  killedAtDeadline?: boolean;
  now: number;
}): LauncherAction {
  const { trial, exitCode } = input;
  if (input.stopping) return { action: 'exit', code: exitCode };
  // Killed at the deadline, yet committed meanwhile: a healthy release, started again.
  if (input.killedAtDeadline === true && trial === undefined) return { action: 'start' };
  if (trial === undefined)
    return exitCode === RESTART_EXIT_CODE ? { action: 'start' } : { action: 'exit', code: exitCode };
  const early = beforeStart(trial, input.now);
  if (early.action === 'roll_back') return early;
  // The release that staged the trial (or any other) ended: start the trial's release, whatever its code.
  if (input.ranVersion !== trial.to_version || exitCode === RESTART_EXIT_CODE) return { action: 'start' };
  const failed = trial.failed_starts + 1;
  if (failed >= MAX_FAILED_STARTS)
    return {
      action: 'roll_back',
      reason: `exited ${failed} times before it committed (last exit code ${exitCode})`,
    };
  return { action: 'count_failure', trial: { ...withoutRollback(trial), failed_starts: failed } };
}

function withoutRollback(trial: TrialFile): TrialRecord {
  const { rollback: _rollback, ...record } = trial;
  return record;
}

export function rollbackOutcome(trial: TrialRecord, reason: string, now: number): RollbackOutcome {
  return {
    update_id: trial.update_id,
    command_id: trial.command_id,
    from_version: trial.from_version,
    to_version: trial.to_version,
    reason,
    rolled_back_at: new Date(now).toISOString(),
  };
}

/** The installed releases to delete once `current` is committed: all but it and the one to go back to. */
export function releasesToPrune(installed: readonly string[], current: string, previous?: string): string[] {
  return installed.filter((v) => v !== current && v !== previous);
}

/** Parses a trial file's JSON; anything malformed is undefined (the caller sets the file aside). */
export function parseTrialFile(value: unknown): TrialFile | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const v = value as Record<string, unknown>;
  const strings = ['update_id', 'command_id', 'from_version', 'to_version', 'started_at', 'deadline_at'];
  if (!strings.every((k) => typeof v[k] === 'string')) return undefined;
  if (typeof v.failed_starts !== 'number' || !Number.isInteger(v.failed_starts) || v.failed_starts < 0)
    return undefined;
  const rollback = v.rollback as Record<string, unknown> | undefined;
  if (
    rollback !== undefined &&
    (typeof rollback !== 'object' ||
      rollback === null ||
      typeof rollback.reason !== 'string' ||
      typeof rollback.decided_at !== 'string')
  )
    return undefined;
  return value as TrialFile;
}

export function parseRollbackOutcome(value: unknown): RollbackOutcome | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const v = value as Record<string, unknown>;
  const keys = ['update_id', 'command_id', 'from_version', 'to_version', 'reason', 'rolled_back_at'];
  return keys.every((k) => typeof v[k] === 'string') ? (value as RollbackOutcome) : undefined;
}
