import { describe, expect, it } from 'vitest';
import {
  createTenant,
  expectError,
  type HttpResult,
  type RegisteredDevice,
  registerDevice,
} from '../helpers/platform.js';
import { platformPerFile } from '../helpers/platform-per-file.js';

/**
 * The fleet's inventory and firmware history (DESIGN.md §19) over real HTTPS, on the backend of the run:
 * `agent_version` from registration and from the agent's boot event, the version filters of the device list,
 * a charger's firmware reports newest first, and reports stored once per `report_id`.
 */

const tp = platformPerFile();

const isoNow = () => new Date(tp.now()).toISOString();
let counter = 0;
const sn = () => `INV-${process.pid}-${++counter}-${Math.random().toString(36).slice(2, 8)}`;
const tenant = () => createTenant(tp, `inventory-${++counter}`);
type Tenant = Awaited<ReturnType<typeof tenant>>;

// biome-ignore lint/suspicious/noExplicitAny: response bodies are inspected field by field
async function okData(res: Promise<HttpResult>): Promise<any> {
  const r = await res;
  if (r.status !== 200) throw new Error(`expected 200, got ${r.status} ${r.text}`);
  return r.body.data;
}
const get = (t: Tenant, path: string) => tp.http.get(path, { token: t.token });
const deviceView = (t: Tenant, d: RegisteredDevice) => okData(get(t, `/v1/operator/devices/${d.deviceId}`));
const report = (d: RegisteredDevice, body: Record<string, unknown>) =>
  tp.http.post('/v1/device/firmware/status', { token: d.token, json: { timestamp: isoNow(), ...body } });
const bootEvent = (d: RegisteredDevice, eventId: string, atMs: number, data: unknown) =>
  tp.http.post('/v1/device/events', {
    token: d.token,
    json: {
      events: [
        { event_id: eventId, kind: 'boot', severity: 'info', timestamp: new Date(atMs).toISOString(), data },
      ],
    },
  });

/** Registers a charger declaring `body`'s extra fields, in the tenant's site. */
async function registerWith(t: Tenant, extra: Record<string, unknown>): Promise<RegisteredDevice> {
  const serial = sn();
  const reg = await tp.http.post('/v1/device/register', {
    json: { sn: serial, model: 'M', manufacturer: 'Acme', firmware_version: '1.0.0', ...extra },
  });
  if (reg.status !== 200) throw new Error(`register: ${reg.status} ${reg.text}`);
  const { device_id, device_secret } = reg.body.data;
  await tp.store.assignDevice(device_id, t.siteId);
  const tok = await tp.http.post('/v1/device/token', {
    json: { device_id, device_secret, grant_type: 'client_credentials' },
  });
  return { deviceId: device_id, secret: device_secret, token: tok.body.data.access_token };
}

describe('agent_version', () => {
  it('is stored from registration, and absent when the charger did not say it', async () => {
    const t = await tenant();
    const d = await registerWith(t, { agent_version: '0.1.0' });
    expect(await deviceView(t, d)).toMatchObject({ firmware_version: '1.0.0', agent_version: '0.1.0' });
    const old = await registerWith(t, {});
    expect((await deviceView(t, old)).agent_version).toBeUndefined();
  });

  it.each([
    ['', ''],
    ['x'.repeat(65), 'x'.repeat(65)],
    ['a\nb', 'a\nb'],
  ])('refuses agent_version %j at registration: 400/1001', async (value) => {
    const res = await tp.http.post('/v1/device/register', {
      json: { sn: sn(), model: 'M', manufacturer: 'Acme', firmware_version: '1.0.0', agent_version: value },
    });
    expect(expectError(res, 400, 1001).details).toMatchObject({ field: 'agent_version' });
  });

  it('follows the newest new boot event’s data.version; a replayed or malformed boot changes nothing', async () => {
    const t = await tenant();
    const d = await registerWith(t, { agent_version: '0.1.0' });
    const t0 = tp.now();
    expect((await bootEvent(d, 'boot-1', t0, { version: '0.2.0' })).status).toBe(200);
    expect((await deviceView(t, d)).agent_version).toBe('0.2.0');
    expect((await bootEvent(d, 'boot-2', t0 + 1, { version: '0.3.0' })).status).toBe(200);
    expect((await deviceView(t, d)).agent_version).toBe('0.3.0');
    // The outbox replays the first boot after an outage: already stored, so the version stays.
    expect((await bootEvent(d, 'boot-1', t0, { version: '0.2.0' })).body.data).toEqual({
      accepted: 0,
      duplicates: 1,
    });
    expect((await deviceView(t, d)).agent_version).toBe('0.3.0');
    for (const [id, data] of [
      ['boot-3', { version: 7 }],
      ['boot-4', { version: '' }],
      ['boot-5', { release: '0.9.0' }],
    ] as const) {
      expect((await bootEvent(d, id, t0 + 2, data)).status).toBe(200);
    }
    expect((await deviceView(t, d)).agent_version).toBe('0.3.0');
    // Another kind of event with a version is not the agent's boot.
    await tp.http.post('/v1/device/events', {
      token: d.token,
      json: {
        events: [
          {
            event_id: 'other-1',
            kind: 'vehicle_plugged',
            severity: 'info',
            timestamp: isoNow(),
            data: { version: '9' },
          },
        ],
      },
    });
    expect((await deviceView(t, d)).agent_version).toBe('0.3.0');
  });

  it('is not set from an installed report of an update (its kind is the update’s to say)', async () => {
    const t = await tenant();
    const d = await registerWith(t, { agent_version: '0.1.0' });
    await okData(report(d, { status: 'installed', version: '0.9.0', update_id: 'upd_agent' }));
    expect(await deviceView(t, d)).toMatchObject({ firmware_version: '1.0.0', agent_version: '0.1.0' });
  });
});

describe('GET /v1/operator/devices?firmware_version=&agent_version=', () => {
  it('filters by exact versions, together and with the other filters, within the tenant', async () => {
    const t = await tenant();
    const other = await tenant();
    const a = await registerWith(t, { firmware_version: '1.0.0', agent_version: '0.1.0' });
    const b = await registerWith(t, { firmware_version: '2.0.0', agent_version: '0.1.0' });
    const c = await registerWith(t, { firmware_version: '2.0.0', agent_version: '0.2.0' });
    await registerWith(other, { firmware_version: '2.0.0', agent_version: '0.1.0' });
    const ids = async (query: string) =>
      ((await okData(get(t, `/v1/operator/devices?${query}`))).items as Array<{ device_id: string }>)
        .map((x) => x.device_id)
        .sort();
    const sorted = (...ds: RegisteredDevice[]) => ds.map((d) => d.deviceId).sort();
    expect(await ids('firmware_version=2.0.0')).toEqual(sorted(b, c));
    expect(await ids('agent_version=0.1.0')).toEqual(sorted(a, b));
    expect(await ids('firmware_version=2.0.0&agent_version=0.1.0')).toEqual(sorted(b));
    expect(await ids(`firmware_version=2.0.0&site_id=${t.siteId}&size=1&page=2`)).toHaveLength(1);
    expect((await okData(get(t, '/v1/operator/devices?firmware_version=2.0'))).total).toBe(0);
    expect(await ids('agent_version=0.1')).toEqual([]);
    // Moving to 3.0.0 by a report moves the charger between filters.
    await okData(report(a, { status: 'installed', version: '3.0.0' }));
    expect(await ids('firmware_version=3.0.0')).toEqual(sorted(a));
  });

  it.each(['firmware_version=', `agent_version=${'x'.repeat(65)}`])('refuses %s: 400/1001', async (query) => {
    const t = await tenant();
    expectError(await get(t, `/v1/operator/devices?${query}`), 400, 1001);
  });
});

describe('GET /v1/operator/devices/{device_id}/firmware', () => {
  it('pages the charger’s reports newest first, as reported', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const t0 = Date.parse('2030-02-01T10:00:00Z');
    const at = (s: number) => new Date(t0 + s * 1000).toISOString();
    await okData(
      report(d, {
        status: 'downloading',
        progress: 50,
        update_id: 'upd_1',
        report_id: 'r2',
        timestamp: at(2),
      }),
    );
    await okData(
      report(d, { status: 'download_scheduled', update_id: 'upd_1', report_id: 'r1', timestamp: at(1) }),
    );
    await okData(
      report(d, { status: 'install_failed', version: '2.0.0', message: 'no space', timestamp: at(3) }),
    );
    const first = await okData(get(t, `/v1/operator/devices/${d.deviceId}/firmware?size=2`));
    expect(first).toMatchObject({ total: 3, page: 1, size: 2 });
    expect(first.items).toEqual([
      {
        status: 'install_failed',
        version: '2.0.0',
        message: 'no space',
        timestamp: at(3),
        received_at: expect.any(String),
      },
      {
        status: 'downloading',
        progress: 50,
        update_id: 'upd_1',
        report_id: 'r2',
        timestamp: at(2),
        received_at: expect.any(String),
      },
    ]);
    const second = await okData(get(t, `/v1/operator/devices/${d.deviceId}/firmware?size=2&page=2`));
    expect(second.items).toEqual([
      {
        status: 'download_scheduled',
        update_id: 'upd_1',
        report_id: 'r1',
        timestamp: at(1),
        received_at: expect.any(String),
      },
    ]);
    expect((await okData(get(t, `/v1/operator/devices/${d.deviceId}/firmware?page=3&size=2`))).items).toEqual(
      [],
    );
    expectError(await get(t, `/v1/operator/devices/${d.deviceId}/firmware?page=0`), 400, 1001);
  });

  it('stores a report once per report_id: the replay is answered as before and changes nothing', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const e = await registerDevice(tp, sn(), t.siteId);
    const installed = {
      status: 'installed',
      version: '2.0.0',
      report_id: 'r-installed',
      timestamp: isoNow(),
    };
    expect(await okData(report(d, installed))).toEqual({ status: 'installed' });
    expect(await okData(report(d, { status: 'installed', version: '3.0.0', report_id: 'r-next' }))).toEqual({
      status: 'installed',
    });
    // The first report again (the charger did not hear the answer): same answer, stored once, version kept.
    expect(await okData(report(d, installed))).toEqual({ status: 'installed' });
    const page = await okData(get(t, `/v1/operator/devices/${d.deviceId}/firmware`));
    expect(page.total).toBe(2);
    expect((await deviceView(t, d)).firmware_version).toBe('3.0.0');
    // Report ids are the charger's own: another charger may use the same.
    expect(await okData(report(e, installed))).toEqual({ status: 'installed' });
    expect((await okData(get(t, `/v1/operator/devices/${e.deviceId}/firmware`))).total).toBe(1);
    // Reports without a report_id are each stored, as before.
    await okData(report(e, { status: 'idle' }));
    await okData(report(e, { status: 'idle' }));
    expect((await okData(get(t, `/v1/operator/devices/${e.deviceId}/firmware`))).total).toBe(3);
  });

  it('answers another operator’s charger, or a missing one, with 404/3001', async () => {
    const t = await tenant();
    const other = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    await okData(report(d, { status: 'idle' }));
    expectError(await get(other, `/v1/operator/devices/${d.deviceId}/firmware`), 404, 3001);
    expectError(await get(t, '/v1/operator/devices/dev_missing/firmware'), 404, 3001);
  });
});
