import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { AuthMatrix, type Tenant } from '../helpers/auth-matrix.js';
import { expectRefusal, type Ids, key, queryOf } from '../helpers/auth-matrix-requests.js';
import type { HttpResult, TestPlatform } from '../helpers/platform.js';

/**
 * Tenancy over the route table (DESIGN.md §2, §4, §18): another tenant's resources — made by its own clients or by
 * an aggregator's — answer byte for byte like missing ones on every endpoint that names them, as flexibility
 * targets and as stream subscriptions, and are left untouched. Part of the authentication matrix of
 * auth-matrix.test.ts, whose check that nothing secret is logged this file runs on its own logs (afterAll).
 */

// biome-ignore lint/suspicious/noExplicitAny: response bodies are inspected field by field
type Json = any;

const matrix = new AuthMatrix();
const { newClient, newDevice, call, authed, operatorRoutes } = matrix;
let tp: TestPlatform;
let alpha: Tenant;
let bravo: Tenant;
let own: Ids;
let foreign: Ids;
let aggregated: Ids;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

beforeAll(async () => {
  ({ tp, alpha, bravo, own, foreign, aggregated } = await matrix.start());
});
afterAll(async () => {
  // The check of auth-matrix.test.ts's last test, over what this file sent.
  if (tp) matrix.expectNoSecretLogged();
  await tp?.stop();
});

describe('another tenant’s resources answer exactly as missing ones', () => {
  /** Same shape as the real id, but nobody's. */
  const missing = (id: string) => id.replace(/(?<=_)[0-9a-f]+$/i, (hex) => '0'.repeat(hex.length));
  const ID_PARAMS = [
    'device_id',
    'site_id',
    'command_id',
    'control_id',
    'webhook_id',
    'delivery_id',
    'artifact_id',
    'update_id',
    'diagnostics_id',
  ] as const;

  /** The body of an answer with the id replaced, so two answers compare on everything else. */
  const normalised = (res: HttpResult, id: string) => ({
    status: res.status,
    body: res.text.split(id).join('<id>'),
  });

  it('for every endpoint that takes a device_id, site_id, command_id or control_id (path or query)', async () => {
    const a = await newClient(alpha, ['read', 'write']);
    const d = await newDevice(alpha, 'FVM');
    let compared = 0;
    const labels: string[] = [];
    for (const route of authed()) {
      const token = route.auth.kind === 'device' ? d.token : a.token;
      const named = ID_PARAMS.filter(
        (p) => route.url.includes(`:${p}`) || queryOf(route, own).includes(`${p}=`),
      );
      for (const param of named) {
        const idKey = route.auth.kind === 'device' && param === 'command_id' ? 'device_command_id' : param;
        const foreignIds: Ids = { ...own, [idKey]: foreign[idKey] };
        const missingIds: Ids = { ...own, [idKey]: missing(foreign[idKey]) };
        expect(missingIds[idKey]).not.toBe(foreignIds[idKey]);
        const f = await call(route, `Bearer ${token}`, foreignIds);
        const m = await call(route, `Bearer ${token}`, missingIds);
        const label = `${key(route)} ${param}`;
        expect([401, 403, 429, 500], `${label}: ${f.text}`).not.toContain(f.status);
        expect({ label, ...normalised(f, foreignIds[idKey]) }).toEqual({
          label,
          ...normalised(m, missingIds[idKey]),
        });
        if (f.status !== 200) expect(f.body.code, label).toBe(3001);
        labels.push(label);
        compared++;
      }
    }
    // devices/:device_id ×8 (firmware history included), sites/:site_id, devices?site_id, energy, records,
    // commands ×2, control ×2, status.
    expect(compared).toBeGreaterThanOrEqual(17);
    // Remote maintenance (DESIGN.md §20): each endpoint with a valid body, so that only the device differs.
    expect(labels).toEqual(
      expect.arrayContaining([
        'POST /v1/operator/devices/:device_id/reset device_id',
        'PUT /v1/operator/devices/:device_id/connectors/:connector_id/availability device_id',
        'POST /v1/operator/devices/:device_id/connectors/:connector_id/unlock device_id',
        'GET /v1/operator/devices/:device_id/configuration device_id',
        'PATCH /v1/operator/devices/:device_id/configuration device_id',
      ]),
    );
    // Diagnostics (DESIGN.md §20): the device's requests and another tenant's request, on both surfaces.
    expect(labels).toEqual(
      expect.arrayContaining([
        'POST /v1/operator/devices/:device_id/diagnostics device_id',
        'GET /v1/operator/devices/:device_id/diagnostics device_id',
        'GET /v1/operator/diagnostics/:diagnostics_id diagnostics_id',
        'GET /v1/operator/diagnostics/:diagnostics_id/content diagnostics_id',
        'GET /v1/device/diagnostics/:diagnostics_id diagnostics_id',
        'PUT /v1/device/diagnostics/:diagnostics_id diagnostics_id',
      ]),
    );
    // Telemetry history (DESIGN.md §21).
    expect(labels).toContain('GET /v1/operator/devices/:device_id/telemetry device_id');
  });

  it('and so do the resources an aggregator made for the other tenant (commands, controls, schedules)', async () => {
    const a = await newClient(alpha, ['read', 'write']);
    let compared = 0;
    for (const route of operatorRoutes()) {
      const named = ID_PARAMS.filter(
        (p) => route.url.includes(`:${p}`) || queryOf(route, own).includes(`${p}=`),
      );
      for (const param of named) {
        // Webhooks and deliveries belong to the client that made them: the aggregator's are not Alpha's either.
        const foreignIds: Ids = { ...own, [param]: aggregated[param] };
        const missingIds: Ids = { ...own, [param]: missing(aggregated[param]) };
        const f = await call(route, `Bearer ${a.token}`, foreignIds);
        const m = await call(route, `Bearer ${a.token}`, missingIds);
        const label = `${key(route)} ${param} (aggregator's)`;
        expect({ label, ...normalised(f, aggregated[param]) }).toEqual({
          label,
          ...normalised(m, missingIds[param]),
        });
        if (f.status !== 200) expect(f.body.code, label).toBe(3001);
        compared++;
      }
    }
    expect(compared).toBeGreaterThanOrEqual(14);
  });

  it('flexibility targets of another tenant (site or operator ids) answer as missing ones', async () => {
    const a = await newClient(alpha, ['write']);
    for (const [type, id] of [
      ['site', foreign.site_id],
      ['operator', foreign.operator_id],
    ] as const) {
      const body = (target: string) => ({
        target_type: type,
        target_ids: [target],
        command: 'pause_charging',
        params: { duration: 60 },
      });
      const f = await tp.http.post('/v1/operator/control/flexibility', { token: a.token, json: body(id) });
      const m = await tp.http.post('/v1/operator/control/flexibility', {
        token: a.token,
        json: body(missing(id)),
      });
      expectRefusal(f, 404, 3001, `flexibility ${type}`);
      expect(normalised(f, id)).toEqual(normalised(m, missing(id)));
    }
  });

  it('stream subscriptions to another tenant’s devices or sites answer as missing ones', async () => {
    const deadline = Date.now() + 3_000;
    while (tp.platform.context.directory.device(foreign.device_id)?.site_id !== foreign.site_id) {
      expect(Date.now()).toBeLessThan(deadline);
      await sleep(50);
    }
    const ws = new WebSocket(`wss://127.0.0.1:${tp.port}/v1/operator/stream`, {
      ca: tp.ca,
      headers: { authorization: `Bearer ${alpha.token}` },
    });
    const inbox: string[] = [];
    const waiters: Array<(m: string) => void> = [];
    ws.on('message', (raw) => {
      const w = waiters.shift();
      if (w) w(raw.toString());
      else inbox.push(raw.toString());
    });
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    const ask = (message: unknown) => {
      ws.send(JSON.stringify(message));
      const queued = inbox.shift();
      return queued !== undefined ? Promise.resolve(queued) : new Promise<string>((r) => waiters.push(r));
    };
    for (const field of ['device_ids', 'site_ids'] as const) {
      const id = field === 'device_ids' ? foreign.device_id : foreign.site_id;
      const f = await ask({ type: 'subscribe', [field]: [id] });
      const m = await ask({ type: 'subscribe', [field]: [missing(id)] });
      expect(JSON.parse(f)).toMatchObject({ type: 'error', code: 3001 });
      expect(f.split(id).join('<id>')).toBe(m.split(missing(id)).join('<id>'));
    }
    ws.close();
  });

  it('and the other tenant’s resources were not touched', async () => {
    const b = await newClient(bravo, ['read']);
    for (const artifactId of [foreign.artifact_id, aggregated.artifact_id]) {
      const artifact = await tp.http.get(`/v1/operator/artifacts/${artifactId}`, { token: b.token });
      expect(artifact.status, artifact.text).toBe(200);
    }
    for (const updateId of [foreign.update_id, aggregated.update_id]) {
      const update = await tp.http.get(`/v1/operator/updates/${updateId}`, { token: b.token });
      expect(update.body.data.status, update.text).toBe('running');
    }
    const cmd = await tp.http.get(`/v1/operator/commands/${foreign.command_id}`, { token: b.token });
    expect(cmd.body.data.status).toBe('queued');
    for (const controlId of [foreign.control_id, aggregated.control_id]) {
      const ctl = await tp.http.get(`/v1/operator/control/${controlId}`, { token: b.token });
      expect(ctl.body.data.status).toBe('executing');
    }
    const aggregatedCmd = await tp.http.get(`/v1/operator/commands/${aggregated.command_id}`, {
      token: b.token,
    });
    expect(aggregatedCmd.body.data.status).toBe('queued');
    const schedules = await tp.http.get(`/v1/operator/devices/${foreign.device_id}/connectors/1/schedules`, {
      token: b.token,
    });
    expect(schedules.body.data.items.map((s: Json) => s.schedule_id)).toEqual(['sch-auth']);
    const status = await tp.http.get(`/v1/operator/commands/${foreign.device_command_id}`, {
      token: b.token,
    });
    expect(status.body.data.status).toBe('queued');
    // No maintenance command reached the other tenant's charger.
    const listed = await tp.http.get(`/v1/operator/devices/${foreign.device_id}/commands?size=100`, {
      token: b.token,
    });
    const kinds = listed.body.data.items.map((c: Json) => c.command);
    expect(kinds.length).toBeGreaterThan(0);
    for (const kind of ['reset', 'set_availability', 'unlock_connector', 'set_configuration'])
      expect(kinds).not.toContain(kind);
    // Nothing was uploaded to the other tenant's diagnostics.
    for (const diagnosticsId of [foreign.diagnostics_id, aggregated.diagnostics_id]) {
      const diagnostics = await tp.http.get(`/v1/operator/diagnostics/${diagnosticsId}`, { token: b.token });
      expect(diagnostics.body.data, diagnostics.text).toMatchObject({ status: 'requested', size: 0 });
    }
  });
});
