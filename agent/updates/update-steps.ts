/**
 * The install steps of the update runner (update-runner.ts), by kind: each hands the verified file over (the
 * HAL, the release layer), reports what happened through the runner's `move`, and removes the file before the
 * final report. Split from the runner to keep each module to one job; they share its options.
 */
import { promises as fs } from 'node:fs';
import { sleep } from '../clock.js';
import type { UpdatePhase } from '../core/update-progress.js';
import type { StoredUpdate } from '../store/agent-store.js';
import { artifactFiles } from './artifact-download.js';
import {
  agentUpdateState,
  confirmFirmware,
  firmwareManifestOf,
  type InstallOutcome,
  installFirmware,
} from './update-install.js';
import type { UpdateRunnerOptions } from './update-runner-options.js';

/** The shortest time a new release is given to commit (a start, a token and a heartbeat take seconds). */
export const TRIAL_MIN_SECONDS = 30;

/**
 * The time a new release has to commit: the update's health time (DESIGN.md §19), never under TRIAL_MIN_SECONDS
 * (an update with health_seconds 0 must not roll back before its first heartbeat), 600 s when the platform sent
 * none.
 */
export function trialSeconds(healthSeconds: number | undefined): number {
  return Math.max(TRIAL_MIN_SECONDS, healthSeconds ?? 600);
}

/** How often a trial release checks whether it is healthy enough to commit. */
export const HEALTH_CHECK_MS = 5_000;

export interface InstallStepContext {
  options: UpdateRunnerOptions;
  move(update: StoredUpdate, phase: UpdatePhase, extra?: Omit<InstallOutcome, 'phase'>): void;
  signal: AbortSignal;
}

export function createInstallSteps(ctx: InstallStepContext) {
  const { options, move, signal } = ctx;
  const { hal, clock, logger } = options;

  async function removeFile(update: StoredUpdate): Promise<void> {
    const { file, part } = artifactFiles(options.dir, update.params.artifact_id);
    await Promise.all([fs.rm(file, { force: true }), fs.rm(part, { force: true })]);
  }

  async function installFirmwareUpdate(update: StoredUpdate): Promise<void> {
    const { file } = artifactFiles(options.dir, update.params.artifact_id);
    move(update, 'installing', { version: update.params.version });
    const installed = await options.runExclusive(() =>
      installFirmware(hal, file, firmwareManifestOf(update.params)),
    );
    if (installed.phase === 'install_rebooting') {
      move(update, installed.phase, installed);
      await confirmFirmwareUpdate(update);
      return;
    }
    await removeFile(update);
    move(update, installed.phase, installed);
  }

  /** The image is no longer needed whatever the outcome: removed before the final report. */
  async function confirmFirmwareUpdate(update: StoredUpdate): Promise<void> {
    const outcome = await options.runExclusive(() => confirmFirmware(hal, update.params.version));
    await removeFile(update);
    move(update, outcome.phase, outcome);
  }

  async function installAgentUpdate(update: StoredUpdate): Promise<void> {
    const releases = options.releases;
    if (!releases) {
      move(update, 'install_failed', {
        message: 'not installed with charger-agent install: no A/B releases',
      });
      return;
    }
    // Stored before the store is snapshotted: a rollback restores this phase, and the next start settles it.
    move(update, 'installing', { version: update.params.version });
    const staged = await releases.stage({
      archive: artifactFiles(options.dir, update.params.artifact_id).file,
      version: update.params.version,
      updateId: update.updateId,
      commandId: update.commandId,
      // better-sqlite3's online backup: consistent while the agent runs, WAL included.
      snapshot: async (toFile) => {
        await options.store.db.backup(toFile);
      },
      healthSeconds: trialSeconds(update.params.health_seconds),
      now: clock.now(),
    });
    if (!staged.ok) {
      move(update, 'install_failed', { message: staged.reason });
      await removeFile(update);
      return;
    }
    await removeFile(update);
    logger.info(
      { update_id: update.updateId, version: update.params.version },
      'restarting into the new release',
    );
    options.requestRestart?.();
  }

  /** At a start after an agent update: report the rollback, or commit this release once healthy. */
  async function confirmAgentUpdate(update: StoredUpdate): Promise<void> {
    const releases = options.releases;
    if (!releases) {
      move(update, 'install_failed', { message: 'the A/B release layout is gone' });
      return;
    }
    const state = agentUpdateState(
      releases,
      { updateId: update.updateId, version: update.params.version },
      options.runningVersion,
    );
    if (state.state === 'rolled_back') {
      move(update, 'rolled_back', state.outcome);
      await releases.clearRollback();
      return;
    }
    if (state.state === 'settled') {
      move(update, state.outcome.phase, state.outcome);
      return;
    }
    // The launcher rolls back if the trial does not commit within its health time; until then, keep checking.
    while (!signal.aborted) {
      if (await (options.healthy ?? (async () => true))()) {
        await releases.commitTrial();
        move(update, 'installed', { version: options.runningVersion });
        return;
      }
      await sleep(clock, HEALTH_CHECK_MS, signal);
    }
  }

  return { installFirmwareUpdate, confirmFirmwareUpdate, installAgentUpdate, confirmAgentUpdate };
}
