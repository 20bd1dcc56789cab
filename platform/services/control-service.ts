import type { ControlView, FlexibilityRequest } from '../../shared/index.js';
import { toTimestamp } from '../../shared/index.js';
import { errors } from '../domain/api-error.js';
import {
  controlCommandParams,
  controlOperatorIds,
  controlProgress,
  distinctTargetIds,
  effectiveControlStatus,
  foreignOperatorId,
  mayFollowControl,
  planCancellation,
} from '../domain/flexibility.js';
import { newId } from '../domain/ids.js';
import type { ControlRow, NewCommand, Store } from '../storage/store.js';
import type { CommandService } from './command-service.js';
import type { Tenancy } from './tenancy.js';

/**
 * Load-flexibility controls (spec: `/v1/operator/control/flexibility`): fanning a control out to its chargers,
 * following it and cancelling it. The rules are `domain/flexibility.ts`; every command change goes through the
 * command service, which wakes the chargers and publishes the events.
 */
export interface ControlServiceDeps {
  store: Store;
  commands: CommandService;
  tenancy: Tenancy;
  now(): number;
  /** Told when a control starts or is cancelled; the command service's sweep tells of completions. */
  webhooks?: { controlStatus(control: ControlRow, atMs: number): void };
}

/** Who acts: the client, and the operators whose chargers and controls it may reach. */
export interface ControlActor {
  clientId: string;
  operatorIds: readonly string[];
}

export function createControlService(deps: ControlServiceDeps) {
  /** The control, if the actor may see every operator it belongs to; another tenant's is as good as missing. */
  async function visibleControl(controlId: string, operatorIds: readonly string[]) {
    const found = await deps.store.getControl(controlId);
    return found && mayFollowControl(found.control.operator_ids, operatorIds) ? found : undefined;
  }

  /**
   * The request's targets without repeats, each checked to be the actor's, and the operators they name (a
   * site's operator, an operator id itself; none for `all`).
   */
  async function resolveTargets(request: FlexibilityRequest, actor: ControlActor) {
    const ids = distinctTargetIds(request.target_ids);
    const operatorIds: string[] = [];
    if (request.target_type === 'site') {
      for (const id of ids) operatorIds.push((await deps.tenancy.site(actor, id)).operator_id);
    } else if (request.target_type === 'operator') {
      const foreign = foreignOperatorId(ids, actor.operatorIds);
      if (foreign !== undefined) throw errors.notFound(`Operator ${foreign}`);
      operatorIds.push(...ids);
    }
    return { ids, operatorIds };
  }

  return {
    /**
     * Starts a control on every charger of the targets the actor may reach. A site or operator target that is
     * not the actor's answers 404 like a missing one.
     */
    async start(
      request: FlexibilityRequest,
      actor: ControlActor,
    ): Promise<{ control_id: string; status: 'executing'; device_count: number }> {
      const targets = await resolveTargets(request, actor);
      const reached = await deps.store.listDevicesForTargets(actor.operatorIds, {
        type: request.target_type,
        ids: targets.ids,
      });
      const deviceIds = reached.map((d) => d.device_id);
      const start = deps.now();
      const control_id = newId('ctl');
      const { params, endMs: end } = controlCommandParams(request.params, control_id, start);
      const control: ControlRow = {
        control_id,
        client_id: actor.clientId,
        target_type: request.target_type,
        target_ids: [...targets.ids],
        command: request.command,
        params,
        status: 'executing',
        created_ms: start,
        ends_ms: end,
        operator_ids: controlOperatorIds(reached, targets.operatorIds, actor.operatorIds),
      };
      await deps.commands.createControl(
        control,
        deviceIds.map((device_id) => ({
          device_id,
          command: request.command,
          params,
          expiry_ms: end,
          control_id,
          client_id: actor.clientId,
        })),
      );
      deps.webhooks?.controlStatus(control, start);
      return { control_id, status: 'executing', device_count: deviceIds.length };
    },

    /** A control with its per-charger progress; undefined when missing or not the actor's. */
    async view(controlId: string, operatorIds: readonly string[]): Promise<ControlView | undefined> {
      const found = await visibleControl(controlId, operatorIds);
      if (!found) return undefined;
      const { control, commands } = found;
      return {
        control_id: control.control_id,
        status: effectiveControlStatus(control.status, control.ends_ms, deps.now()),
        command: control.command,
        params: control.params,
        target_type: control.target_type,
        target_ids: control.target_ids,
        created_at: toTimestamp(control.created_ms),
        ends_at: toTimestamp(control.ends_ms),
        device_count: commands.length,
        progress: controlProgress(commands),
        devices: commands,
      };
    },

    /**
     * Cancels a control: its queued commands are cancelled, and chargers that may already hold it get a
     * reversal. `not_found` when missing or not the actor's; a conflict when it is no longer executing.
     */
    async cancel(
      controlId: string,
      actor: ControlActor,
    ): Promise<'cancelled' | 'not_found' | { conflict: string }> {
      const found = await visibleControl(controlId, actor.operatorIds);
      if (!found) return 'not_found';
      const t = deps.now();
      const plan = planCancellation(found.control, found.commands, t);
      if (plan.kind === 'conflict') return { conflict: plan.message };
      const reversals: NewCommand[] = plan.reversalDeviceIds.map((device_id) => ({
        device_id,
        command: found.control.command,
        params: plan.reversalParams,
        expiry_ms: plan.reversalExpiryMs,
        client_id: actor.clientId,
      }));
      await deps.commands.cancelControl(controlId, reversals, t);
      deps.webhooks?.controlStatus({ ...found.control, status: 'cancelled' }, t);
      return 'cancelled';
    },
  };
}
export type ControlService = ReturnType<typeof createControlService>;
