import {
  ChargingRecordsPage,
  ChargingRecordsQuery,
  Device,
  DeviceParams,
  DevicesPage,
  DevicesQuery,
  EnergyQuery,
  EnergySeries,
  EventsQuery,
  FirmwareReportsQuery,
  pageOf,
  SiteParamsPath,
  SitesPage,
  SitesQuery,
  SiteView,
  StoredEvent,
  StoredFirmwareReport,
  TelemetryHistoryPage,
  TelemetryHistoryQuery,
} from '../../../shared/index.js';
import type { PlatformContext } from '../context.js';
import { type AnyRoute, route } from '../route-spec.js';
import { principal, read } from './operator-access.js';

/** What an operator reads: sites, chargers, their events, charging records and energy. */
export function operatorReadRoutes(ctx: PlatformContext): AnyRoute[] {
  const reads = ctx.reads;

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
      handler: async ({ query, request }) => reads.sites(principal(request), query.page, query.size),
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
      handler: async ({ params, request }) => reads.site(principal(request), params.site_id),
    }),
    route({
      method: 'GET',
      url: '/v1/operator/devices',
      summary: 'List chargers, optionally by site, status, firmware or agent version',
      tag: 'operator',
      auth: read,
      rate: 'operatorQuery',
      query: DevicesQuery,
      response: DevicesPage,
      errors: [404],
      handler: async ({ query, request }) => reads.devices(principal(request), query),
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
      handler: async ({ params, request }) => reads.device(principal(request), params.device_id),
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
      handler: async ({ params, query, request }) =>
        reads.events(principal(request), params.device_id, query.page, query.size),
    }),
    route({
      method: 'GET',
      url: '/v1/operator/devices/:device_id/telemetry',
      summary: 'Telemetry the charger reported, raw or averaged, oldest first',
      description:
        'The samples of a time range (default: the hour before now), of one connector or all: `raw` as the ' +
        'charger sent them (2,000 at most per page), `1m` or `15m` as the mean of each measurement in the ' +
        'bucket and its last state (the range widened to whole buckets). Pages follow `next_cursor` until it is ' +
        'null; a page may hold fewer items than `limit` and still have a next one.',
      tag: 'operator',
      auth: read,
      rate: 'operatorQuery',
      params: DeviceParams,
      query: TelemetryHistoryQuery,
      response: TelemetryHistoryPage,
      errors: [404],
      handler: async ({ params, query, request }) =>
        reads.telemetry(principal(request), params.device_id, query),
    }),
    route({
      method: 'GET',
      url: '/v1/operator/devices/:device_id/firmware',
      summary: 'Firmware status reports of the charger, newest first',
      tag: 'operator',
      auth: read,
      rate: 'operatorQuery',
      params: DeviceParams,
      query: FirmwareReportsQuery,
      response: pageOf(StoredFirmwareReport),
      errors: [404],
      handler: async ({ params, query, request }) =>
        reads.firmwareReports(principal(request), params.device_id, query.page, query.size),
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
      handler: async ({ query, request }) => reads.chargingRecords(principal(request), query),
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
      handler: async ({ query, request }) => reads.energy(principal(request), query),
    }),
  ];
}
