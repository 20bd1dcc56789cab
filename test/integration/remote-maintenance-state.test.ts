import { describe, expect, it } from 'vitest';
import { lifecycleCalls } from '../helpers/command-lifecycle.js';
import { expectError, type RegisteredDevice, registerDevice } from '../helpers/platform.js';
import { platformPerFile } from '../helpers/platform-per-file.js';

/**
 * What remote maintenance changes in the operator's view of a charger (DESIGN.md §20), over real HTTPS: a
 * connector's availability once its `set_availability` succeeded (and how its status reads while a session
 * runs), the configuration the charger reports in its events (the newest wins, whatever the arrival order),
 * and the agent version its boot event carries. One platform for the file; every test has its own charger.
 */

const tp = platformPerFile();

const { sn, tenant, heartbeat, isoNow, reportOk, platformNow } = lifecycleCalls(() => tp);
type Tenant = Awaited<ReturnType<typeof tenant>>;

async function charger(): Promise<{ t: Tenant; d: RegisteredDevice }> {
  const t = await tenant();
  return { t, d: await registerDevice(tp, sn(), t.siteId) };
}
// biome-ignore lint/suspicious/noExplicitAny: response bodies are inspected field by field
async function device(t: Tenant, d: RegisteredDevice): Promise<any> {
  const res = await tp.http.get(`/v1/operator/devices/${d.deviceId}`, { token: t.token });
  expect(res.status, res.text).toBe(200);
  return res.body.data;
}
/** Each connector's id, status and availability, as the device view shows them. */
async function connectors(t: Tenant, d: RegisteredDevice) {
  const view = await device(t, d);
  return (view.connectors as Array<{ connector_id: number; status: string; available: boolean }>).map(
    (c) => [c.connector_id, c.status, c.available] as const,
  );
}
async function telemetry(d: RegisteredDevice, connector: number, state: string, power = 0) {
  const res = await tp.http.post('/v1/device/telemetry', {
    token: d.token,
    json: { timestamp: isoNow(), connector_id: connector, state, power },
  });
  expect(res.status, res.text).toBe(200);
}
/** Queues `set_availability` and has the charger take it; answers its id. */
async function setAvailability(t: Tenant, d: RegisteredDevice, connector: number, available: boolean) {
  const res = await tp.http.call(
    'PUT',
    `/v1/operator/devices/${d.deviceId}/connectors/${connector}/availability`,
    {
      token: t.token,
      json: { available },
    },
  );
  expect(res.status, res.text).toBe(200);
  await heartbeat(d);
  return res.body.data.command_id as string;
}
async function events(d: RegisteredDevice, list: Array<Record<string, unknown>>) {
  const res = await tp.http.post('/v1/device/events', { token: d.token, json: { events: list } });
  expect(res.status, res.text).toBe(200);
  return res.body.data as { accepted: number; duplicates: number };
}
async function configuration(t: Tenant, d: RegisteredDevice) {
  const res = await tp.http.get(`/v1/operator/devices/${d.deviceId}/configuration`, { token: t.token });
  expect(res.status, res.text).toBe(200);
  return res.body.data as { device_id: string; values: Record<string, unknown>; reported_at: string | null };
}
const iso = (ms: number) => new Date(ms).toISOString();
let eventSerial = 0;
const configEvent = (ms: number, data: Record<string, unknown>) => ({
  event_id: `cfg-${++eventSerial}`,
  kind: 'configuration_reported',
  timestamp: iso(ms),
  data,
});

describe('connector availability', () => {
  it('every connector shows available: true until a set_availability succeeds', async () => {
    const { t, d } = await charger();
    await heartbeat(d);
    await telemetry(d, 1, 'idle');
    await telemetry(d, 2, 'idle');
    expect(await connectors(t, d)).toEqual([
      [1, 'idle', true],
      [2, 'idle', true],
    ]);
    const id = await setAvailability(t, d, 1, false);
    await reportOk(d, id, { status: 'accepted' }, { status: 'accepted', changed: true });
    expect(await connectors(t, d)).toEqual([
      [1, 'idle', true],
      [2, 'idle', true],
    ]);
    // The platform takes its own params, not what the charger's result says.
    await reportOk(
      d,
      id,
      { status: 'succeeded', result: { available: true } },
      { status: 'succeeded', changed: true },
    );
    expect(await connectors(t, d)).toEqual([
      [1, 'unavailable', false],
      [2, 'idle', true],
    ]);
  });

  it('a charging connector set unavailable shows charging until it is idle, then unavailable', async () => {
    const { t, d } = await charger();
    await heartbeat(d);
    await telemetry(d, 2, 'charging', 7.4);
    const id = await setAvailability(t, d, 2, false);
    await reportOk(d, id, { status: 'succeeded' }, { status: 'succeeded', changed: true });
    expect((await connectors(t, d))[1]).toEqual([2, 'charging', false]);
    tp.advance(1_000);
    await telemetry(d, 2, 'discharging', -3);
    expect((await connectors(t, d))[1]).toEqual([2, 'discharging', false]);
    tp.advance(1_000);
    await telemetry(d, 2, 'fault');
    expect((await connectors(t, d))[1]).toEqual([2, 'fault', false]);
    tp.advance(1_000);
    await telemetry(d, 2, 'idle');
    expect((await connectors(t, d))[1]).toEqual([2, 'unavailable', false]);
  });

  it('a connector with no telemetry yet, and back in service: available follows the last success', async () => {
    const { t, d } = await charger();
    await heartbeat(d);
    const off = await setAvailability(t, d, 1, false);
    await reportOk(d, off, { status: 'succeeded' }, { status: 'succeeded', changed: true });
    expect((await connectors(t, d))[0]).toEqual([1, 'unavailable', false]);
    // A command that failed changes nothing.
    const failed = await setAvailability(t, d, 1, true);
    await reportOk(d, failed, { status: 'failed' }, { status: 'failed', changed: true });
    expect((await connectors(t, d))[0]).toEqual([1, 'unavailable', false]);
    const on = await setAvailability(t, d, 1, true);
    await reportOk(d, on, { status: 'succeeded' }, { status: 'succeeded', changed: true });
    await telemetry(d, 1, 'idle');
    expect((await connectors(t, d))[0]).toEqual([1, 'idle', true]);
  });

  it('an offline charger’s connectors read unavailable as before, available as stored', async () => {
    const { t, d } = await charger();
    await heartbeat(d);
    await telemetry(d, 1, 'idle');
    const id = await setAvailability(t, d, 2, false);
    await reportOk(d, id, { status: 'succeeded' }, { status: 'succeeded', changed: true });
    const res = await tp.http.post('/v1/device/heartbeat', {
      token: d.token,
      json: { timestamp: isoNow(), status: 'offline', fault_code: 0 },
    });
    expect(res.status).toBe(200);
    const view = await device(t, d);
    expect(view.status).toBe('offline');
    expect(await connectors(t, d)).toEqual([
      [1, 'unavailable', true],
      [2, 'unavailable', false],
    ]);
  });
});

describe('reported configuration', () => {
  it('is empty with no time before the charger reports', async () => {
    const { t, d } = await charger();
    expect(await configuration(t, d)).toEqual({ device_id: d.deviceId, values: {}, reported_at: null });
  });

  it('the newest report wins; an older one arriving late does not overwrite it, and is stored as an event', async () => {
    const { t, d } = await charger();
    const t0 = Math.floor(platformNow() / 1000) * 1000 - 60_000;
    const first = { telemetry_interval_seconds: 5, log_level: 'info', heartbeat_interval_seconds: 30 };
    await events(d, [configEvent(t0, first)]);
    expect(await configuration(t, d)).toEqual({ device_id: d.deviceId, values: first, reported_at: iso(t0) });

    const newer = { ...first, log_level: 'debug' };
    await events(d, [configEvent(t0 + 10_000, newer)]);
    expect(await configuration(t, d)).toMatchObject({ values: newer, reported_at: iso(t0 + 10_000) });

    // Late (an outbox replayed after an outage): kept as an event, not as the configuration.
    const late = configEvent(t0 + 5_000, { ...first, log_level: 'error' });
    expect(await events(d, [late])).toEqual({ accepted: 1, duplicates: 0 });
    expect(await configuration(t, d)).toMatchObject({ values: newer, reported_at: iso(t0 + 10_000) });
    // The same instant as the stored one: not newer either.
    await events(d, [configEvent(t0 + 10_000, { ...first, log_level: 'warn' })]);
    expect((await configuration(t, d)).values.log_level).toBe('debug');
    const listed = await tp.http.get(`/v1/operator/devices/${d.deviceId}/events`, { token: t.token });
    expect(listed.body.data.items.map((e: { event_id: string }) => e.event_id)).toContain(late.event_id);

    // Within one upload, the newest of several, whatever their order.
    await events(d, [
      configEvent(t0 + 30_000, { ...first, log_level: 'warn' }),
      configEvent(t0 + 20_000, { ...first, log_level: 'error' }),
    ]);
    expect(await configuration(t, d)).toMatchObject({
      values: { log_level: 'warn' },
      reported_at: iso(t0 + 30_000),
    });
  });

  it('keeps keys this platform does not know, drops known keys whose value is out of the table', async () => {
    const { t, d } = await charger();
    const t0 = Math.floor(platformNow() / 1000) * 1000;
    await events(d, [
      configEvent(t0, {
        telemetry_interval_seconds: 500,
        log_level: 'info',
        secret_rotation_days: 90,
        display_brightness: 70,
        note: null,
      }),
    ]);
    expect((await configuration(t, d)).values).toEqual({
      log_level: 'info',
      secret_rotation_days: 90,
      display_brightness: 70,
    });
  });

  it('of another tenant’s charger answers 404 exactly as a missing one', async () => {
    const { d } = await charger();
    const other = await tenant();
    const foreign = await tp.http.get(`/v1/operator/devices/${d.deviceId}/configuration`, {
      token: other.token,
    });
    const missing = await tp.http.get('/v1/operator/devices/dev_00000000000000000000/configuration', {
      token: other.token,
    });
    expectError(foreign, 404, 3001);
    expect(foreign.body).toEqual(missing.body);
  });
});

describe('the boot event', () => {
  it('sets the device’s agent_version from data.version', async () => {
    const { t, d } = await charger();
    expect((await device(t, d)).agent_version).toBe('1.0.0');
    await events(d, [
      { event_id: `boot-${++eventSerial}`, kind: 'boot', timestamp: isoNow(), data: { version: '1.4.0' } },
    ]);
    expect((await device(t, d)).agent_version).toBe('1.4.0');
    // Not a version: nothing changes.
    await events(d, [
      { event_id: `boot-${++eventSerial}`, kind: 'boot', timestamp: isoNow(), data: { version: 14 } },
    ]);
    expect((await device(t, d)).agent_version).toBe('1.4.0');
  });
});
