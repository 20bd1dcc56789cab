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
      description:
        'A page of the sites of the operators this client acts for, each with its `operator_id`, `name`, ' +
        '`timezone` and `device_count`.',
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
      description:
        'The site with its `operator_id`, `name`, `timezone` and `device_count`. A site of another tenant ' +
        'answers 404 (3001), exactly as one that does not exist.',
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
      description:
        'A page of the chargers in the sites of the client’s operators, ordered by `device_id`, each as ' +
        'GET /v1/operator/devices/{device_id} shows it. The filters combine: `site_id`, `status` (`online` or ' +
        '`offline`), and `firmware_version` and `agent_version` (1–64 characters, matched exactly). A `site_id` of ' +
        'another tenant answers 404 (3001), like a missing one.',
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
      description:
        'The charger with its `firmware_version`, `agent_version`, `site_id`, `last_heartbeat` and `status` ' +
        '(`online` while it made an authenticated request in the last 90 s), and each connector’s live state from ' +
        'its telemetry (`power` in kW, negative while discharging; `energy_delivered` of the session, 0 without ' +
        'one). A connector reads `unavailable` while the charger is offline, before its first telemetry, and while ' +
        'out of service (`available: false`) with no session on it. Another tenant’s charger answers 404 (3001), ' +
        'like an unknown one.',
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
      description:
        'A page of the events the charger uploaded (`event_id`, `kind`, `severity`, `timestamp`, and ' +
        '`connector_id`, `message` and `data` when it sent them), each with its `received_at`. Another tenant’s ' +
        'or an unknown charger answers 404 (3001).',
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
      description:
        'A page of the charger’s firmware status reports, newest first by the charger’s `timestamp`, then by ' +
        'arrival; each has only the fields the charger sent (`version`, `progress`, `message`, `update_id`, ' +
        '`report_id`), and `received_at`. Another tenant’s or an unknown charger answers 404 (3001).',
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
      description:
        'The charging records of the client’s operators’ chargers, optionally of one `device_id` and ' +
        '`connector_id`. A record matches the time filters when its session overlaps [`start_time`, `end_time`). ' +
        '`page` defaults to 1 and `size` (1–100) to 20; unknown and repeated query parameters answer 400 (1001).',
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
