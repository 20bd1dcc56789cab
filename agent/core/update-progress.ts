/**
 * The rules of an update's progress on the charger (DESIGN.md §19, "On the wire to the charger"). Pure: the
 * runner (updates/update-runner.ts) stores each step in the `updates` table and reports it; these rules say which
 * steps may follow which, what a restart at a step resumes, when a download's progress is worth a report, and
 * what the firmware status reports look like.
 */
import type { FirmwareState, FirmwareStatusReport } from '../../shared/device-api.js';
import { REASON_MAX_LENGTH } from '../../shared/limits.js';
import { replaceControlCharacters } from '../../shared/primitives.js';

/** The steps an update goes through on the charger, as it reports them; the last one it stored is its phase. */
export type UpdatePhase = Extract<
  FirmwareState,
  | 'download_scheduled'
  | 'downloading'
  | 'downloaded'
  | 'download_failed'
  | 'signature_verified'
  | 'invalid_signature'
  | 'install_scheduled'
  | 'installing'
  | 'install_rebooting'
  | 'installed'
  | 'install_failed'
  | 'install_verification_failed'
  | 'rolled_back'
>;

/** Phases after which nothing more happens; each settles the command (only `installed` as succeeded). */
export const FINAL_PHASES: readonly UpdatePhase[] = [
  'download_failed',
  'invalid_signature',
  'installed',
  'install_failed',
  'install_verification_failed',
  'rolled_back',
];

export function isFinalPhase(phase: UpdatePhase): boolean {
  return FINAL_PHASES.includes(phase);
}

/**
 * Which phases may follow each phase (the runner refuses any other move). `downloading` repeats (progress);
 * `install_scheduled` repeats (a new reason).
 */
const NEXT: Record<UpdatePhase, readonly UpdatePhase[]> = {
  download_scheduled: ['downloading', 'download_failed'],
  // invalid_signature: the platform's file is not the manifest's size (known before it is whole).
  downloading: ['downloading', 'downloaded', 'download_failed', 'invalid_signature'],
  downloaded: ['signature_verified', 'invalid_signature', 'download_failed'],
  // install_failed: what would install it is gone (no A/B layout, a manifest no longer trusted).
  signature_verified: ['install_scheduled', 'installing', 'install_failed'],
  install_scheduled: ['install_scheduled', 'installing', 'install_failed'],
  installing: [
    'install_rebooting',
    'installed',
    'install_failed',
    'install_verification_failed',
    'rolled_back',
  ],
  install_rebooting: ['installed', 'install_verification_failed', 'rolled_back', 'install_failed'],
  download_failed: [],
  invalid_signature: [],
  installed: [],
  install_failed: [],
  install_verification_failed: [],
  rolled_back: [],
};

export function canMove(from: UpdatePhase, to: UpdatePhase): boolean {
  return NEXT[from].includes(to);
}

/** What a (re)started runner does for an update stored at `phase`. */
export type ResumeStep =
  | 'download' // from the start or from the .part file's end
  | 'verify' // the complete file, not yet checked
  | 'schedule_install' // verified: wait for the timing, then install
  | 'confirm_firmware' // the HAL took the image (and maybe rebooted): compare versions
  | 'confirm_agent' // a new release was staged: read the trial or the rollback
  | 'none';

export function resumeStepOf(phase: UpdatePhase, kind: 'firmware' | 'agent'): ResumeStep {
  switch (phase) {
    case 'download_scheduled':
    case 'downloading':
      return 'download';
    case 'downloaded':
      return 'verify';
    case 'signature_verified':
    case 'install_scheduled':
      return 'schedule_install';
    case 'installing':
    case 'install_rebooting':
      // The install may have ended the process (a reboot, a restart into the new release): check, never repeat.
      return kind === 'firmware' ? 'confirm_firmware' : 'confirm_agent';
    default:
      return 'none';
  }
}

/** Downloads report progress in steps of this many percent, never per chunk (the outbox is on flash). */
export const PROGRESS_STEP_PERCENT = 10;

/**
 * The percentage to report once `bytes` of `total` are in, given the last one reported; undefined when the
 * download has not moved into a new step. 100 is left to `downloaded`.
 */
export function progressToReport(last: number | undefined, bytes: number, total: number): number | undefined {
  if (total <= 0) return undefined;
  const step =
    Math.floor((Math.min(bytes, total) * 100) / total / PROGRESS_STEP_PERCENT) * PROGRESS_STEP_PERCENT;
  if (step >= 100 || step <= (last ?? 0)) return undefined;
  return step;
}

export interface FirmwareReportInput {
  updateId: string;
  reportId: string;
  phase: UpdatePhase;
  at: string;
  version?: string;
  progress?: number;
  message?: string;
}

/** A firmware status report as the platform takes it: the message on one line, within its limit. */
export function firmwareReportOf(input: FirmwareReportInput): FirmwareStatusReport {
  const message =
    input.message === undefined ? undefined : clipReason(replaceControlCharacters(input.message));
  return {
    status: input.phase,
    timestamp: input.at,
    update_id: input.updateId,
    report_id: input.reportId,
    ...(input.version !== undefined ? { version: input.version.slice(0, 64) } : {}),
    ...(input.progress !== undefined ? { progress: input.progress } : {}),
    ...(message !== undefined ? { message } : {}),
  };
}

function clipReason(text: string): string {
  return text.length > REASON_MAX_LENGTH ? `${text.slice(0, REASON_MAX_LENGTH - 1)}…` : text;
}

/** How the update's command ends after a final phase. */
export function commandOutcomeOf(phase: UpdatePhase): 'succeeded' | 'failed' | undefined {
  if (!isFinalPhase(phase)) return undefined;
  return phase === 'installed' ? 'succeeded' : 'failed';
}
