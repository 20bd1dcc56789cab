import type {
  ChargingSchedule,
  DeviceCommandsQuery,
  DischargeRequest,
  StopRequest,
} from '../../shared/index.js';
import { errors } from '../domain/api-error.js';
import {
  commandExpiryMs,
  dischargeRefusal,
  scheduleRefusal,
  stopReason,
} from '../domain/operator-commands.js';
import type { CommandWithHistory, Store } from '../storage/store.js';
import type { CommandService } from './command-service.js';
import { commandView } from './command-view.js';
import type { OperatorPrincipal } from './principal.js';
import { queueOperatorCommand } from './queue-command.js';
import type { Tenancy } from './tenancy.js';

export interface OperatorCommandServiceDeps {
  store: Pick<Store, 'getCommand' | 'listSchedules'>;
  tenancy: Tenancy;
  /** Every command change goes through it: it wakes the charger's long poll and publishes the event. */
  commands: CommandService;
  now: () => number;
}

/** Which connector a request is about. */
export interface ConnectorRef {
  device_id: string;
  connector_id: number;
}

/**
 * Commands an operator sends to one charger (spec: stop, start, discharge, schedules), listing, following and
 * cancelling them. The rules are domain/operator-commands.ts; tenancy answers another tenant's charger,
 * connector or command like a missing one.
 */
export function createOperatorCommandService(deps: OperatorCommandServiceDeps) {
  const { store, tenancy, commands } = deps;

  /** A command the actor may see; another tenant's answers like a missing one. */
  async function visibleCommand(actor: OperatorPrincipal, commandId: string): Promise<CommandWithHistory> {
    const found = await store.getCommand(commandId);
    if (!found) throw errors.notFound('Command');
    await tenancy.device(actor, found.command.device_id).catch(() => {
      throw errors.notFound('Command');
    });
    return found;
  }
  /** Queues one command for one connector of the actor's. */
  const queue = (
    actor: OperatorPrincipal,
    kind: 'stop' | 'start' | 'discharge',
    deviceId: string,
    params: Record<string, unknown>,
  ) => queueOperatorCommand(commands, actor, { kind, deviceId, params }, deps.now());

  return {
    async command(actor: OperatorPrincipal, commandId: string) {
      const found = await visibleCommand(actor, commandId);
      return commandView(found.command, found.history);
    },
    async deviceCommands(actor: OperatorPrincipal, deviceId: string, query: DeviceCommandsQuery) {
      const device = await tenancy.device(actor, deviceId);
      const page = await commands.listOfDevice(device.device_id, query);
      return { ...page, items: page.items.map((c) => commandView(c.command, c.history)) };
    },
    /** Only a queued command can be cancelled. */
    async cancel(actor: OperatorPrincipal, commandId: string) {
      await visibleCommand(actor, commandId);
      const outcome = await commands.cancel(commandId, deps.now());
      if (outcome === 'not_found') throw errors.notFound('Command');
      if (outcome === 'conflict')
        throw errors.conflict('Command is no longer queued and cannot be cancelled');
      return { command_id: outcome.command_id, status: 'cancelled' as const };
    },
    async stop(actor: OperatorPrincipal, ref: ConnectorRef, body: StopRequest) {
      const c = await tenancy.connector(actor, ref);
      return queue(actor, 'stop', c.device_id, {
        connector_id: c.connector_id,
        reason: stopReason(body.reason),
      });
    },
    async start(
      actor: OperatorPrincipal,
      ref: ConnectorRef,
      body: { target_soc?: number | undefined; power_limit?: number | undefined },
    ) {
      const c = await tenancy.connector(actor, ref);
      return queue(actor, 'start', c.device_id, { connector_id: c.connector_id, ...body });
    },
    async discharge(actor: OperatorPrincipal, ref: ConnectorRef, body: DischargeRequest) {
      const c = await tenancy.connector(actor, ref);
      const refusal = dischargeRefusal(c.v2g_capable);
      if (refusal) throw errors.conflict(refusal);
      return queue(actor, 'discharge', c.device_id, { connector_id: c.connector_id, ...body });
    },
    /** Stores the schedule and queues `set_schedule` for the charger, in one step. */
    async saveSchedule(actor: OperatorPrincipal, ref: ConnectorRef, schedule: ChargingSchedule) {
      const c = await tenancy.connector(actor, ref);
      const refusal = scheduleRefusal(c.v2g_capable, schedule.time_slots);
      if (refusal) throw errors.conflict(refusal);
      const t = deps.now();
      const cmd = await commands.saveSchedule(
        { device_id: c.device_id, connector_id: c.connector_id, schedule, updated_ms: t },
        {
          device_id: c.device_id,
          command: 'set_schedule',
          params: { connector_id: c.connector_id, schedule },
          expiry_ms: commandExpiryMs('set_schedule', t),
          client_id: actor.clientId,
        },
      );
      return {
        device_id: c.device_id,
        connector_id: c.connector_id,
        schedule,
        command_id: cmd.command_id,
        status: 'queued' as const,
      };
    },
    async schedules(actor: OperatorPrincipal, ref: ConnectorRef, page: number, size: number) {
      const c = await tenancy.connector(actor, ref);
      return store.listSchedules(c.device_id, c.connector_id, page, size);
    },
    /** Removes the platform's copy and queues `delete_schedule`; a schedule it does not hold is a 404. */
    async deleteSchedule(actor: OperatorPrincipal, ref: ConnectorRef & { schedule_id: string }) {
      const c = await tenancy.connector(actor, ref);
      const t = deps.now();
      const cmd = await commands.deleteSchedule(
        c.device_id,
        c.connector_id,
        ref.schedule_id,
        {
          device_id: c.device_id,
          command: 'delete_schedule',
          params: { connector_id: c.connector_id, schedule_id: ref.schedule_id },
          expiry_ms: commandExpiryMs('delete_schedule', t),
          client_id: actor.clientId,
        },
        t,
      );
      if (!cmd) throw errors.notFound('Schedule');
      return { schedule_id: ref.schedule_id, command_id: cmd.command_id, status: 'queued' as const };
    },
  };
}
export type OperatorCommandService = ReturnType<typeof createOperatorCommandService>;
