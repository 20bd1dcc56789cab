import type { FastifyRequest } from 'fastify';
import { errors } from '../../domain/api-error.js';
import type { OperatorPrincipal } from '../../services/principal.js';
import type { ConnectorRow, DeviceRow, SiteRow } from '../../storage/store.js';
import type { PlatformContext } from '../context.js';

/** The scopes operator routes ask for. */
export const read = { kind: 'operator', scope: 'read' } as const;
export const write = { kind: 'operator', scope: 'write' } as const;

/** The caller of an operator route: authentication has run before any handler. */
export const principal = (request: FastifyRequest): OperatorPrincipal => request.operator!;

/**
 * Tenancy: what the caller's operators may see. Another tenant's device, connector or site answers exactly
 * like a missing one (DESIGN.md §2).
 */
export function operatorAccess(ctx: PlatformContext) {
  async function visibleDevice(request: FastifyRequest, deviceId: string): Promise<DeviceRow> {
    const device = await ctx.store.getDeviceForOperators(deviceId, principal(request).operatorIds);
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
  async function visibleSite(request: FastifyRequest, siteId: string): Promise<SiteRow> {
    const site = await ctx.store.getSite(siteId);
    if (!site || !principal(request).operatorIds.includes(site.operator_id)) throw errors.notFound('Site');
    return site;
  }
  return { visibleDevice, visibleConnector, visibleSite };
}
