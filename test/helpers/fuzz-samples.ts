import * as z from 'zod';
import type { AnyRoute } from '../../platform/http/route-spec.js';
import { fuzzTarget } from './fuzz-platform.js';

/**
 * What a valid request to each endpoint looks like: the base the fuzz generators break (fuzz-body-garbage,
 * fuzz-garbage), with the ids of the fuzzed platform's tenant and charger. fuzz-http.test.ts checks every sample
 * against its route's schema, so a stale sample fails loudly.
 */

export const iso = (ms: number) => new Date(ms).toISOString();

function validParam(name: string, schema: z.core.$ZodType): string {
  const { device, tenant } = fuzzTarget();
  const preferred: Record<string, string> = {
    device_id: device.deviceId,
    site_id: tenant.siteId,
    connector_id: '1',
    command_id: 'cmd_fuzz_missing',
    control_id: 'ctl_fuzz_missing',
    schedule_id: 'sch_fuzz_missing',
    webhook_id: 'wh_fuzz_missing',
    delivery_id: 'msg_fuzz_missing',
  };
  for (const candidate of [preferred[name], 'fuzz_missing_1', '1']) {
    if (candidate !== undefined && z.safeParse(schema, candidate).success) return candidate;
  }
  throw new Error(`no valid value known for path parameter ${name}`);
}

export function shapeOf(schema: z.core.$ZodType | undefined): Record<string, z.core.$ZodType> {
  return schema instanceof z.core.$ZodObject
    ? (schema._zod.def.shape as Record<string, z.core.$ZodType>)
    : {};
}

export function paramNames(route: AnyRoute): string[] {
  return [...route.url.matchAll(/:([A-Za-z_]+)/g)].map((m) => m[1]!);
}

export function validParams(route: AnyRoute): Record<string, string> {
  const shape = shapeOf(route.params);
  return Object.fromEntries(
    paramNames(route).map((name) => [name, validParam(name, shape[name] ?? z.string())]),
  );
}

export function pathWith(route: AnyRoute, params: Record<string, string>, query = ''): string {
  return route.url.replace(/:([A-Za-z_]+)/g, (_m, name: string) => params[name]!) + query;
}

/** A valid body per endpoint; checked against the route's schema below, so a stale sample fails loudly. */
export function sampleBody(route: AnyRoute): unknown {
  const { tenant } = fuzzTarget();
  const t = Date.now();
  const telemetry = {
    timestamp: iso(t),
    connector_id: 1,
    state: 'charging',
    voltage: 230,
    current: 16,
    power: 11,
    energy_delivered: 2.5,
    soc: 55,
    temperature: 30,
    phase_details: { l1: { voltage: 230, current: 16, power: 3.7 } },
  };
  const samples: Record<string, unknown> = {
    'POST /v1/operator/oauth/token': {
      client_id: 'cl_fuzz_unknown',
      client_secret: 'not-the-secret',
      grant_type: 'client_credentials',
      scope: 'read',
    },
    'POST /v1/operator/devices/:device_id/connectors/:connector_id/stop': { reason: 'fuzz' },
    'POST /v1/operator/devices/:device_id/connectors/:connector_id/start': {
      target_soc: 80,
      power_limit: 11,
    },
    'POST /v1/operator/devices/:device_id/connectors/:connector_id/discharge': {
      discharge_power: 7,
      duration: 600,
      min_soc: 30,
    },
    'POST /v1/operator/devices/:device_id/connectors/:connector_id/schedule': {
      schedule_id: 'fuzz-1',
      enabled: true,
      type: 'weekly',
      time_slots: [
        { day_of_week: ['mon', 'fri'], start: '22:00', end: '06:00', power_limit: 11, action: 'charge' },
      ],
      target_soc: 80,
      effective_from: iso(t),
      effective_until: iso(t + 86_400_000),
      timezone: 'Europe/Berlin',
    },
    'POST /v1/operator/control/flexibility': {
      target_type: 'site',
      target_ids: [tenant.siteId],
      command: 'set_power_limit',
      params: { power_limit_percent: 50, duration: 600, reason: 'fuzz' },
    },
    // An artifact nobody has: every mutation of it is refused before anything is rolled out.
    'POST /v1/operator/updates': {
      artifact_id: 'art_fuzz_missing',
      target_type: 'site',
      target_ids: [tenant.siteId],
      install: 'when_idle',
      window: { start: '22:00', end: '06:00' },
      rollout: { batch_size: 5, max_failure_percent: 20, health_seconds: 600, max_site_percent: 50 },
    },
    'POST /v1/device/register': {
      sn: 'SN-FUZZ-NEVER',
      model: 'Fuzz AC',
      manufacturer: 'Acme',
      firmware_version: '1.0.0',
      agent_version: '0.1.0',
      mac: '00:1A:2B:3C:4D:5E',
      connectors: [{ connector_id: 1, max_power_kw: 22, v2g_capable: false }],
    },
    'POST /v1/device/token': {
      device_id: 'dev_fuzz_unknown',
      device_secret: 'not-the-secret',
      grant_type: 'client_credentials',
    },
    'POST /v1/device/heartbeat': { timestamp: iso(t), status: 'online', fault_code: 0 },
    'POST /v1/device/commands/:command_id/status': { status: 'succeeded', reason: 'done', timestamp: iso(t) },
    'POST /v1/device/telemetry': telemetry,
    'POST /v1/device/telemetry/batch': { records: [telemetry, { ...telemetry, connector_id: 2 }] },
    'POST /v1/device/events': {
      events: [
        {
          event_id: 'ev-fuzz-1',
          kind: 'boot',
          severity: 'info',
          timestamp: iso(t),
          connector_id: 1,
          message: 'booted',
          data: { reason: 'power_on', count: 1, ok: true, none: null },
        },
      ],
    },
    'POST /v1/device/charging-records': {
      records: [
        {
          record_id: 'rec-fuzz-1',
          connector_id: 1,
          start_time: iso(t - 3_600_000),
          end_time: iso(t),
          energy: 5,
          max_power: 11,
          avg_power: 7,
          cost: 2,
          meter_start: 100,
          meter_end: 105,
          vehicle_info: { vin: 'WVW123', soc_start: 20, soc_end: 80 },
        },
      ],
    },
    'POST /v1/device/firmware/status': {
      status: 'downloading',
      version: '1.1.0',
      progress: 10,
      message: 'fetching',
      timestamp: iso(t),
      update_id: 'upd_fuzz',
      report_id: 'rep-fuzz-1',
    },
    'POST /v1/operator/webhooks': { url: 'https://hooks.example.com/charger', events: ['device.online'] },
    'PATCH /v1/operator/webhooks/:webhook_id': { description: 'fuzz', status: 'enabled' },
    'POST /v1/operator/devices/:device_id/reset': { mode: 'when_idle', target: 'agent' },
    'PUT /v1/operator/devices/:device_id/connectors/:connector_id/availability': { available: true },
    'PATCH /v1/operator/devices/:device_id/configuration': {
      values: { telemetry_interval_seconds: 5, log_level: 'info' },
    },
  };
  return samples[`${route.method} ${route.url}`] ?? (route.bodyOptional || !route.body ? {} : undefined);
}

export function sampleQuery(route: AnyRoute): Record<string, string> {
  const { device, tenant } = fuzzTarget();
  const t = Date.now();
  const samples: Record<string, Record<string, string>> = {
    'GET /v1/operator/energy': {
      device_id: device.deviceId,
      start_time: iso(t - 86_400_000),
      end_time: iso(t),
      interval: '1h',
    },
    'GET /v1/operator/charging-records': {
      device_id: device.deviceId,
      connector_id: '1',
      page: '1',
      size: '10',
    },
    'GET /v1/operator/devices': {
      site_id: tenant.siteId,
      status: 'online',
      firmware_version: '1.0.0',
      agent_version: '0.1.0',
      page: '1',
      size: '5',
    },
    'GET /v1/operator/devices/:device_id/firmware': { page: '1', size: '5' },
    'GET /v1/device/commands': { wait: '0' },
    'POST /v1/operator/artifacts': { kind: 'agent', version: 'fuzz-1' },
  };
  return samples[`${route.method} ${route.url}`] ?? {};
}
