import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_CONFIGURATION, WEBHOOK_EVENT_TYPES, webhookEventBody } from '../../shared/index.js';
import {
  createTenant,
  expectError,
  type RegisteredDevice,
  registerDevice,
  startTestPlatform,
  type TestPlatform,
} from '../helpers/platform.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';

/**
 * Webhooks (DESIGN.md §14) against a real HTTPS receiver that checks every signature with `standardwebhooks`:
 * endpoint management, every event type once per trigger, and tenancy.
 */
let tp: TestPlatform;
let receiver: WebhookReceiver;
let tenant: Awaited<ReturnType<typeof createTenant>>;
let other: Awaited<ReturnType<typeof createTenant>>;

beforeAll(async () => {
  receiver = await startWebhookReceiver();
  tp = await startTestPlatform({ webhooks: { allowPrivate: true, ca: receiver.ca } });
  tenant = await createTenant(tp, 'Webhook Operator');
  other = await createTenant(tp, 'Other Operator');
});
afterAll(async () => {
  await tp.stop();
  await receiver.close();
});

async function createEndpoint(token: string, events: string[] = ['*'], url = receiver.url) {
  const res = await tp.http.post('/v1/operator/webhooks', { token, json: { url, events } });
  expect(res.status, res.text).toBe(200);
  receiver.trust(res.body.data.secret);
  return res.body.data as { webhook_id: string; secret: string };
}

/** Everything the platform emitted is queued and sent. */
async function settle() {
  await tp.platform.webhooks.deliverDue();
}

/** Until the principal directory knows the device's operator (it reloads within a second of a change). */
async function untilKnown(deviceId: string) {
  for (let i = 0; i < 100 && !tp.platform.context.directory.device(deviceId)?.operator_id; i++)
    await new Promise((r) => setTimeout(r, 30));
}

async function device(sn: string, siteId: string): Promise<RegisteredDevice> {
  const d = await registerDevice(tp, sn, siteId);
  await untilKnown(d.deviceId);
  return d;
}

function telemetry(d: RegisteredDevice, state: string, power = 0) {
  return tp.http.post('/v1/device/telemetry', {
    token: d.token,
    json: {
      timestamp: new Date(tp.now()).toISOString(),
      connector_id: 1,
      state,
      power: state === 'discharging' ? -5 : power,
    },
  });
}

describe('endpoint management', () => {
  it('creates an endpoint with its secret shown once, lists, gets, changes and deletes it', async () => {
    const res = await tp.http.post('/v1/operator/webhooks', {
      token: tenant.token,
      json: { url: receiver.url, events: ['device.online', 'device.offline'], description: 'ops' },
    });
    expect(res.status).toBe(200);
    const hook = res.body.data;
    expect(hook).toMatchObject({
      webhook_id: expect.stringMatching(/^wh_/),
      url: receiver.url,
      events: ['device.online', 'device.offline'],
      description: 'ops',
      status: 'enabled',
      secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/),
    });
    const got = await tp.http.get(`/v1/operator/webhooks/${hook.webhook_id}`, { token: tenant.token });
    expect(got.status).toBe(200);
    expect(got.body.data.secret).toBeUndefined();
    const list = await tp.http.get('/v1/operator/webhooks', { token: tenant.token });
    expect(list.body.data.items.map((h: { webhook_id: string }) => h.webhook_id)).toContain(hook.webhook_id);
    expect(list.body.data.items.some((h: { secret?: string }) => h.secret)).toBe(false);

    const patched = await tp.http.patch(`/v1/operator/webhooks/${hook.webhook_id}`, {
      token: tenant.token,
      json: { events: ['*'], description: null, status: 'disabled' },
    });
    expect(patched.body.data).toMatchObject({ events: ['*'], description: null, status: 'disabled' });
    expect(patched.body.data.disabled_reason).toBe('operator');
    const enabled = await tp.http.patch(`/v1/operator/webhooks/${hook.webhook_id}`, {
      token: tenant.token,
      json: { status: 'enabled' },
    });
    expect(enabled.body.data).toMatchObject({ status: 'enabled', disabled_reason: null });

    const del = await tp.http.delete(`/v1/operator/webhooks/${hook.webhook_id}`, { token: tenant.token });
    expect(del.body.data).toEqual({ webhook_id: hook.webhook_id, deleted: true });
    expectError(
      await tp.http.get(`/v1/operator/webhooks/${hook.webhook_id}`, { token: tenant.token }),
      404,
      3001,
    );
  });

  it("answers another client's endpoint like a missing one", async () => {
    const hook = await createEndpoint(tenant.token, ['device.online']);
    for (const res of [
      await tp.http.get(`/v1/operator/webhooks/${hook.webhook_id}`, { token: other.token }),
      await tp.http.patch(`/v1/operator/webhooks/${hook.webhook_id}`, {
        token: other.token,
        json: { status: 'disabled' },
      }),
      await tp.http.delete(`/v1/operator/webhooks/${hook.webhook_id}`, { token: other.token }),
      await tp.http.post(`/v1/operator/webhooks/${hook.webhook_id}/test`, { token: other.token }),
      await tp.http.post(`/v1/operator/webhooks/${hook.webhook_id}/rotate-secret`, { token: other.token }),
      await tp.http.get(`/v1/operator/webhooks/${hook.webhook_id}/deliveries`, { token: other.token }),
    ])
      expectError(res, 404, 3001);
    const list = await tp.http.get('/v1/operator/webhooks', { token: other.token });
    expect(list.body.data.total).toBe(0);
    await tp.http.delete(`/v1/operator/webhooks/${hook.webhook_id}`, { token: tenant.token });
  });

  it('refuses bad input with the field named, and more than ten endpoints per client', async () => {
    const bad: Array<[unknown, string]> = [
      [{ url: 'ftp://example.com/x', events: ['*'] }, 'url'],
      [{ url: 'not a url', events: ['*'] }, 'url'],
      [{ url: receiver.url, events: [] }, 'events'],
      [{ url: receiver.url, events: ['device.exploded'] }, 'events.0'],
      [{ url: receiver.url, events: ['*', 'device.online'] }, 'events'],
      [{ url: receiver.url, events: ['*'], extra: 1 }, 'extra'],
    ];
    for (const [json, field] of bad) {
      const body = expectError(
        await tp.http.post('/v1/operator/webhooks', { token: tenant.token, json }),
        400,
        1001,
      );
      expect(body.details.field, JSON.stringify(json)).toBe(field);
    }
    const third = await createTenant(tp, 'Many Hooks');
    for (let i = 0; i < 10; i++) await createEndpoint(third.token, ['device.online']);
    expectError(
      await tp.http.post('/v1/operator/webhooks', {
        token: third.token,
        json: { url: receiver.url, events: ['*'] },
      }),
      409,
      4001,
    );
    const read = await createTenant(tp, 'Reader', ['read']);
    expectError(
      await tp.http.post('/v1/operator/webhooks', {
        token: read.token,
        json: { url: receiver.url, events: ['*'] },
      }),
      403,
      2003,
    );
  });
});

describe('events', () => {
  it('sends each event type once per trigger, signed, in the API shapes', async () => {
    const hook = await createEndpoint(tenant.token, ['*']);
    const start = receiver.received.length;
    // device.registered: the charger lands in the tenant's site at registration.
    tp.platform.context.options.defaultSiteId = tenant.siteId;
    const reg = await tp.http.post('/v1/device/register', {
      json: {
        sn: 'WH-EVENTS-1',
        model: 'M',
        manufacturer: 'Acme',
        firmware_version: '1.0.0',
        agent_version: 'agent-1.0.0',
        connectors: [{ connector_id: 1, max_power_kw: 22 }],
      },
    });
    tp.platform.context.options.defaultSiteId = undefined;
    expect(reg.status, reg.text).toBe(200);
    const deviceId: string = reg.body.data.device_id;
    const tok = await tp.http.post('/v1/device/token', {
      json: {
        device_id: deviceId,
        device_secret: reg.body.data.device_secret,
        grant_type: 'client_credentials',
      },
    });
    const d: RegisteredDevice = {
      deviceId,
      secret: reg.body.data.device_secret,
      token: tok.body.data.access_token,
    };

    // device.online (first request), connector.state_changed (idle → charging), not for a repeated state.
    expect((await telemetry(d, 'idle')).status).toBe(200);
    expect((await telemetry(d, 'charging', 7)).status).toBe(200);
    expect((await telemetry(d, 'charging', 8)).status).toBe(200);
    // command.status_changed: delivered, accepted, succeeded (not queued).
    const stop = await tp.http.post(`/v1/operator/devices/${deviceId}/connectors/1/stop`, {
      token: tenant.token,
      json: {},
    });
    expect(stop.status).toBe(200);
    const commandId: string = stop.body.data.command_id;
    expect((await tp.http.get('/v1/device/commands?wait=0', { token: d.token })).status).toBe(200);
    for (const status of ['accepted', 'succeeded'])
      await tp.http.post(`/v1/device/commands/${commandId}/status`, { token: d.token, json: { status } });
    // device.fault: only error and critical events, once even when uploaded again.
    const events = {
      events: [
        {
          event_id: 'ev-1',
          kind: 'ground_fault',
          severity: 'critical',
          connector_id: 1,
          timestamp: new Date(tp.now()).toISOString(),
        },
        {
          event_id: 'ev-2',
          kind: 'door_open',
          severity: 'info',
          timestamp: new Date(tp.now()).toISOString(),
        },
      ],
    };
    for (let i = 0; i < 2; i++) await tp.http.post('/v1/device/events', { token: d.token, json: events });
    // charging_record.created: once per record, also when uploaded again.
    const record = {
      record_id: 'rec-wh-1',
      connector_id: 1,
      start_time: new Date(tp.now() - 3600_000).toISOString(),
      end_time: new Date(tp.now()).toISOString(),
      energy: 11.5,
    };
    for (let i = 0; i < 2; i++)
      await tp.http.post('/v1/device/charging-records', { token: d.token, json: { records: [record] } });
    // firmware.status_changed, with the report's update and id (DESIGN.md §19); its replay is stored once and
    // sends nothing.
    const firmwareReport = {
      status: 'downloading',
      version: '2.0.0',
      progress: 10,
      timestamp: new Date(tp.now()).toISOString(),
      update_id: 'upd_wh',
      report_id: 'rep-wh-1',
    };
    for (let i = 0; i < 2; i++) {
      const sent = await tp.http.post('/v1/device/firmware/status', { token: d.token, json: firmwareReport });
      expect(sent.body.data).toEqual({ status: 'downloading' });
    }
    // device.configuration_changed (DESIGN.md §20): the first report, not its replay nor a report of the same
    // values, then a change of one key.
    const configuration = { ...DEFAULT_CONFIGURATION };
    const configurationEvent = (id: string, atMs: number, values: Record<string, string | number>) => ({
      events: [
        {
          event_id: id,
          kind: 'configuration_reported',
          timestamp: new Date(atMs).toISOString(),
          data: values,
        },
      ],
    });
    const reports = [
      configurationEvent('cfg-wh-1', tp.now() - 3_000, configuration),
      configurationEvent('cfg-wh-1', tp.now() - 3_000, configuration),
      configurationEvent('cfg-wh-2', tp.now() - 2_000, configuration),
      configurationEvent('cfg-wh-3', tp.now() - 1_000, { ...configuration, telemetry_interval_seconds: 2 }),
    ];
    for (const json of reports) {
      const sent = await tp.http.post('/v1/device/events', { token: d.token, json });
      expect(sent.status, sent.text).toBe(200);
    }
    // control.status_changed: executing, then cancelled.
    const flex = await tp.http.post('/v1/operator/control/flexibility', {
      token: tenant.token,
      json: {
        target_type: 'site',
        target_ids: [tenant.siteId],
        command: 'set_power_limit',
        params: { power_limit_percent: 50, duration: 3600, reason: 'grid_peak' },
      },
    });
    expect(flex.status, flex.text).toBe(200);
    await tp.http.delete(`/v1/operator/control/${flex.body.data.control_id}`, { token: tenant.token });
    // update.status_changed: running, then cancelled (DESIGN.md §19).
    const artifact = await tp.http.post('/v1/operator/artifacts?kind=firmware&version=wh-2.0.0', {
      token: tenant.token,
      raw: Buffer.from('a firmware image'),
      contentType: 'application/octet-stream',
      headers: { 'x-artifact-signature': `${'A'.repeat(86)}==` },
    });
    expect(artifact.status, artifact.text).toBe(200);
    const update = await tp.http.post('/v1/operator/updates', {
      token: tenant.token,
      json: { artifact_id: artifact.body.data.artifact_id, target_type: 'device', target_ids: [deviceId] },
    });
    expect(update.status, update.text).toBe(200);
    await tp.http.delete(`/v1/operator/updates/${update.body.data.update_id}`, { token: tenant.token });
    // diagnostics.available (DESIGN.md §20): once, when the archive is whole and checked; not again for a
    // repeated upload (answered 409).
    const diagnostics = await tp.http.post(`/v1/operator/devices/${deviceId}/diagnostics`, {
      token: tenant.token,
    });
    expect(diagnostics.status, diagnostics.text).toBe(200);
    const diagnosticsId: string = diagnostics.body.data.diagnostics_id;
    const archive = gzipSync(Buffer.from('a diagnostics archive'));
    for (const status of [200, 409]) {
      const sent = await tp.http.call('PUT', `/v1/device/diagnostics/${diagnosticsId}`, {
        token: d.token,
        raw: archive,
        contentType: 'application/octet-stream',
        headers: { 'content-range': `bytes 0-${archive.length - 1}/${archive.length}` },
      });
      expect(sent.status, sent.text).toBe(status);
    }
    // device.offline
    await tp.http.post('/v1/device/heartbeat', {
      token: d.token,
      json: { timestamp: new Date(tp.now()).toISOString(), status: 'offline', fault_code: 0 },
    });
    // webhook.test
    const test = await tp.http.post(`/v1/operator/webhooks/${hook.webhook_id}/test`, { token: tenant.token });
    expect(test.status).toBe(200);
    await settle();

    const got = receiver.received.slice(start);
    expect(got.every((r) => r.verifiedWith.length === 1 && r.status === 200)).toBe(true);
    // Every body has its type's documented shape (the OpenAPI document's `webhooks` are built from these).
    for (const r of got) {
      const parsed = webhookEventBody(r.event.type).safeParse(r.event);
      expect(parsed.success, `${r.body}: ${parsed.error?.message}`).toBe(true);
    }
    const mine = got.map((r) => r.event).filter((e) => e.data.device_id === deviceId || !e.data.device_id);
    const types = mine.map((e) => e.type);
    const count = (t: string) => types.filter((x) => x === t).length;
    expect(count('device.registered')).toBe(1);
    expect(count('device.online')).toBe(1);
    expect(count('device.offline')).toBe(1);
    expect(count('connector.state_changed')).toBe(1);
    expect(count('device.fault')).toBe(1);
    expect(count('charging_record.created')).toBe(1);
    expect(count('firmware.status_changed')).toBe(1);
    expect(mine.filter((e) => e.type === 'device.configuration_changed').map((e) => e.data.changed)).toEqual([
      Object.keys(DEFAULT_CONFIGURATION).sort(),
      ['telemetry_interval_seconds'],
    ]);
    expect(count('webhook.test')).toBe(1);
    expect(mine.filter((e) => e.type === 'diagnostics.available').map((e) => e.data)).toEqual([
      {
        diagnostics_id: diagnosticsId,
        device_id: deviceId,
        size: archive.length,
        sha256: createHash('sha256').update(archive).digest('hex'),
      },
    ]);
    expect(mine.filter((e) => e.type === 'command.status_changed').map((e) => e.data.status)).toEqual(
      expect.arrayContaining(['delivered', 'accepted', 'succeeded']),
    );
    expect(
      mine.filter((e) => e.type === 'command.status_changed' && e.data.command_id === commandId),
    ).toHaveLength(3);
    const controls = got.map((r) => r.event).filter((e) => e.type === 'control.status_changed');
    expect(controls.map((e) => e.data.status)).toEqual(['executing', 'cancelled']);
    const updates = got.map((r) => r.event).filter((e) => e.type === 'update.status_changed');
    expect(updates.map((e) => e.data.status)).toEqual(['running', 'cancelled']);
    expect(updates[1]!.data).toMatchObject({
      reason: 'the update was cancelled',
      progress: { cancelled: 1 },
    });
    // Every type of DESIGN.md §14 was seen.
    expect(new Set([...types, ...controls.map((e) => e.type), ...updates.map((e) => e.type)])).toEqual(
      new Set(WEBHOOK_EVENT_TYPES),
    );

    const byType = Object.fromEntries(mine.map((e) => [e.type, e]));
    expect(byType['device.registered'].data).toMatchObject({
      device_id: deviceId,
      sn: 'WH-EVENTS-1',
      site_id: tenant.siteId,
    });
    expect(byType['device.registered'].data).toMatchObject({
      firmware_version: '1.0.0',
      agent_version: 'agent-1.0.0',
    });
    expect(byType['connector.state_changed'].data).toMatchObject({
      device_id: deviceId,
      connector_id: 1,
      state: 'charging',
      previous_state: 'idle',
    });
    expect(byType['device.fault'].data).toMatchObject({
      event_id: 'ev-1',
      kind: 'ground_fault',
      severity: 'critical',
    });
    expect(byType['charging_record.created'].data).toEqual({ ...record, device_id: deviceId });
    expect(byType['firmware.status_changed'].data).toMatchObject({
      device_id: deviceId,
      status: 'downloading',
      version: '2.0.0',
    });
    expect(byType['firmware.status_changed'].data).toEqual({ ...firmwareReport, device_id: deviceId });
    expect(byType['webhook.test'].data).toEqual({ webhook_id: hook.webhook_id });
    for (const e of mine) expect(Date.parse(e.timestamp)).not.toBeNaN();
    // Each delivery has its own id.
    expect(new Set(got.map((r) => r.id)).size).toBe(got.length);
    await tp.http.delete(`/v1/operator/webhooks/${hook.webhook_id}`, { token: tenant.token });
  });

  it("never sends a tenant's events to another client's endpoint, and only the types subscribed to", async () => {
    const mineHook = await createEndpoint(tenant.token, ['connector.state_changed']);
    const theirs = await createEndpoint(other.token, ['*']);
    const start = receiver.received.length;
    const d = await device('WH-TENANCY-1', tenant.siteId);
    await telemetry(d, 'idle');
    await telemetry(d, 'charging', 3);
    await tp.http.post('/v1/device/heartbeat', {
      token: d.token,
      json: { timestamp: new Date(tp.now()).toISOString(), status: 'offline', fault_code: 0 },
    });
    await settle();
    const got = receiver.received.slice(start);
    const ofDevice = got.filter((r) => r.body.includes(d.deviceId));
    expect(ofDevice.length).toBeGreaterThan(0);
    // Only the tenant's own endpoint, and only its one type.
    expect(ofDevice.every((r) => r.event.type === 'connector.state_changed')).toBe(true);
    const theirSecret = theirs.secret;
    expect(ofDevice.some((r) => r.verifiedWith.includes(theirSecret))).toBe(false);
    for (const id of [mineHook.webhook_id])
      await tp.http.delete(`/v1/operator/webhooks/${id}`, { token: tenant.token });
    await tp.http.delete(`/v1/operator/webhooks/${theirs.webhook_id}`, { token: other.token });
  });
});
