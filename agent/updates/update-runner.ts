/**
 * Carries an `update` command through on the charger (DESIGN.md §19, "The agent"): the manifest check, the
 * download, the file check, the wait for the install timing, the install by kind and its confirmation, each
 * step stored in the `updates` table with its firmware status report (update_id, a fresh report_id) queued in
 * the same transaction, so that a restart at any step resumes there (core/update-progress.ts `resumeStepOf`).
 *
 * - The executor hands the command over on the serial runner (`take`, synchronous bookkeeping only); the
 *   download and the waits run beside it, so commands and control passes go on meanwhile. HAL calls that
 *   must not interleave with a control pass (the install, the connector reads) go through `runExclusive`.
 * - The command is `accepted` with the update stored, then `succeeded` only on `installed`, else `failed` with
 *   the reason; a manifest this charger cannot take is `rejected` at once, before a byte is downloaded.
 * - One update at a time; a second one waits its turn.
 */

import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { REASON_MAX_LENGTH } from '../../shared/limits.js';
import { createWakeup, iso, sleep } from '../clock.js';
import { decideInstallTiming, nextSlotStart } from '../core/install-timing.js';
import { checkUpdateManifest, type SignedArtifactManifest } from '../core/update-manifest.js';
import {
  canMove,
  commandOutcomeOf,
  FINAL_PHASES,
  firmwareReportOf,
  isFinalPhase,
  resumeStepOf,
  type UpdatePhase,
} from '../core/update-progress.js';
import type { StoredUpdate, UpdateParams } from '../store/agent-store.js';
import { checkArtifact } from './artifact-check.js';
import { artifactFiles, downloadArtifact } from './artifact-download.js';
import type { InstallOutcome } from './update-install.js';
import type { UpdateRunnerOptions } from './update-runner-options.js';
import { createInstallSteps } from './update-steps.js';

export type { UpdateRunnerOptions } from './update-runner-options.js';

/** How often a waiting install looks again when nothing told it to (a missed event, a window opening). */
const RECHECK_MS = 60_000;
/** How often a download waits for the platform link (not registered yet) before trying. */
const LINK_WAIT_MS = 5_000;

export interface UpdateRunner {
  /**
   * Takes an `update` command the executor has checked (on the serial runner: bookkeeping only). `accepted`:
   * the journal holds it as accepted already (a restart); its stored progress resumes.
   */
  take(commandId: string, params: UpdateParams, accepted: boolean): void;
  /** Settles what a restart left (a rollback, a trial), then resumes every unfinished update. */
  resume(): void;
  /** Something the install timing depends on changed: a connector's state, the stored schedules. */
  recheck(): void;
  /** Stops downloads and waits (their progress stays stored); resolves when the running step has ended. */
  stop(): Promise<void>;
}

const clip = (text: string) =>
  text.length > REASON_MAX_LENGTH ? `${text.slice(0, REASON_MAX_LENGTH - 1)}…` : text;

export function createUpdateRunner(options: UpdateRunnerOptions): UpdateRunner {
  const { store, hal, clock, logger } = options;
  const abort = new AbortController();
  const wakeup = createWakeup(clock);
  let chain: Promise<void> = Promise.resolve();
  const queued = new Set<string>();

  /** Moves the update to `phase` and reports it; a final phase settles the command in the same transaction. */
  function move(
    update: StoredUpdate,
    phase: UpdatePhase,
    extra: Omit<InstallOutcome, 'phase'> & { progress?: number } = {},
  ) {
    // A move the rules do not allow is a bug: the update stays where it was, and the log says why.
    if (!canMove(update.phase, phase))
      throw new Error(`update ${update.updateId}: ${update.phase} → ${phase}`);
    const at = iso(clock.now());
    const report = firmwareReportOf({
      updateId: update.updateId,
      reportId: randomUUID(),
      phase,
      at,
      ...extra,
    });
    const outcome = commandOutcomeOf(phase);
    const write = () =>
      store.updateMove(update.updateId, report, extra.message !== undefined ? { reason: extra.message } : {});
    if (outcome === undefined) write();
    else {
      const reason =
        extra.message ??
        (outcome === 'succeeded' ? `installed ${extra.version ?? update.params.version}` : phase);
      store.recordCommandStatus(update.commandId, [{ status: outcome, reason: clip(reason) }], at, write);
    }
    update.phase = phase;
    logger.info(
      { update_id: update.updateId, phase, message: extra.message, progress: extra.progress },
      'update',
    );
    options.onReport?.();
  }

  function manifestOf(params: UpdateParams): SignedArtifactManifest | undefined {
    const check = checkUpdateManifest(params, { ...options.target, trustedKeys: options.keys.length });
    return check.ok ? check.manifest : undefined;
  }

  async function download(update: StoredUpdate): Promise<boolean> {
    while (!abort.signal.aborted && options.source() === undefined)
      await sleep(clock, LINK_WAIT_MS, abort.signal);
    const source = options.source();
    if (!source) return false;
    if (update.phase === 'download_scheduled') move(update, 'downloading', { progress: 0 });
    const { params } = update;
    const result = await downloadArtifact({
      dir: options.dir,
      artifactId: params.artifact_id,
      size: params.size,
      sha256: params.sha256,
      source,
      clock,
      ...(options.random ? { random: options.random } : {}),
      ...(options.freeSpace ? { freeSpace: options.freeSpace } : {}),
      ...(update.progress !== undefined ? { reported: update.progress } : {}),
      onProgress: (progress) => move(update, 'downloading', { progress }),
      onRetry: (error, delayMs) =>
        logger.warn({ update_id: update.updateId, err: error.message, delayMs }, 'download retry'),
      signal: abort.signal,
    });
    if (result.ok) {
      move(update, 'downloaded', { progress: 100 });
      return true;
    }
    // A file that is not the manifest's size would fail its check: say so without downloading it whole.
    if (result.kind === 'size_mismatch') move(update, 'invalid_signature', { message: result.reason });
    else if (result.kind === 'failed') move(update, 'download_failed', { message: result.reason });
    return false;
  }

  async function verify(update: StoredUpdate, manifest: SignedArtifactManifest): Promise<boolean> {
    const { file } = artifactFiles(options.dir, update.params.artifact_id);
    try {
      const check = await checkArtifact(file, manifest, options.keys);
      if (check.ok) {
        move(update, 'signature_verified');
        return true;
      }
      move(update, 'invalid_signature', { message: `the downloaded file failed its check: ${check.reason}` });
    } catch (error) {
      move(update, 'download_failed', {
        message: `the downloaded file could not be read: ${(error as Error).message}`,
      });
    }
    return false;
  }

  /** Waits until the timing says install; reports `install_scheduled` whenever the reason changes. */
  async function awaitInstallTime(update: StoredUpdate): Promise<boolean> {
    let lastReason = update.phase === 'install_scheduled' ? update.reason : undefined;
    while (!abort.signal.aborted) {
      const now = clock.now();
      const timing = decideInstallTiming({
        now,
        install: update.params.install,
        ...(update.params.window ? { window: update.params.window } : {}),
        busyConnectors: await options.busyConnectors(),
        ...optionalSlot(nextSlotStart(options.schedules(), now)),
      });
      if (timing.install) return true;
      if (timing.reason !== lastReason) {
        move(update, 'install_scheduled', { message: timing.reason });
        update.reason = timing.reason;
        lastReason = timing.reason;
      }
      const until = timing.recheckAt !== undefined ? Math.max(0, timing.recheckAt - now) : RECHECK_MS;
      await wakeup.wait(Math.min(until, RECHECK_MS), abort.signal);
    }
    return false;
  }

  const steps = createInstallSteps({ options, move, signal: abort.signal });

  async function install(update: StoredUpdate): Promise<void> {
    if (!(await awaitInstallTime(update))) return;
    if (update.params.kind === 'firmware') await steps.installFirmwareUpdate(update);
    else await steps.installAgentUpdate(update);
  }

  /** Runs one update from its stored phase to its end (or until the agent stops). */
  async function carry(update: StoredUpdate): Promise<void> {
    const step = resumeStepOf(update.phase, update.params.kind === 'agent' ? 'agent' : 'firmware');
    // An install under way is confirmed whatever else changed: it may have happened.
    if (step === 'confirm_firmware') return steps.confirmFirmwareUpdate(update);
    if (step === 'confirm_agent') return steps.confirmAgentUpdate(update);
    if (step === 'none') return;
    const manifest = manifestOf(update.params);
    if (!manifest) {
      // The keys or the charger changed since the update was accepted (a restart with other --update-key).
      const failed = step === 'schedule_install' ? 'install_failed' : 'download_failed';
      move(update, failed, { message: 'the update is no longer acceptable to this charger' });
      return;
    }
    if (step === 'download' && !(await download(update))) return;
    if (step !== 'schedule_install' && !(await verify(update, manifest))) return;
    return install(update);
  }

  function enqueue(updateId: string): void {
    if (queued.has(updateId)) return;
    queued.add(updateId);
    chain = chain
      .then(async () => {
        const update = store.updateGet(updateId);
        if (update && !isFinalPhase(update.phase) && !abort.signal.aborted) await carry(update);
      })
      .catch((error: unknown) => {
        // Stays at its stored phase; the next start resumes it.
        logger.error({ update_id: updateId, err: (error as Error).message }, 'update step failed');
      })
      .finally(() => queued.delete(updateId));
  }

  /** Why this charger cannot take the update at all, before anything is stored. */
  function refusalOf(commandId: string, params: UpdateParams): string | undefined {
    const check = checkUpdateManifest(params, { ...options.target, trustedKeys: options.keys.length });
    if (!check.ok) return check.message;
    if (check.manifest.kind === 'firmware' && (!hal.installFirmware || !hal.firmwareVersion))
      return "this charger's HAL cannot install firmware (no installFirmware)";
    if (check.manifest.kind === 'agent' && !options.releases)
      return 'this agent was not installed with charger-agent install: it cannot update itself';
    const existing = store.updateGet(params.update_id);
    if (existing && existing.commandId !== commandId)
      return `update ${params.update_id} is known already (command ${existing.commandId}, ${existing.phase})`;
    return undefined;
  }

  return {
    take(commandId, params, accepted) {
      const at = iso(clock.now());
      const stored = store.updateOfCommand(commandId);
      if (stored) {
        enqueue(stored.updateId);
        return;
      }
      const refusal = refusalOf(commandId, params);
      if (refusal !== undefined) {
        store.recordCommandStatus(
          commandId,
          [{ status: accepted ? 'failed' : 'rejected', reason: clip(refusal) }],
          at,
        );
        logger.info(
          { command_id: commandId, update_id: params.update_id, reason: refusal },
          'update refused',
        );
        options.onReport?.();
        return;
      }
      const report = firmwareReportOf({
        updateId: params.update_id,
        reportId: randomUUID(),
        phase: 'download_scheduled',
        at,
        version: params.version,
      });
      const insert = () => store.updateInsert({ updateId: params.update_id, commandId, params }, report);
      if (accepted) insert();
      else store.recordCommandStatus(commandId, [{ status: 'accepted' }], at, insert);
      options.onReport?.();
      enqueue(params.update_id);
    },
    resume() {
      for (const update of store.updatesUnfinished(FINAL_PHASES)) enqueue(update.updateId);
    },
    recheck: () => wakeup.notify(),
    async stop() {
      abort.abort();
      await chain;
    },
  };
}

function optionalSlot(at: number | undefined): { nextSlotStartAt?: number } {
  return at === undefined ? {} : { nextSlotStartAt: at };
}

/** `DATA_DIR/updates`: where artifacts are downloaded. */
export function updatesDirOf(dataDir: string): string {
  return path.join(dataDir, 'updates');
}
