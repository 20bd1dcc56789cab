import { ONLINE_WINDOW_SECONDS } from '../../shared/index.js';
import { isOnline, seenStateOfRow } from '../domain/liveness-rule.js';
import {
  ACTIVE_DEVICE_STATES,
  nextRolloutStep,
  observeDevice,
  progressOf,
} from '../domain/update-rollout.js';
import type {
  ArtifactRow,
  BatchCommand,
  Store,
  UpdateDeviceChange,
  UpdateDeviceObservation,
  UpdateDeviceRow,
  UpdateRow,
} from '../storage/store.js';
import type { CommandService } from './command-service.js';

/**
 * An `update` command not taken by its charger within this time expires, and the charger counts as failed for
 * the update: a charger offline for a day must not hold its batch back for longer.
 */
export const UPDATE_COMMAND_EXPIRY_MS = 24 * 3600_000;

export interface UpdateGateDeps {
  store: Store;
  commands: Pick<CommandService, 'startUpdateBatch'>;
  now: () => number;
  /** Told when an update's status changed (webhooks). */
  statusChanged?: (update: UpdateRow, progress: Record<string, number>, atMs: number) => void;
  /** Writes this instance's last-seen times, so that the health check reads them as they are. */
  flushLiveness?: () => Promise<void>;
}

/** The `update` command's params (shared/commands.ts `UpdateParams`): the signed manifest and how to install. */
export function updateCommandParams(
  update: Pick<UpdateRow, 'update_id' | 'install' | 'window' | 'rollout'>,
  artifact: ArtifactRow,
  timezone: string,
): Record<string, unknown> {
  const params: Record<string, unknown> = {
    update_id: update.update_id,
    artifact_id: artifact.artifact_id,
    kind: artifact.kind,
    version: artifact.version,
    target: artifact.target,
    sha256: artifact.sha256,
    size: artifact.size,
    signature: artifact.signature,
    install: update.install,
    health_seconds: update.rollout.health_seconds,
  };
  if (update.window) params.window = { ...update.window, timezone };
  return params;
}

function changeOf(
  device: UpdateDeviceRow,
  obs: UpdateDeviceObservation,
  nowMs: number,
  healthMs: number,
  version: string,
): UpdateDeviceChange | undefined {
  const change = observeDevice(
    device,
    {
      command_status: obs.command_status,
      command_reason: obs.command_reason,
      report:
        obs.report_status === null
          ? null
          : { status: obs.report_status, version: obs.report_version, message: obs.report_message },
      online: isOnline(seenStateOfRow(obs), nowMs, ONLINE_WINDOW_SECONDS * 1000),
      fault: obs.reported_status === 'fault',
      bad_events: obs.bad_events,
    },
    nowMs,
    healthMs,
    version,
  );
  return change && { device_id: device.device_id, from: device.state, ...change };
}

/**
 * The update gate (DESIGN.md §19): moves each update along from what storage observes — its chargers' states
 * from their commands and reports, then the next batch, a pause over the failure threshold, or completion.
 * Every write is a compare-and-set, so a run cut short, or two runs at once, leave a state the next run
 * continues from; the sweep runs it on one instance at a time.
 */
export function createUpdateGate(deps: UpdateGateDeps) {
  const { store } = deps;

  async function observeDevices(update: UpdateRow, devices: UpdateDeviceRow[], nowMs: number) {
    const observed = await store.observeUpdate(update.update_id, ACTIVE_DEVICE_STATES);
    const byId = new Map(devices.map((d) => [d.device_id, d]));
    const changes = observed.flatMap((obs) => {
      const device = byId.get(obs.device_id);
      const change =
        device && changeOf(device, obs, nowMs, update.rollout.health_seconds * 1000, update.artifact_version);
      return change ? [change] : [];
    });
    if (changes.length === 0) return devices;
    const applied = await store.applyUpdateDeviceChanges(update.update_id, changes, nowMs);
    for (const c of applied) {
      const device = byId.get(c.device_id)!;
      byId.set(c.device_id, { ...device, state: c.state, reason: c.reason, state_ms: nowMs });
    }
    return [...byId.values()];
  }

  async function startBatch(update: UpdateRow, devices: UpdateDeviceRow[], batch: number, nowMs: number) {
    const artifact = await store.getArtifact(update.artifact_id);
    if (!artifact) return setStatus(update, devices, 'paused', 'the artifact was deleted', nowMs);
    const members = devices.filter((d) => d.batch === batch && d.state === 'pending').map((d) => d.device_id);
    const candidates = await store.updateCandidates(update.operator_id, { type: 'device', ids: members });
    const timezones = new Map(candidates.map((c) => [c.device_id, c.timezone]));
    const commands: BatchCommand[] = members.map((device_id) => ({
      device_id,
      command: {
        device_id,
        command: 'update',
        params: updateCommandParams(update, artifact, timezones.get(device_id) ?? 'UTC'),
        expiry_ms: nowMs + UPDATE_COMMAND_EXPIRY_MS,
        ...(update.client_id ? { client_id: update.client_id } : {}),
      },
    }));
    await deps.commands.startUpdateBatch(update.update_id, batch, commands, nowMs);
  }

  async function setStatus(
    update: UpdateRow,
    devices: readonly UpdateDeviceRow[],
    status: 'paused' | 'completed',
    reason: string | null,
    nowMs: number,
  ) {
    if (await store.setUpdateStatus(update.update_id, ['running'], { status, reason }, nowMs)) {
      deps.statusChanged?.({ ...update, status, reason, updated_ms: nowMs }, progressOf(devices), nowMs);
    }
  }

  /** One step of one update: its chargers observed, then at most one batch started or one status change. */
  async function advance(update: UpdateRow): Promise<void> {
    await deps.flushLiveness?.();
    const nowMs = deps.now();
    const devices = await observeDevices(update, await store.listUpdateDevices(update.update_id), nowMs);
    const step = nextRolloutStep(
      {
        status: update.status,
        current_batch: update.current_batch,
        waived_batch: update.waived_batch,
        max_failure_percent: update.rollout.max_failure_percent,
      },
      devices,
    );
    if (step.kind === 'start_batch') await startBatch(update, devices, step.batch, nowMs);
    else if (step.kind === 'pause') await setStatus(update, devices, 'paused', step.reason, nowMs);
    else if (step.kind === 'complete') await setStatus(update, devices, 'completed', null, nowMs);
  }

  return {
    advance,
    /** Every open update, one step each. */
    async runOnce(): Promise<void> {
      for (const update of await store.updatesInProgress()) await advance(update);
    },
  };
}
export type UpdateGate = ReturnType<typeof createUpdateGate>;
