import type { FastifyRequest } from 'fastify';
import {
  COMMAND_EXPIRY_SECONDS,
  CommandCancelled,
  CommandParamsPath,
  CommandView,
  type CommandView as CommandViewType,
  ConnectorParams,
  DeviceCommandsPage,
  DeviceCommandsQuery,
  DeviceParams,
  DischargeRequest,
  QueuedCommand,
  ScheduleDeleted,
  ScheduleParamsPath,
  ScheduleRequest,
  ScheduleStored,
  SchedulesPage,
  SchedulesQuery,
  StartRequest,
  StopRequest,
} from '../../../shared/index.js';
import { errors } from '../../domain/api-error.js';
import type { CommandHistoryRow, CommandRow, NewCommand } from '../../storage/store.js';
import type { PlatformContext } from '../context.js';
import { type AnyRoute, route } from '../route-spec.js';
import { operatorAccess, principal, read, write } from './operator-access.js';

const iso = (ms: number) => new Date(ms).toISOString();

export function commandView(c: CommandRow, history: readonly CommandHistoryRow[]): CommandViewType {
  const view: CommandViewType = {
    command_id: c.command_id,
    device_id: c.device_id,
    command: c.command,
    params: c.params,
    status: c.status,
    expiry: iso(c.expiry_ms),
    created_at: iso(c.created_ms),
    updated_at: iso(c.updated_ms),
    history: history.map((h) =>
      h.reason
        ? { status: h.status, at: iso(h.at_ms), reason: h.reason }
        : { status: h.status, at: iso(h.at_ms) },
    ),
  };
  if (c.reason) view.reason = c.reason;
  if (c.control_id) view.control_id = c.control_id;
  return view;
}

/** A command's expiry counts from the same instant as its creation. */
const expiry = (kind: keyof typeof COMMAND_EXPIRY_SECONDS, t: number) =>
  t + COMMAND_EXPIRY_SECONDS[kind] * 1000;

/** Commands to one charger: listing, following and cancelling them, stop/start/discharge, schedules. */
export function operatorCommandRoutes(ctx: PlatformContext): AnyRoute[] {
  const { visibleDevice, visibleConnector } = operatorAccess(ctx);

  /** A command the caller may see; another tenant's answers like a missing one. */
  async function visibleCommand(request: FastifyRequest, commandId: string) {
    const found = await ctx.store.getCommand(commandId);
    if (!found) throw errors.notFound('Command');
    await visibleDevice(request, found.command.device_id).catch(() => {
      throw errors.notFound('Command');
    });
    return found;
  }
  /** Queues one command for one connector; the command service wakes the charger's long poll. */
  async function queue(
    request: FastifyRequest,
    kind: 'stop' | 'start' | 'discharge',
    cmd: Omit<NewCommand, 'client_id' | 'expiry_ms' | 'command'>,
  ) {
    const t = ctx.now();
    const [row] = await ctx.commands.queue(
      [{ ...cmd, command: kind, expiry_ms: expiry(kind, t), client_id: principal(request).clientId }],
      t,
    );
    return { command_id: row!.command_id, status: 'queued' as const };
  }

  return [
    route({
      method: 'GET',
      url: '/v1/operator/commands/:command_id',
      summary: 'Follow a command: status and history',
      tag: 'operator',
      auth: read,
      rate: 'operatorQuery',
      params: CommandParamsPath,
      response: CommandView,
      errors: [404],
      handler: async ({ params, request }) => {
        const found = await visibleCommand(request, params.command_id);
        return commandView(found.command, found.history);
      },
    }),
    route({
      method: 'GET',
      url: '/v1/operator/devices/:device_id/commands',
      summary: 'The commands sent to a charger with their statuses, newest first',
      description:
        'Every command of the charger, whichever client or flexibility control queued it, by creation time ' +
        'then command_id, both descending; optionally only those in one status. Each item is what ' +
        'GET /v1/operator/commands/{command_id} answers.',
      tag: 'operator',
      auth: read,
      rate: 'operatorQuery',
      params: DeviceParams,
      query: DeviceCommandsQuery,
      response: DeviceCommandsPage,
      errors: [404],
      handler: async ({ params, query, request }) => {
        const device = await visibleDevice(request, params.device_id);
        const page = await ctx.commands.listOfDevice(device.device_id, query);
        return { ...page, items: page.items.map((c) => commandView(c.command, c.history)) };
      },
    }),
    route({
      method: 'DELETE',
      url: '/v1/operator/commands/:command_id',
      summary: 'Cancel a command that is still queued',
      tag: 'operator',
      auth: write,
      rate: 'operatorControl',
      params: CommandParamsPath,
      response: CommandCancelled,
      errors: [404, 409],
      handler: async ({ params, request }) => {
        await visibleCommand(request, params.command_id);
        const outcome = await ctx.commands.cancel(params.command_id, ctx.now());
        if (outcome === 'not_found') throw errors.notFound('Command');
        if (outcome === 'conflict')
          throw errors.conflict('Command is no longer queued and cannot be cancelled');
        return { command_id: outcome.command_id, status: 'cancelled' as const };
      },
    }),

    route({
      method: 'POST',
      url: '/v1/operator/devices/:device_id/connectors/:connector_id/stop',
      summary: 'Stop charging or discharging on a connector',
      tag: 'operator',
      auth: write,
      rate: 'operatorControl',
      params: ConnectorParams,
      body: StopRequest,
      bodyOptional: true,
      response: QueuedCommand,
      errors: [404],
      handler: async ({ params, body, request }) => {
        const c = await visibleConnector(request, params);
        return queue(request, 'stop', {
          device_id: c.device_id,
          params: { connector_id: c.connector_id, reason: body.reason ?? 'user_request' },
        });
      },
    }),
    route({
      method: 'POST',
      url: '/v1/operator/devices/:device_id/connectors/:connector_id/start',
      summary: 'Start charging on a connector (remote start)',
      tag: 'operator',
      auth: write,
      rate: 'operatorControl',
      params: ConnectorParams,
      body: StartRequest,
      bodyOptional: true,
      response: QueuedCommand,
      errors: [404],
      handler: async ({ params, body, request }) => {
        const c = await visibleConnector(request, params);
        return queue(request, 'start', {
          device_id: c.device_id,
          params: { connector_id: c.connector_id, ...body },
        });
      },
    }),
    route({
      method: 'POST',
      url: '/v1/operator/devices/:device_id/connectors/:connector_id/discharge',
      summary: 'Start V2G discharging (V2G-capable connectors only)',
      tag: 'operator',
      auth: write,
      rate: 'operatorControl',
      params: ConnectorParams,
      body: DischargeRequest,
      response: QueuedCommand,
      errors: [404, 409],
      handler: async ({ params, body, request }) => {
        const c = await visibleConnector(request, params);
        if (!c.v2g_capable) throw errors.conflict('Connector is not V2G-capable');
        return queue(request, 'discharge', {
          device_id: c.device_id,
          params: { connector_id: c.connector_id, ...body },
        });
      },
    }),
    route({
      method: 'POST',
      url: '/v1/operator/devices/:device_id/connectors/:connector_id/schedule',
      summary: 'Store a charging schedule on a connector',
      tag: 'operator',
      auth: write,
      rate: 'operatorControl',
      params: ConnectorParams,
      body: ScheduleRequest,
      response: ScheduleStored,
      errors: [404, 409],
      handler: async ({ params, body: schedule, request }) => {
        const c = await visibleConnector(request, params);
        if (!c.v2g_capable && schedule.time_slots.some((s) => s.action === 'discharge')) {
          throw errors.conflict('Connector is not V2G-capable; discharge slots are not allowed');
        }
        const t = ctx.now();
        const cmd = await ctx.commands.saveSchedule(
          { device_id: c.device_id, connector_id: c.connector_id, schedule, updated_ms: t },
          {
            device_id: c.device_id,
            command: 'set_schedule',
            params: { connector_id: c.connector_id, schedule },
            expiry_ms: expiry('set_schedule', t),
            client_id: principal(request).clientId,
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
    }),
    route({
      method: 'GET',
      url: '/v1/operator/devices/:device_id/connectors/:connector_id/schedules',
      summary: 'The schedules stored on a connector',
      tag: 'operator',
      auth: read,
      rate: 'operatorQuery',
      params: ConnectorParams,
      query: SchedulesQuery,
      response: SchedulesPage,
      errors: [404],
      handler: async ({ params, query, request }) => {
        const c = await visibleConnector(request, params);
        return ctx.store.listSchedules(c.device_id, c.connector_id, query.page, query.size);
      },
    }),
    route({
      method: 'DELETE',
      url: '/v1/operator/devices/:device_id/connectors/:connector_id/schedules/:schedule_id',
      summary: 'Delete a schedule and tell the charger',
      tag: 'operator',
      auth: write,
      rate: 'operatorControl',
      params: ScheduleParamsPath,
      response: ScheduleDeleted,
      errors: [404],
      handler: async ({ params, request }) => {
        const c = await visibleConnector(request, params);
        const t = ctx.now();
        const cmd = await ctx.commands.deleteSchedule(
          c.device_id,
          c.connector_id,
          params.schedule_id,
          {
            device_id: c.device_id,
            command: 'delete_schedule',
            params: { connector_id: c.connector_id, schedule_id: params.schedule_id },
            expiry_ms: expiry('delete_schedule', t),
            client_id: principal(request).clientId,
          },
          t,
        );
        if (!cmd) throw errors.notFound('Schedule');
        return { schedule_id: params.schedule_id, command_id: cmd.command_id, status: 'queued' as const };
      },
    }),
  ];
}
