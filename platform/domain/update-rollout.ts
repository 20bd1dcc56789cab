import type {
  CommandStatus,
  UPDATE_BATCH_STATUSES,
  UpdateDeviceState,
  UpdateStatus,
} from '../../shared/index.js';

/**
 * Updates (campaigns, DESIGN.md §19), pure: how the chargers of an update are put into batches, what a charger's
 * reports make of its state, when the next batch starts, when the update pauses itself or is complete. The
 * update gate (services/update-gate.ts) applies these to what storage observes.
 *
 * Batches are numbered from 1; an update's `current_batch` is 0 until its first batch starts.
 */

export interface RolloutSettings {
  batch_size: number;
  max_failure_percent: number;
  health_seconds: number;
  max_site_percent: number;
}

/** A charger is done with the update in these states; the first two count as failures. */
const FAILED: ReadonlySet<UpdateDeviceState> = new Set(['failed', 'rolled_back']);
const FINAL: ReadonlySet<UpdateDeviceState> = new Set([
  'succeeded',
  'skipped',
  'failed',
  'rolled_back',
  'cancelled',
]);
/** The charger has (or is being sent) the `update` command: its command and reports are watched. */
export const ACTIVE_DEVICE_STATES: readonly UpdateDeviceState[] = [
  'queued',
  'downloading',
  'install_scheduled',
  'installing',
  'installed',
];

export const isFinalState = (state: UpdateDeviceState): boolean => FINAL.has(state);

/**
 * Why a charger targeted by an update is `skipped` (in no batch), or undefined when it takes part: it runs the
 * artifact's version already, or — for an agent release — it never reported an `agent_version`, so it does not
 * run charger-agent (another vendor's software speaking the API, or an agent older than updates) and could
 * never take one; left in, it would hold its batch until its command expired a day later.
 */
export function skipReasonOf(
  artifact: { kind: 'agent' | 'firmware'; version: string },
  charger: { agent_version: string | null; firmware_version: string | null },
): string | undefined {
  const running = artifact.kind === 'agent' ? charger.agent_version : charger.firmware_version;
  if (running === artifact.version) return `already on ${artifact.version}`;
  if (artifact.kind === 'agent' && charger.agent_version === null)
    return 'reports no agent_version: it does not run charger-agent, or one too old to update itself';
  return undefined;
}

/** The request's rollout with every default filled in; a missing batch size is one batch of everything. */
export function rolloutSettings(
  requested: { batch_size?: number | undefined } & Omit<RolloutSettings, 'batch_size'>,
  deviceCount: number,
): RolloutSettings {
  return { ...requested, batch_size: requested.batch_size ?? Math.max(1, deviceCount) };
}

/**
 * The batch (from 1) of each charger, in the order given. Batches fill up to `batch_size`, taking chargers from
 * the sites in turn, and never more than `max_site_percent` of one site's chargers in one batch (at least one,
 * so every site moves). Chargers without a site are limited by the batch size only.
 */
export function planBatches(
  devices: ReadonlyArray<{ device_id: string; site_id: string | null }>,
  settings: Pick<RolloutSettings, 'batch_size' | 'max_site_percent'>,
): number[] {
  const bySite = new Map<string | null, number[]>();
  devices.forEach((d, i) => {
    const list = bySite.get(d.site_id) ?? [];
    list.push(i);
    bySite.set(d.site_id, list);
  });
  const queues = [...bySite.entries()].map(([site, indexes]) => ({
    cap:
      site === null
        ? Number.POSITIVE_INFINITY
        : Math.max(1, Math.floor((indexes.length * settings.max_site_percent) / 100)),
    indexes,
    next: 0,
  }));
  const batches = new Array<number>(devices.length).fill(0);
  let placed = 0;
  for (let batch = 1; placed < devices.length; batch++) {
    let size = 0;
    const taken = queues.map(() => 0);
    let progress = true;
    while (progress && size < settings.batch_size) {
      progress = false;
      queues.forEach((q, qi) => {
        if (size >= settings.batch_size || q.next >= q.indexes.length || taken[qi]! >= q.cap) return;
        batches[q.indexes[q.next++]!] = batch;
        taken[qi]! += 1;
        size += 1;
        placed += 1;
        progress = true;
      });
    }
  }
  return batches;
}

/** What storage knows of one watched charger of an update. */
export interface DeviceObservation {
  /** Its `update` command's status and reason. */
  command_status: CommandStatus | null;
  command_reason: string | null;
  /** Its latest firmware report about this update. */
  report: { status: string; version: string | null; message: string | null } | null;
  online: boolean;
  /** Its last heartbeat said `fault`. */
  fault: boolean;
  /** Error or critical events it sent since it entered its current state. */
  bad_events: number;
}

export interface WatchedDevice {
  state: UpdateDeviceState;
  /** When it entered `state`, ms. */
  state_ms: number;
}

export type DeviceChange = {
  state: UpdateDeviceState;
  reason: string | null;
  /** The version it reported installed. */
  version_after?: string | null;
};

const REPORT_FAILURES = new Set([
  'failed',
  'download_failed',
  'invalid_signature',
  'install_failed',
  'install_verification_failed',
]);
const REPORT_PROGRESS: Readonly<Record<string, UpdateDeviceState>> = {
  idle: 'downloading',
  download_scheduled: 'downloading',
  downloading: 'downloading',
  downloaded: 'downloading',
  signature_verified: 'downloading',
  install_scheduled: 'install_scheduled',
  installing: 'installing',
  install_rebooting: 'installing',
};
const COMMAND_FAILURES = new Set<CommandStatus>(['rejected', 'failed', 'expired', 'cancelled']);

const withMessage = (status: string, message: string | null | undefined) =>
  message ? `${status}: ${message}` : status;

/** An installed charger's health so far (DESIGN.md §19: online, no `fault` heartbeat, no error event). */
function healthVerdict(
  device: WatchedDevice,
  obs: DeviceObservation,
  nowMs: number,
  healthMs: number,
): DeviceChange | undefined {
  if (!obs.online) return { state: 'failed', reason: 'went offline during the health check' };
  if (obs.fault) return { state: 'failed', reason: 'reported a fault during the health check' };
  if (obs.bad_events > 0)
    return { state: 'failed', reason: 'sent an error or critical event during the health check' };
  return nowMs - device.state_ms >= healthMs ? { state: 'succeeded', reason: null } : undefined;
}

/**
 * What a watched charger's command and latest report make of its state; undefined when nothing changes. A
 * failure report or a failed command ends it; `installed` starts its health check, which it passes after
 * `healthMs` online with no fault and no error event. An `installed` report naming another version than the
 * update's (`version`) is a failure: the charger says itself that it runs something else (a charger that is not
 * charger-agent may report no check of its own).
 */
export function observeDevice(
  device: WatchedDevice,
  obs: DeviceObservation,
  nowMs: number,
  healthMs: number,
  version: string,
): DeviceChange | undefined {
  if (isFinalState(device.state) || device.state === 'pending') return undefined;
  const report = obs.report;
  if (report?.status === 'rolled_back')
    return { state: 'rolled_back', reason: withMessage('rolled back', report.message) };
  if (report && REPORT_FAILURES.has(report.status))
    return { state: 'failed', reason: withMessage(report.status, report.message) };
  if (obs.command_status !== null && COMMAND_FAILURES.has(obs.command_status))
    return { state: 'failed', reason: withMessage(`command ${obs.command_status}`, obs.command_reason) };
  if (device.state === 'installed') return healthVerdict(device, obs, nowMs, healthMs);
  if (report?.status === 'installed' && report.version !== null && report.version !== version)
    return {
      state: 'failed',
      reason: `installed ${report.version}, not ${version}`,
      version_after: report.version,
    };
  if (report?.status === 'installed' || obs.command_status === 'succeeded')
    return { state: 'installed', reason: null, version_after: report?.version ?? null };
  const progress = report ? REPORT_PROGRESS[report.status] : undefined;
  return progress !== undefined && progress !== device.state ? { state: progress, reason: null } : undefined;
}

export type RolloutStep =
  | { kind: 'wait' }
  | { kind: 'start_batch'; batch: number }
  | { kind: 'pause'; reason: string }
  | { kind: 'complete' };

export interface RolloutState {
  status: UpdateStatus;
  current_batch: number;
  /** A batch the operator resumed past despite its failures (its threshold no longer pauses). */
  waived_batch: number;
  max_failure_percent: number;
}

/** Failures of one batch against the threshold: skipped and cancelled chargers do not count either way. */
function overThreshold(states: readonly UpdateDeviceState[], maxFailurePercent: number) {
  const counted = states.filter((s) => s !== 'skipped' && s !== 'cancelled');
  const failures = counted.filter((s) => FAILED.has(s)).length;
  return { over: failures * 100 > maxFailurePercent * counted.length, failures, counted: counted.length };
}

const statesOf = (devices: ReadonlyArray<{ batch: number; state: UpdateDeviceState }>, batch: number) =>
  devices.filter((d) => d.batch === batch).map((d) => d.state);

const batchCountOf = (devices: ReadonlyArray<{ batch: number }>) =>
  devices.reduce((max, d) => Math.max(max, d.batch), 0);

/**
 * The next thing a running update does: pause as soon as its current batch has more failures than
 * `max_failure_percent` allows (unless the operator resumed past that batch), wait while the batch has chargers
 * not done, then start the next batch, or complete after the last.
 */
export function nextRolloutStep(
  update: RolloutState,
  devices: ReadonlyArray<{ batch: number; state: UpdateDeviceState }>,
): RolloutStep {
  if (update.status !== 'running') return { kind: 'wait' };
  const batches = batchCountOf(devices);
  const current = update.current_batch;
  if (current > 0) {
    const states = statesOf(devices, current);
    const verdict = overThreshold(states, update.max_failure_percent);
    if (verdict.over && update.waived_batch !== current) {
      return {
        kind: 'pause',
        reason:
          `batch ${current} of ${batches}: ${verdict.failures} of ${verdict.counted} chargers failed ` +
          `(more than max_failure_percent ${update.max_failure_percent})`,
      };
    }
    if (!states.every(isFinalState)) return { kind: 'wait' };
  }
  return current >= batches ? { kind: 'complete' } : { kind: 'start_batch', batch: current + 1 };
}

/** The batch to waive when an operator resumes a paused update: its current one, when that one is over. */
export function batchToWaive(
  update: Pick<RolloutState, 'current_batch' | 'max_failure_percent' | 'waived_batch'>,
  devices: ReadonlyArray<{ batch: number; state: UpdateDeviceState }>,
): number {
  if (update.current_batch < 1) return update.waived_batch;
  const verdict = overThreshold(statesOf(devices, update.current_batch), update.max_failure_percent);
  return verdict.over ? update.current_batch : update.waived_batch;
}

export type BatchStatus = (typeof UPDATE_BATCH_STATUSES)[number];

/** Each batch as the operator sees it. */
export function batchesOf(
  update: Pick<RolloutState, 'current_batch' | 'max_failure_percent'>,
  devices: ReadonlyArray<{ batch: number; state: UpdateDeviceState }>,
): Array<{ index: number; status: BatchStatus; device_count: number }> {
  const result: Array<{ index: number; status: BatchStatus; device_count: number }> = [];
  for (let index = 1; index <= batchCountOf(devices); index++) {
    const states = statesOf(devices, index);
    let status: BatchStatus = 'pending';
    if (index <= update.current_batch) {
      if (overThreshold(states, update.max_failure_percent).over) status = 'failed';
      else status = states.every(isFinalState) ? 'completed' : 'running';
    }
    result.push({ index, status, device_count: states.length });
  }
  return result;
}

/** How many chargers are in each state. */
export function progressOf(devices: ReadonlyArray<{ state: UpdateDeviceState }>): Record<string, number> {
  const progress: Record<string, number> = {};
  for (const d of devices) progress[d.state] = (progress[d.state] ?? 0) + 1;
  return progress;
}
