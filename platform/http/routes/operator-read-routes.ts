import type * as z from 'zod';
import {
  ChargingRecordsPage,
  ChargingRecordsQuery,
  Device,
  DeviceParams,
  DevicesPage,
  DevicesQuery,
  ENERGY_INTERVAL_MS,
  EnergyQuery,
  EnergySeries,
  EventsQuery,
  ONLINE_WINDOW_SECONDS,
  pageOf,
  SiteParamsPath,
  SitesPage,
  SitesQuery,
  SiteView,
  StoredEvent,
} from '../../../shared/index.js';
import { rollupAlignedRange } from '../../domain/energy-rollup.js';
import { energySeriesItems } from '../../domain/energy-series.js';
import { connectorViewsByDevice, deviceView } from '../../services/device-view.js';
import type { PlatformContext } from '../context.js';
import { type AnyRoute, route } from '../route-spec.js';
import { operatorAccess, principal, read } from './operator-access.js';

const iso = (ms: number) => new Date(ms).toISOString();

/** What an operator reads: sites, chargers, their events, charging records and energy. */
export function operatorReadRoutes(ctx: PlatformContext): AnyRoute[] {
  const { visibleDevice, visibleSite } = operatorAccess(ctx);
  const onlineSince = () => ctx.now() - ONLINE_WINDOW_SECONDS * 1000;

  return [
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
        const deviceIds = query.device_id
          ? [(await visibleDevice(request, query.device_id)).device_id]
          : await ctx.store.deviceIdsInSite((await visibleSite(request, query.site_id!)).site_id);
        // Energy is kept in 15-minute buckets: the series covers the request's range widened to them.
        const { startMs, endMs } = rollupAlignedRange(
          Date.parse(query.start_time),
          Date.parse(query.end_time),
        );
        const intervalMs = ENERGY_INTERVAL_MS[query.interval];
        const buckets = await ctx.store.energyBuckets(deviceIds, startMs, endMs, intervalMs);
        return {
          ...(query.device_id ? { device_id: query.device_id } : { site_id: query.site_id }),
          interval: query.interval,
          start_time: iso(startMs),
          end_time: iso(endMs),
          items: energySeriesItems(buckets, { startMs, endMs, intervalMs }),
        };
      },
    }),
  ];
}
