import type {
  ArtifactKind,
  UpdateDevice,
  UpdateRequest,
  UpdateSummary,
  UpdatesQuery,
  UpdateView,
} from '../../shared/index.js';
import { toTimestamp } from '../../shared/index.js';
import { errors } from '../domain/api-error.js';
import { newId } from '../domain/ids.js';
import {
  batchesOf,
  batchToWaive,
  planBatches,
  progressOf,
  rolloutSettings,
  skipReasonOf,
} from '../domain/update-rollout.js';
import type { Page } from '../storage/page.js';
import type { Store, UpdateCandidate, UpdateDeviceRow, UpdateRow } from '../storage/store.js';
import type { CommandService } from './command-service.js';
import type { UpdateGate } from './update-gate.js';

export interface UpdateServiceDeps {
  store: Store;
  commands: Pick<CommandService, 'cancelUpdate'>;
  gate: UpdateGate;
  now: () => number;
  /** Told when an update's status changed (webhooks). */
  statusChanged?: (update: UpdateRow, progress: Record<string, number>, atMs: number) => void;
}

/** Who acts: the client, and the operators whose artifacts, chargers and updates it may reach. */
export interface UpdateActor {
  clientId: string;
  operatorIds: readonly string[];
}

function summaryOf(u: UpdateRow, progress: Record<string, number>, deviceCount: number): UpdateSummary {
  return {
    update_id: u.update_id,
    artifact: { artifact_id: u.artifact_id, kind: u.artifact_kind, version: u.artifact_version },
    status: u.status,
    ...(u.reason !== null ? { reason: u.reason } : {}),
    target_type: u.target_type,
    target_ids: u.target_ids,
    install: u.install,
    ...(u.window ? { window: u.window } : {}),
    rollout: u.rollout,
    created_at: toTimestamp(u.created_ms),
    updated_at: toTimestamp(u.updated_ms),
    device_count: deviceCount,
    progress,
  };
}

function deviceView(d: UpdateDeviceRow): UpdateDevice {
  return {
    device_id: d.device_id,
    batch: d.batch,
    state: d.state,
    ...(d.command_id !== null ? { command_id: d.command_id } : {}),
    ...(d.version_before !== null ? { version_before: d.version_before } : {}),
    ...(d.version_after !== null ? { version_after: d.version_after } : {}),
    ...(d.reason !== null ? { reason: d.reason } : {}),
    updated_at: toTimestamp(d.updated_ms),
  };
}

const versionOf = (kind: ArtifactKind, c: UpdateCandidate) =>
  kind === 'agent' ? c.agent_version : c.firmware_version;

/** The request's targets, each one the artifact's operator must hold; another's answers 404 like a missing one. */
function checkTargets(request: UpdateRequest, operatorId: string, found: readonly UpdateCandidate[]): void {
  const ids = request.target_ids ?? [];
  if (request.target_type === 'operator') {
    const foreign = ids.find((id) => id !== operatorId);
    if (foreign !== undefined) throw errors.notFound(`Operator ${foreign}`);
  } else if (request.target_type === 'device') {
    const reached = new Set(found.map((c) => c.device_id));
    const missing = ids.find((id) => !reached.has(id));
    if (missing !== undefined) throw errors.notFound(`Device ${missing}`);
  }
}

/**
 * Updates (campaigns, DESIGN.md §19): an operator's artifact rolled out to its chargers in batches. Creating,
 * reading, pausing, resuming and cancelling; the gate (update-gate.ts) moves them along. An update belongs to its
 * artifact's operator: another tenant's answers 404 like a missing one.
 */
export function createUpdateService(deps: UpdateServiceDeps) {
  const { store } = deps;

  async function owned(actor: UpdateActor, updateId: string): Promise<UpdateRow> {
    const update = await store.getUpdate(updateId);
    if (!update || !actor.operatorIds.includes(update.operator_id)) throw errors.notFound('Update');
    return update;
  }

  async function view(update: UpdateRow): Promise<UpdateView> {
    const devices = await store.listUpdateDevices(update.update_id);
    return {
      ...summaryOf(update, progressOf(devices), devices.length),
      batches: batchesOf(
        { current_batch: update.current_batch, max_failure_percent: update.rollout.max_failure_percent },
        devices,
      ),
      devices: devices.map(deviceView),
    };
  }

  /** The chargers to update: the targets', of the artifact's model for a firmware with a target. */
  async function candidatesFor(
    request: UpdateRequest,
    operatorId: string,
    kind: ArtifactKind,
    target: string,
  ) {
    if (request.target_type === 'site') {
      for (const id of request.target_ids ?? []) {
        if ((await store.getSite(id))?.operator_id !== operatorId) throw errors.notFound(`Site ${id}`);
      }
    }
    const found = await store.updateCandidates(operatorId, {
      type: request.target_type,
      ids: request.target_ids ?? [],
    });
    checkTargets(request, operatorId, found);
    const fitting = kind === 'firmware' && target !== '' ? found.filter((c) => c.model === target) : found;
    if (fitting.length === 0) {
      throw errors.validation({
        field: 'target_ids',
        value: request.target_ids,
        message:
          kind === 'firmware' && target !== ''
            ? `the targets hold no charger of model ${target}`
            : 'the targets hold no charger',
      });
    }
    const busy = await store.devicesInOpenUpdates(fitting.map((c) => c.device_id));
    if (busy.length > 0) {
      throw errors.conflict(
        `Charger ${busy[0]!.device_id} is still in update ${busy[0]!.update_id}: one update at a time per charger`,
      );
    }
    return fitting;
  }

  return {
    async create(
      request: UpdateRequest,
      actor: UpdateActor,
    ): Promise<{ update_id: string; status: UpdateRow['status']; device_count: number }> {
      const artifact = await store.getArtifactForOperators(request.artifact_id, actor.operatorIds);
      if (!artifact) throw errors.notFound('Artifact');
      const candidates = await candidatesFor(request, artifact.operator_id, artifact.kind, artifact.target);
      const skipped = new Map(candidates.map((c) => [c.device_id, skipReasonOf(artifact, c)]));
      const toUpdate = candidates.filter((c) => skipped.get(c.device_id) === undefined);
      const rollout = rolloutSettings(request.rollout, toUpdate.length);
      const batches = planBatches(toUpdate, rollout);
      const batchOf = new Map(toUpdate.map((c, i) => [c.device_id, batches[i]!]));
      const nowMs = deps.now();
      const update: UpdateRow = {
        update_id: newId('upd'),
        operator_id: artifact.operator_id,
        client_id: actor.clientId,
        artifact_id: artifact.artifact_id,
        artifact_kind: artifact.kind,
        artifact_version: artifact.version,
        target_type: request.target_type,
        target_ids: [...new Set(request.target_ids ?? [])],
        install: request.install,
        window: request.window ?? null,
        rollout,
        status: 'running',
        reason: null,
        current_batch: 0,
        waived_batch: 0,
        created_ms: nowMs,
        updated_ms: nowMs,
      };
      const devices: UpdateDeviceRow[] = candidates.map((c) => {
        const skip = skipped.get(c.device_id);
        return {
          update_id: update.update_id,
          device_id: c.device_id,
          batch: batchOf.get(c.device_id) ?? 0,
          state: skip !== undefined ? 'skipped' : 'pending',
          command_id: null,
          version_before: versionOf(artifact.kind, c),
          version_after: null,
          reason: skip ?? null,
          state_ms: nowMs,
          updated_ms: nowMs,
        };
      });
      await store.createUpdate(update, devices);
      deps.statusChanged?.(update, progressOf(devices), nowMs);
      // The first batch starts now, not at the gate's next turn.
      await deps.gate.advance(update);
      return { update_id: update.update_id, status: 'running', device_count: devices.length };
    },

    async list(actor: UpdateActor, query: UpdatesQuery): Promise<Page<UpdateSummary>> {
      const page = await store.listUpdates(actor.operatorIds, query);
      return { ...page, items: page.items.map((u) => summaryOf(u, u.progress, u.device_count)) };
    },

    async get(actor: UpdateActor, updateId: string): Promise<UpdateView> {
      return view(await owned(actor, updateId));
    },

    /** Stops starting batches; chargers already sent the update go on. */
    async pause(actor: UpdateActor, updateId: string): Promise<UpdateView> {
      const update = await owned(actor, updateId);
      const nowMs = deps.now();
      const reason = 'paused by the operator';
      if (!(await store.setUpdateStatus(updateId, ['running'], { status: 'paused', reason }, nowMs)))
        throw errors.conflict(`The update is ${update.status}: only a running update can be paused`);
      const paused = { ...update, status: 'paused' as const, reason, updated_ms: nowMs };
      const shown = await view(paused);
      deps.statusChanged?.(paused, shown.progress, nowMs);
      return shown;
    },

    /**
     * Runs a paused update again. A batch that paused it for its failures is waived: the operator has looked,
     * and the next batch starts once it is done.
     */
    async resume(actor: UpdateActor, updateId: string): Promise<UpdateView> {
      const update = await owned(actor, updateId);
      const nowMs = deps.now();
      const waived_batch = batchToWaive(
        {
          current_batch: update.current_batch,
          max_failure_percent: update.rollout.max_failure_percent,
          waived_batch: update.waived_batch,
        },
        await store.listUpdateDevices(updateId),
      );
      const to = { status: 'running' as const, reason: null, waived_batch };
      if (!(await store.setUpdateStatus(updateId, ['paused'], to, nowMs)))
        throw errors.conflict(`The update is ${update.status}: only a paused update can be resumed`);
      const running: UpdateRow = { ...update, ...to, updated_ms: nowMs };
      await deps.gate.advance(running);
      const shown = await view((await store.getUpdate(updateId)) ?? running);
      deps.statusChanged?.(running, shown.progress, nowMs);
      return shown;
    },

    /** Cancels: queued commands cancelled; chargers already installing finish and report. */
    async cancel(actor: UpdateActor, updateId: string): Promise<UpdateView> {
      const update = await owned(actor, updateId);
      const nowMs = deps.now();
      if (!(await deps.commands.cancelUpdate(updateId, nowMs)))
        throw errors.conflict(`The update is ${update.status}: it can no longer be cancelled`);
      const cancelled = (await store.getUpdate(updateId)) ?? { ...update, status: 'cancelled' as const };
      const shown = await view(cancelled);
      deps.statusChanged?.(cancelled, shown.progress, nowMs);
      return shown;
    },

    /** The kind of the update a charger's report names, when the charger is in it (inventory). */
    async kindOf(deviceId: string, updateId: string): Promise<ArtifactKind | undefined> {
      const update = await store.getUpdate(updateId);
      if (!update) return undefined;
      return (await store.deviceHasUpdateFor(deviceId, update.artifact_id))
        ? update.artifact_kind
        : undefined;
    },

    /** The gate's turn: every open update one step further (the sweep runs it on one instance at a time). */
    runGate: () => deps.gate.runOnce(),
    /** The artifact may be deleted only while no running or paused update uses it. */
    artifactInUse: (artifactId: string) => store.artifactInUse(artifactId),
  };
}
export type UpdateService = ReturnType<typeof createUpdateService>;
