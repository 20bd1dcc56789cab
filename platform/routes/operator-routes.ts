import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import {
  ChargingRecordsPage,
  ChargingRecordsQuery,
  COMMAND_EXPIRY_SECONDS,
  CommandCancelled,
  CommandParamsPath,
  CommandView,
  type CommandView as CommandViewType,
  ConnectorParams,
  ControlParamsPath,
  ControlView,
  Device,
  DeviceParams,
  DevicesPage,
  DevicesQuery,
  DischargeRequest,
  ENERGY_INTERVAL_MS,
  EnergyQuery,
  EnergySeries,
  EventsQuery,
  FlexibilityAccepted,
  FlexibilityRequest,
  ONLINE_WINDOW_SECONDS,
  pageOf,
  QueuedCommand,
  ScheduleDeleted,
  ScheduleParamsPath,
  ScheduleRequest,
  ScheduleStored,
  SchedulesPage,
  SchedulesQuery,
  SiteParamsPath,
  SitesPage,
  SitesQuery,
  SiteView,
  StartRequest,
  StopRequest,
  StoredEvent,
} from '../../shared/index.js';
import { errors } from '../api-error.js';
import type { OperatorPrincipal } from '../auth/authenticate.js';
import type { PlatformContext } from '../context.js';
import { connectorViewsByDevice, deviceView } from '../device-view.js';
import { rollupAlignedRange } from '../domain/energy-rollup.js';
import {
  controlCommandParams,
  controlProgress,
  effectiveControlStatus,
  planCancellation,
} from '../domain/flexibility.js';
import { newId } from '../ids.js';
import { type AnyRoute, route } from '../route-spec.js';
import type { CommandHistoryRow, CommandRow, ConnectorRow, NewCommand } from '../storage/store.js';
import { operatorTokenRoute } from './operator-token.js';

const iso = (ms: number) => new Date(ms).toISOString();
const read = { kind: 'operator', scope: 'read' } as const;
const write = { kind: 'operator', scope: 'write' } as const;

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

export function operatorRoutes(ctx: PlatformContext): AnyRoute[] {
  const principal = (request: FastifyRequest): OperatorPrincipal => request.operator!;

  async function visibleDevice(request: FastifyRequest, deviceId: string) {
    const device = await ctx.store.getDeviceForOperators(deviceId, principal(request).operatorIds);
    // Another tenant's device answers exactly like a missing one (DESIGN.md §2).
    if (!device) throw errors.notFound('Device');
    return device;
  }
  async function visibleConnector(
    request: FastifyRequest,
    p: { device_id: string; connector_id: number },
  ): Promise<ConnectorRow> {
    await visibleDevice(request, p.device_id);
    const connector = await ctx.store.getConnector(p.device_id, p.connector_id);
    if (!connector) throw errors.notFound('Connector');
    return connector;
  }
  async function visibleSite(request: FastifyRequest, siteId: string) {
    const site = await ctx.store.getSite(siteId);
    if (!site || !principal(request).operatorIds.includes(site.operator_id)) throw errors.notFound('Site');
    return site;
  }
  /** A command's expiry counts from the same instant as its creation. */
  const expiry = (kind: keyof typeof COMMAND_EXPIRY_SECONDS, t: number) =>
    t + COMMAND_EXPIRY_SECONDS[kind] * 1000;
  /** Queues one command for one connector and wakes the charger's long poll. */
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
  const onlineSince = () => ctx.now() - ONLINE_WINDOW_SECONDS * 1000;

  return [
    operatorTokenRoute(ctx),

    route({
      method: 'GET',
      url: '/v1/operator/sites',
      summary: 'List the sites of the client’s operators',
      tag: 'operator',
      auth: read,
      rate: 'operatorQuery',
      query: SitesQuery,
      response: SitesPage,
      handler: async ({ query, request }) =>
        ctx.store.listSitesFor(principal(request).operatorIds, query.page, query.size),
    }),
    route({
      method: 'GET',
      url: '/v1/operator/sites/:site_id',
      summary: 'One site',
      tag: 'operator',
      auth: read,
      rate: 'operatorQuery',
      params: SiteParamsPath,
      response: SiteView,
      errors: [404],
      handler: async ({ params, request }) => {
        const site = await visibleSite(request, params.site_id);
        return { ...site, device_count: await ctx.store.countDevicesInSite(site.site_id) };
      },
    }),
    route({
      method: 'GET',
      url: '/v1/operator/devices',
      summary: 'List chargers, optionally by site or status',
      tag: 'operator',
      auth: read,
      rate: 'operatorQuery',
      query: DevicesQuery,
      response: DevicesPage,
      errors: [404],
      handler: async ({ query, request }) => {
        if (query.site_id) await visibleSite(request, query.site_id);
        // The status filter runs in SQL: last-seen times held in memory must reach the database first.
        if (query.status) await ctx.liveness.flush();
        const page = await ctx.store.listDevices(principal(request).operatorIds, query, onlineSince());
        const connectors = connectorViewsByDevice(
          await ctx.store.listConnectorsOf(page.items.map((d) => d.device_id)),
        );
        return {
          ...page,
          items: page.items.map((d) =>
            deviceView(d, connectors.get(d.device_id) ?? [], ctx.liveness.isOnline(d)),
          ),
        };
      },
    }),
    route({
      method: 'GET',
      url: '/v1/operator/devices/:device_id',
      summary: 'One charger with its connectors’ live state',
      tag: 'operator',
      auth: read,
      rate: 'operatorQuery',
      params: DeviceParams,
      response: Device,
      errors: [404],
      handler: async ({ params, request }) => {
        const device = await visibleDevice(request, params.device_id);
        const connectors = await ctx.store.listConnectors(device.device_id);
        return deviceView(device, connectors, ctx.liveness.isOnline(device));
      },
    }),
    route({
      method: 'GET',
      url: '/v1/operator/devices/:device_id/events',
      summary: 'Events the charger reported, newest first',
      tag: 'operator',
      auth: read,
      rate: 'operatorQuery',
      params: DeviceParams,
      query: EventsQuery,
      response: pageOf(StoredEvent),
      errors: [404],
      handler: async ({ params, query, request }) => {
        await visibleDevice(request, params.device_id);
        const page = await ctx.store.listEvents(params.device_id, query.page, query.size);
        return {
          ...page,
          items: page.items.map((e) => {
            const out: z.infer<typeof StoredEvent> = {
              device_id: e.device_id,
              event_id: e.event_id,
              kind: e.kind,
              severity: e.severity as z.infer<typeof StoredEvent>['severity'],
              timestamp: iso(e.ts_ms),
              received_at: iso(e.received_ms),
            };
            if (e.connector_id !== null) out.connector_id = e.connector_id;
            if (e.message !== null) out.message = e.message;
            if (e.data !== null) out.data = e.data as z.infer<typeof StoredEvent>['data'];
            return out;
          }),
        };
      },
    }),
    route({
      method: 'GET',
      url: '/v1/operator/charging-records',
      summary: 'Charging records, newest first by start_time',
      tag: 'operator',
      auth: read,
      rate: 'operatorQuery',
      query: ChargingRecordsQuery,
      response: ChargingRecordsPage,
      handler: async ({ query, request }) =>
        ctx.store.listChargingRecords(principal(request).operatorIds, query),
    }),
    route({
      method: 'GET',
      url: '/v1/operator/energy',
      summary: 'Energy time-series aggregated from telemetry',
      description:
        'Buckets of 15m, 1h or 1d starting at start_time (UTC), with start_time and end_time widened to whole ' +
        '15 minutes (the answer says which range it covers). Energy is integrated from telemetry power; a gap ' +
        'of more than 5 minutes between samples counts as no data.',
      tag: 'operator',
      auth: read,
      rate: 'operatorQuery',
      query: EnergyQuery,
      response: EnergySeries,
      errors: [404],
      handler: async ({ query, request }) => {
        let deviceIds: string[];
        if (query.device_id) deviceIds = [(await visibleDevice(request, query.device_id)).device_id];
        else
          deviceIds = await ctx.store.deviceIdsInSite((await visibleSite(request, query.site_id!)).site_id);
        // Energy is kept in 15-minute buckets: the series covers the request's range widened to them.
        const { startMs: start, endMs: end } = rollupAlignedRange(
          Date.parse(query.start_time),
          Date.parse(query.end_time),
        );
        const step = ENERGY_INTERVAL_MS[query.interval];
        const rows = new Map(
          (await ctx.store.energyBuckets(deviceIds, start, end, step)).map((b) => [b.start_ms, b]),
        );
        const items: z.infer<typeof EnergySeries>['items'] = [];
        const r3 = (x: number) => Math.round(x * 1000) / 1000;
        for (let t = start; t < end; t += step) {
          const b = rows.get(t);
          items.push({
            start_time: iso(t),
            end_time: iso(Math.min(t + step, end)),
            energy_imported: r3(b?.imported_kwh ?? 0),
            energy_exported: r3(b?.exported_kwh ?? 0),
            avg_power: r3(b && b.samples > 0 ? b.power_sum / b.samples : 0),
            max_power: r3(b?.max_power ?? 0),
            samples: b?.samples ?? 0,
          });
        }
        return {
          ...(query.device_id ? { device_id: query.device_id } : { site_id: query.site_id }),
          interval: query.interval,
          start_time: iso(start),
          end_time: iso(end),
          items,
        };
      },
    }),

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
        const found = await ctx.store.getCommand(params.command_id);
        if (!found) throw errors.notFound('Command');
        await visibleDevice(request, found.command.device_id).catch(() => {
          throw errors.notFound('Command');
        });
        return commandView(found.command, found.history);
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
        const found = await ctx.store.getCommand(params.command_id);
        if (!found) throw errors.notFound('Command');
        await visibleDevice(request, found.command.device_id).catch(() => {
          throw errors.notFound('Command');
        });
        const t = ctx.now();
        const outcome = await ctx.commands.cancel(params.command_id, t);
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

    route({
      method: 'POST',
      url: '/v1/operator/control/flexibility',
      summary: 'Send a load-flexibility command to a group of chargers',
      tag: 'operator',
      auth: write,
      rate: 'operatorBatchControl',
      body: FlexibilityRequest,
      response: FlexibilityAccepted,
      errors: [404],
      handler: async ({ body, request }) => {
        const { operatorIds, clientId } = principal(request);
        const ids = [...new Set(body.target_ids ?? [])];
        if (body.target_type === 'site') {
          for (const id of ids) await visibleSite(request, id);
        } else if (body.target_type === 'operator') {
          for (const id of ids) if (!operatorIds.includes(id)) throw errors.notFound(`Operator ${id}`);
        }
        const deviceIds = await ctx.store.listDeviceIdsForTargets(operatorIds, {
          type: body.target_type,
          ids,
        });
        const start = ctx.now();
        const control_id = newId('ctl');
        const { params, endMs: end } = controlCommandParams(body.params, control_id, start);
        await ctx.commands.createControl(
          {
            control_id,
            client_id: clientId,
            target_type: body.target_type,
            target_ids: ids,
            command: body.command,
            params,
            status: 'executing',
            created_ms: start,
            ends_ms: end,
            operator_ids: [...operatorIds],
          },
          deviceIds.map((device_id) => ({
            device_id,
            command: body.command,
            params,
            expiry_ms: end,
            control_id,
            client_id: clientId,
          })),
        );
        return { control_id, status: 'executing' as const, device_count: deviceIds.length };
      },
    }),
    route({
      method: 'GET',
      url: '/v1/operator/control/:control_id',
      summary: 'Follow a flexibility control: status and per-charger progress',
      tag: 'operator',
      auth: read,
      rate: 'operatorQuery',
      params: ControlParamsPath,
      response: ControlView,
      errors: [404],
      handler: async ({ params, request }) => {
        const found = await ctx.store.getControl(params.control_id);
        const ops = principal(request).operatorIds;
        if (!found?.control.operator_ids.some((o) => ops.includes(o))) throw errors.notFound('Control');
        const { control, commands } = found;
        const progress = controlProgress(commands);
        const status = effectiveControlStatus(control.status, control.ends_ms, ctx.now());
        return {
          control_id: control.control_id,
          status,
          command: control.command,
          params: control.params,
          target_type: control.target_type,
          target_ids: control.target_ids,
          created_at: iso(control.created_ms),
          ends_at: iso(control.ends_ms),
          device_count: commands.length,
          progress,
          devices: commands,
        };
      },
    }),
    route({
      method: 'DELETE',
      url: '/v1/operator/control/:control_id',
      summary: 'Cancel a flexibility control and lift it from the chargers',
      description:
        'Queued commands of the control are cancelled; chargers that already received it get the same command ' +
        'with the window ended now, which lifts the limit.',
      tag: 'operator',
      auth: write,
      rate: 'operatorBatchControl',
      params: ControlParamsPath,
      response: z.object({ control_id: z.string(), status: z.literal('cancelled') }),
      errors: [404, 409],
      handler: async ({ params, request }) => {
        const found = await ctx.store.getControl(params.control_id);
        const ops = principal(request).operatorIds;
        if (!found?.control.operator_ids.some((o) => ops.includes(o))) throw errors.notFound('Control');
        const t = ctx.now();
        const plan = planCancellation(found.control, found.commands, t);
        if (plan.kind === 'conflict') throw errors.conflict(plan.message);
        const reversals: NewCommand[] = plan.reversalDeviceIds.map((device_id) => ({
          device_id,
          command: found.control.command,
          params: plan.reversalParams,
          expiry_ms: plan.reversalExpiryMs,
          client_id: principal(request).clientId,
        }));
        await ctx.commands.cancelControl(params.control_id, reversals, t);
        return { control_id: params.control_id, status: 'cancelled' as const };
      },
    }),
  ];
}
