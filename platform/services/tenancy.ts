import { errors } from '../domain/api-error.js';
import type { ConnectorRow, DeviceRow, SiteRow, Store } from '../storage/store.js';

/** Whose chargers and sites a caller may reach: the operators its client acts for. */
export interface TenantActor {
  operatorIds: readonly string[];
}

/**
 * Tenancy (DESIGN.md §2): what an actor's operators may see. Another tenant's device, connector or site answers
 * exactly like a missing one (404), so nobody learns what exists beyond their operators.
 */
export function createTenancy(store: Pick<Store, 'getDeviceForOperators' | 'getConnector' | 'getSite'>) {
  /** The site, if one of the actor's operators holds it. */
  async function findSite(actor: TenantActor, siteId: string): Promise<SiteRow | undefined> {
    const site = await store.getSite(siteId);
    return site && actor.operatorIds.includes(site.operator_id) ? site : undefined;
  }
  async function device(actor: TenantActor, deviceId: string): Promise<DeviceRow> {
    const found = await store.getDeviceForOperators(deviceId, actor.operatorIds);
    if (!found) throw errors.notFound('Device');
    return found;
  }
  return {
    findSite,
    device,
    async connector(
      actor: TenantActor,
      p: { device_id: string; connector_id: number },
    ): Promise<ConnectorRow> {
      await device(actor, p.device_id);
      const connector = await store.getConnector(p.device_id, p.connector_id);
      if (!connector) throw errors.notFound('Connector');
      return connector;
    },
    async site(actor: TenantActor, siteId: string): Promise<SiteRow> {
      const site = await findSite(actor, siteId);
      if (!site) throw errors.notFound('Site');
      return site;
    },
  };
}
export type Tenancy = ReturnType<typeof createTenancy>;
