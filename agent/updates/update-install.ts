/**
 * The install step of an update, by kind (DESIGN.md §19), for the update runner: what is done and what it
 * ends in. The runner stores and reports; this module only talks to the HAL or the release layer.
 *
 * - `firmware`: the HAL's `installFirmware(file, manifest)`; once it resolves (the charger rebooted into the
 *   image, or is about to) `firmwareVersion()` is compared with the manifest's version. A reboot that ends the
 *   agent first is expected: the next start confirms the same way (`confirmFirmware`).
 * - `agent`: the release layer stages the bundle as the next release and records a trial; the agent then
 *   restarts into it. The new release commits once healthy; a failed one is rolled back by the launcher and the
 *   old release reports the outcome (`settleAgentUpdate`).
 */

import type { UpdatePhase } from '../core/update-progress.js';
import type { FirmwareManifest, Hal } from '../hal.js';

/** How an install step ended: a phase to move to, and the message and version to report with it. */
export interface InstallOutcome {
  phase: UpdatePhase;
  message?: string;
  version?: string;
}

/** A trial under way, as the release layer records it (agent/updates/releases*.ts). */
export interface ReleaseTrial {
  update_id: string;
  command_id: string;
  from_version: string;
  to_version: string;
  started_at: string;
  deadline_at: string;
  failed_starts: number;
}

/** A rollback the launcher did, for the old release to report. */
export interface ReleaseRollback {
  update_id: string;
  command_id: string;
  from_version: string;
  to_version: string;
  reason: string;
  rolled_back_at: string;
}

/**
 * The A/B release layer as the runner needs it; the real one (releases.ts, `releaseLayoutFromEnv()`) is wired in
 * by the agent's start, bound to its layout: `stage` is `stageRelease(layout, {archive, version, snapshot,
 * trial: {update_id, command_id}, healthSeconds, now})`, the others `readTrial(layout)` and so on. Absent when
 * the agent was not installed with `charger-agent install`.
 */
export interface AgentReleases {
  stage(input: {
    archive: string;
    version: string;
    updateId: string;
    commandId: string;
    /** Writes a consistent copy of the agent store to `toFile` (restored if the release rolls back). */
    snapshot: (toFile: string) => Promise<void>;
    /** How long the new release has to commit before the launcher rolls it back. */
    healthSeconds: number;
    now: number;
  }): Promise<{ ok: true } | { ok: false; reason: string }>;
  readTrial(): ReleaseTrial | undefined;
  commitTrial(): Promise<void> | void;
  readRollback(): ReleaseRollback | undefined;
  clearRollback(): Promise<void> | void;
}

const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));

export function firmwareManifestOf(params: {
  version: string;
  target: string;
  sha256: string;
  size: number;
}): FirmwareManifest {
  return {
    kind: 'firmware',
    version: params.version,
    target: params.target,
    sha256: params.sha256,
    size: params.size,
  };
}

/** After the install and its reboot: the version the charger runs decides. */
export async function confirmFirmware(hal: Hal, version: string): Promise<InstallOutcome> {
  if (!hal.firmwareVersion)
    return { phase: 'install_failed', message: 'the HAL cannot tell its firmware version' };
  let running: string;
  try {
    running = await hal.firmwareVersion();
  } catch (error) {
    return {
      phase: 'install_verification_failed',
      message: `reading the firmware version failed: ${messageOf(error)}`,
    };
  }
  if (running === version) return { phase: 'installed', version: running };
  return {
    phase: 'install_verification_failed',
    version: running,
    message: `the charger runs firmware ${running}, not ${version}`,
  };
}

/** Hands the verified image to the HAL; resolves with `install_rebooting`, or `install_failed` with its reason. */
export async function installFirmware(
  hal: Hal,
  file: string,
  manifest: FirmwareManifest,
): Promise<InstallOutcome> {
  if (!hal.installFirmware)
    return { phase: 'install_failed', message: 'this charger cannot install firmware' };
  try {
    await hal.installFirmware(file, manifest);
  } catch (error) {
    return { phase: 'install_failed', message: messageOf(error) };
  }
  return { phase: 'install_rebooting', version: manifest.version };
}

/**
 * What a start makes of an agent update it left at `installing`: the rollback the launcher recorded for it, the
 * trial of this very release (to commit once healthy), or neither — then this release is either the target
 * (committed before a crash) or the old one that never switched.
 */
export type AgentUpdateState =
  | { state: 'rolled_back'; outcome: InstallOutcome; clear: true }
  | { state: 'trial' }
  | { state: 'settled'; outcome: InstallOutcome };

export function agentUpdateState(
  releases: AgentReleases,
  update: { updateId: string; version: string },
  runningVersion: string,
): AgentUpdateState {
  const rollback = releases.readRollback();
  if (rollback && rollback.update_id === update.updateId) {
    return {
      state: 'rolled_back',
      clear: true,
      outcome: { phase: 'rolled_back', version: runningVersion, message: rollback.reason },
    };
  }
  const trial = releases.readTrial();
  if (trial && trial.update_id === update.updateId && trial.to_version === runningVersion)
    return { state: 'trial' };
  if (runningVersion === update.version)
    return { state: 'settled', outcome: { phase: 'installed', version: runningVersion } };
  return {
    state: 'settled',
    outcome: {
      phase: 'install_failed',
      version: runningVersion,
      message: `release ${update.version} was not started (this agent is ${runningVersion})`,
    },
  };
}
