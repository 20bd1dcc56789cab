import { gzipSync } from 'node:zlib';
import { expect } from 'vitest';
import type { AnyRoute } from '../../platform/http/route-spec.js';
import type { HttpResult } from './platform.js';

/**
 * A valid request to every endpoint of the route table, so that the only thing wrong in a cell of the
 * authentication matrix (auth-matrix, auth-tenancy, auth-tokens) is the credential; and the exact refusal
 * each cell expects.
 */

/** Alpha's and Bravo's resources of every kind an endpoint can name. */
export interface Ids {
  device_id: string;
  site_id: string;
  operator_id: string;
  command_id: string;
  control_id: string;
  schedule_id: string;
  /** A command of the device (for the charger's status report). */
  device_command_id: string;
  webhook_id: string;
  delivery_id: string;
  artifact_id: string;
  update_id: string;
  /** A diagnostics request for the device (DESIGN.md §20). */
  diagnostics_id: string;
}

export const iso = (ms: number) => new Date(ms).toISOString();

export const key = (r: AnyRoute) => `${r.method} ${r.url}`;

export function pathOf(route: AnyRoute, ids: Ids): string {
  const values: Record<string, string> = {
    device_id: ids.device_id,
    site_id: ids.site_id,
    connector_id: '1',
    command_id: route.auth.kind === 'device' ? ids.device_command_id : ids.command_id,
    control_id: ids.control_id,
    schedule_id: ids.schedule_id,
    webhook_id: ids.webhook_id,
    delivery_id: ids.delivery_id,
    artifact_id: ids.artifact_id,
    update_id: ids.update_id,
    diagnostics_id: ids.diagnostics_id,
  };
  return route.url.replace(/:([A-Za-z_]+)/g, (_m, name: string) => {
    const v = values[name];
    if (v === undefined) throw new Error(`${key(route)}: no value for :${name}`);
    return v;
  });
}

let uploads = 0;

export function queryOf(route: AnyRoute, ids: Ids): string {
  const t = Date.now();
  const queries: Record<string, Record<string, string>> = {
    'GET /v1/operator/energy': {
      device_id: ids.device_id,
      start_time: iso(t - 86_400_000),
      end_time: iso(t),
      interval: '1h',
    },
    'GET /v1/operator/charging-records': { device_id: ids.device_id },
    'GET /v1/operator/devices': { site_id: ids.site_id },
    // A new version each time: a version uploaded before answers 409.
    'POST /v1/operator/artifacts': {
      kind: 'agent',
      version: `matrix-${t}-${++uploads}`,
      operator_id: ids.operator_id,
    },
  };
  const q = queries[key(route)];
  return q ? `?${new URLSearchParams(q)}` : '';
}

export function bodyOf(route: AnyRoute, ids: Ids): unknown {
  const t = Date.now();
  const bodies: Record<string, unknown> = {
    'POST /v1/operator/devices/:device_id/connectors/:connector_id/stop': { reason: 'matrix' },
    'POST /v1/operator/devices/:device_id/connectors/:connector_id/start': { target_soc: 80 },
    'POST /v1/operator/devices/:device_id/connectors/:connector_id/discharge': {
      discharge_power: 7,
      duration: 600,
    },
    'POST /v1/operator/devices/:device_id/connectors/:connector_id/schedule': {
      schedule_id: 'sch-matrix',
      type: 'daily',
      time_slots: [{ start: '01:00', end: '02:00' }],
      timezone: 'UTC',
    },
    'PUT /v1/operator/devices/:device_id/connectors/:connector_id/availability': { available: false },
    'PATCH /v1/operator/devices/:device_id/configuration': { values: { log_level: 'info' } },
    'POST /v1/operator/control/flexibility': {
      target_type: 'site',
      target_ids: [ids.site_id],
      command: 'set_power_limit',
      params: { power_limit_percent: 50, duration: 60 },
    },
    'POST /v1/operator/webhooks': { url: 'https://hooks.example.com/matrix', events: ['device.online'] },
    // The device is in an update already: a valid request, answered 409.
    'POST /v1/operator/updates': {
      artifact_id: ids.artifact_id,
      target_type: 'device',
      target_ids: [ids.device_id],
    },
    'PATCH /v1/operator/webhooks/:webhook_id': { description: 'matrix' },
    'POST /v1/device/heartbeat': { timestamp: iso(t), status: 'online', fault_code: 0 },
    'POST /v1/device/commands/:command_id/status': { status: 'accepted' },
    'POST /v1/device/telemetry': { timestamp: iso(t), connector_id: 1, state: 'idle' },
    'POST /v1/device/telemetry/batch': { records: [{ timestamp: iso(t), connector_id: 1, state: 'idle' }] },
    'POST /v1/device/events': { events: [{ event_id: `ev-${t}`, kind: 'boot', timestamp: iso(t) }] },
    'POST /v1/device/charging-records': {
      records: [
        { record_id: `rec-${t}`, connector_id: 1, start_time: iso(t - 60_000), end_time: iso(t), energy: 1 },
      ],
    },
    'POST /v1/device/firmware/status': { status: 'idle', timestamp: iso(t) },
  };
  if (key(route) in bodies) return bodies[key(route)];
  return route.method === 'POST' && route.body && !route.bodyOptional ? 'missing' : undefined;
}

/** A file sent as the body, for the routes that take one instead of JSON. */
export interface RawRequest {
  body: Buffer;
  contentType: string;
  headers: Record<string, string>;
}

/**
 * The valid file body of a route that takes one (an agent bundle with its signature, a diagnostics archive,
 * whole); undefined for JSON routes.
 */
export function rawRequestOf(route: AnyRoute): RawRequest | undefined {
  if (key(route) === 'POST /v1/operator/artifacts') {
    return {
      body: Buffer.from('an agent bundle'),
      contentType: 'application/octet-stream',
      headers: { 'x-artifact-signature': `${'A'.repeat(86)}==` },
    };
  }
  if (key(route) !== 'PUT /v1/device/diagnostics/:diagnostics_id') return undefined;
  const archive = gzipSync(Buffer.from('a diagnostics archive'));
  return {
    body: archive,
    contentType: 'application/octet-stream',
    headers: { 'content-range': `bytes 0-${archive.length - 1}/${archive.length}` },
  };
}

/** Exactly the documented refusal: status, code, a message, nothing else in the body. */
/** `oauth`: the operator token endpoint's refusals also carry RFC 6749's `error` (DESIGN.md §15). */
export function expectRefusal(
  res: HttpResult,
  status: number,
  code: number,
  label: string,
  oauth?: string,
): void {
  expect({ label, status: res.status, code: res.body?.code }, res.text).toEqual({ label, status, code });
  expect(typeof res.body.message, label).toBe('string');
  const keys = oauth
    ? ['code', 'message', 'details', 'error', 'error_description']
    : ['code', 'message', 'details'];
  for (const k of Object.keys(res.body)) expect(keys, label).toContain(k);
  if (oauth) expect(res.body.error, label).toBe(oauth);
  expect(res.headers['x-api-version'], label).toBe('1.3.0');
}

export const scopeOf = (r: AnyRoute) => (r.auth.kind === 'operator' ? r.auth.scope : undefined);
