import type { FastifyInstance } from 'fastify';
import { ChargingRecordsQuery, DeviceParams, ok } from '../../shared/index.js';
import { errors } from '../api-error.js';
import { requireOperator } from '../auth/authenticate.js';
import type { PlatformContext } from '../context.js';
import { deviceView } from '../device-view.js';
import { parse } from '../parse.js';

export function operatorQueryRoutes(app: FastifyInstance, ctx: PlatformContext): void {
  const read = requireOperator(ctx, 'read');

  app.get('/v1/operator/devices/:device_id', { preHandler: read }, async (request) => {
    const { device_id } = parse(DeviceParams, request.params);
    const device = await ctx.store.getDeviceForOperators(device_id, request.operator!.operatorIds);
    // Another tenant's device answers exactly like a missing one (DESIGN.md §2).
    if (!device) throw errors.notFound('Device');
    const connectors = await ctx.store.listConnectors(device_id);
    return ok(deviceView(device, connectors, ctx.liveness.isOnline(device)));
  });

  app.get('/v1/operator/charging-records', { preHandler: read }, async (request) => {
    const query = parse(ChargingRecordsQuery, request.query);
    return ok(await ctx.store.listChargingRecords(request.operator!.operatorIds, query));
  });
}
