import type { FastifyInstance, FastifyRequest } from 'fastify';
import {
  COMMAND_EXPIRY_SECONDS,
  ConnectorParams,
  DischargeRequest,
  FlexibilityRequest,
  ok,
  ScheduleRequest,
  StopRequest,
} from '../../shared/index.js';
import { errors } from '../api-error.js';
import { requireOperator } from '../auth/authenticate.js';
import type { PlatformContext } from '../context.js';
import { newId } from '../ids.js';
import { parse } from '../parse.js';
import type { ConnectorRow } from '../storage/store.js';

export function operatorControlRoutes(app: FastifyInstance, ctx: PlatformContext): void {
  const write = requireOperator(ctx, 'write');

  /** The addressed connector, if the client may see its device (DESIGN.md §2); 404/3001 otherwise. */
  async function visibleConnector(request: FastifyRequest): Promise<ConnectorRow> {
    const { device_id, connector_id } = parse(ConnectorParams, request.params);
    const device = await ctx.store.getDeviceForOperators(device_id, request.operator!.operatorIds);
    if (!device) throw errors.notFound('Device');
    const connector = await ctx.store.getConnector(device_id, connector_id);
    if (!connector) throw errors.notFound('Connector');
    return connector;
  }

  const expiry = (kind: keyof typeof COMMAND_EXPIRY_SECONDS) =>
    ctx.now() + COMMAND_EXPIRY_SECONDS[kind] * 1000;

  app.post(
    '/v1/operator/devices/:device_id/connectors/:connector_id/stop',
    { preHandler: write },
    async (request) => {
      const body = parse(StopRequest, request.body ?? {});
      const connector = await visibleConnector(request);
      const [cmd] = await ctx.store.enqueueCommands(
        [
          {
            device_id: connector.device_id,
            command: 'stop',
            params: { connector_id: connector.connector_id, reason: body.reason ?? 'user_request' },
            expiry_ms: expiry('stop'),
            client_id: request.operator!.clientId,
          },
        ],
        ctx.now(),
      );
      return ok({ command_id: cmd!.command_id, status: 'queued' as const });
    },
  );

  app.post(
    '/v1/operator/devices/:device_id/connectors/:connector_id/discharge',
    { preHandler: write },
    async (request) => {
      const body = parse(DischargeRequest, request.body);
      const connector = await visibleConnector(request);
      if (!connector.v2g_capable) throw errors.conflict('Connector is not V2G-capable');
      const [cmd] = await ctx.store.enqueueCommands(
        [
          {
            device_id: connector.device_id,
            command: 'discharge',
            params: { connector_id: connector.connector_id, ...body },
            expiry_ms: expiry('discharge'),
            client_id: request.operator!.clientId,
          },
        ],
        ctx.now(),
      );
      return ok({ command_id: cmd!.command_id, status: 'queued' as const });
    },
  );

  app.post(
    '/v1/operator/devices/:device_id/connectors/:connector_id/schedule',
    { preHandler: write },
    async (request) => {
      const schedule = parse(ScheduleRequest, request.body);
      const connector = await visibleConnector(request);
      if (!connector.v2g_capable && schedule.time_slots.some((s) => s.action === 'discharge')) {
        throw errors.conflict('Connector is not V2G-capable; discharge slots are not allowed');
      }
      const t = ctx.now();
      const cmd = await ctx.store.saveSchedule(
        { device_id: connector.device_id, connector_id: connector.connector_id, schedule, updated_ms: t },
        {
          device_id: connector.device_id,
          command: 'set_schedule',
          params: { connector_id: connector.connector_id, schedule },
          expiry_ms: expiry('set_schedule'),
          client_id: request.operator!.clientId,
        },
      );
      return ok({
        device_id: connector.device_id,
        connector_id: connector.connector_id,
        schedule,
        command_id: cmd.command_id,
        status: 'queued' as const,
      });
    },
  );

  app.post('/v1/operator/control/flexibility', { preHandler: write }, async (request) => {
    const body = parse(FlexibilityRequest, request.body);
    const { operatorIds, clientId } = request.operator!;
    const ids = [...new Set(body.target_ids ?? [])];
    if (body.target_type === 'site') {
      for (const id of ids) {
        const site = await ctx.store.getSite(id);
        if (!site || !operatorIds.includes(site.operator_id)) throw errors.notFound(`Site ${id}`);
      }
    } else if (body.target_type === 'operator') {
      for (const id of ids) if (!operatorIds.includes(id)) throw errors.notFound(`Operator ${id}`);
    }
    const deviceIds = await ctx.store.listDeviceIdsForTargets(operatorIds, { type: body.target_type, ids });
    const start = ctx.now();
    const end = start + body.params.duration * 1000;
    const control_id = newId('ctl');
    // The window travels in absolute time so a late delivery cannot stretch the control.
    const params = {
      ...body.params,
      control_id,
      starts_at: new Date(start).toISOString(),
      ends_at: new Date(end).toISOString(),
    };
    await ctx.store.createControl(
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
    return ok({ control_id, status: 'executing' as const, device_count: deviceIds.length });
  });
}
