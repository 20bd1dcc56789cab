import { Agent } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { SimulatedHal } from '../../simulators/simulated-hal.js';
import { sleep, startTcpProxy, type TcpProxy, waitFor } from '../helpers/agent.js';
import { maintenanceChargers } from '../helpers/maintenance-chargers.js';
import { createTenant, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { type StreamConn, streamCalls } from '../helpers/stream-client.js';

/**
 * Remote maintenance end to end (DESIGN.md §20): real agents (in process, simulated HAL) behind a TCP proxy that
 * can cut them off, a real platform over HTTPS, the operator's endpoints. A restart is what the launcher does: the
 * runtime stops and a new one starts on the same data directory and the same (simulated) hardware.
 */

let tp: TestPlatform;
let tenant: Awaited<ReturnType<typeof createTenant>>;
let proxy: TcpProxy;
let dispatcher: Agent;
const stream = streamCalls(() => tp);
const ev = { capacityKwh: 80, soc: 40, maxChargeKw: 22, maxDischargeKw: 11 };

const chargers = maintenanceChargers(() => ({
  platformUrl: `https://127.0.0.1:${proxy.port}`,
  dispatcher,
  assign: (deviceId) => tp.store.assignDevice(deviceId, tenant.siteId),
}));
const startCharger = (sn: string) => chargers.start(sn);

const get = (path: string) => tp.http.get(path, { token: tenant.token });
const send = (method: 'POST' | 'PUT' | 'PATCH', path: string, json?: unknown) =>
  tp.http.call(method, path, { token: tenant.token, ...(json !== undefined ? { json } : {}) });

/** Waits (on the store) for the command to reach `want`, then reads it through the operator API. */
async function commandReaches(commandId: string, want: string, timeoutMs = 10_000) {
  const found = await waitFor(
    () => tp.store.getCommand(commandId),
    (v) => v?.command.status === want,
    timeoutMs,
    100,
  );
  expect(found?.command.status, JSON.stringify(found?.history)).toBe(want);
  const res = await get(`/v1/operator/commands/${commandId}`);
  expect(res.status, res.text).toBe(200);
  return res.body.data as { status: string; reason?: string; result?: Record<string, unknown> };
}
const connectorView = async (deviceId: string, id: number) =>
  (
    (await get(`/v1/operator/devices/${deviceId}`)).body.data.connectors as Array<Record<string, unknown>>
  ).find((c) => c.connector_id === id);
const stateOf = async (hal: SimulatedHal, id: number) => (await hal.readConnector(id)).state;
const bootEvents = async (deviceId: string) =>
  (await tp.store.listEvents(deviceId, 1, 100)).items.filter((e) => e.kind === 'boot').length;

beforeAll(async () => {
  tp = await startTestPlatform();
  tenant = await createTenant(tp, 'maintenance-agents');
  proxy = await startTcpProxy(tp.port);
  dispatcher = new Agent({ connect: { ca: tp.ca } });
});

afterEach(async () => {
  proxy.setTarget(tp.port);
  await chargers.stopAll();
  stream.closeAll();
});

afterAll(async () => {
  await dispatcher?.close();
  await proxy?.close();
  await tp?.stop();
  chargers.removeDirs();
});

describe('remote maintenance with real agents', () => {
  it('takes a connector out of service: shown unavailable, it starts nothing offline or after a restart', async () => {
    const c = await startCharger(`MNT-AV-${process.pid}`);
    const put = await send('PUT', `/v1/operator/devices/${c.deviceId}/connectors/1/availability`, {
      available: false,
    });
    expect(put.status, put.text).toBe(200);
    const done = await commandReaches(put.body.data.command_id, 'succeeded');
    expect(done.result).toEqual({ connector_id: 1, available: false });
    expect(await connectorView(c.deviceId, 1)).toMatchObject({ status: 'unavailable', available: false });
    expect(await connectorView(c.deviceId, 2)).toMatchObject({ available: true });

    // The platform becomes unreachable; vehicles arrive on both connectors.
    proxy.setTarget(undefined);
    proxy.cut();
    c.hal.plugIn(1, ev);
    c.hal.plugIn(2, ev);
    await waitFor(
      () => stateOf(c.hal, 2),
      (s) => s === 'charging',
      5_000,
    );
    expect(await stateOf(c.hal, 1)).toBe('idle');
    expect(c.current().controlLoop.targets().get(1)?.reason).toMatch(/out of service/);

    // A restart while still offline: the store holds it.
    await c.restart();
    await sleep(1_500); // a control pass or two
    expect(await stateOf(c.hal, 1)).toBe('idle');
    expect(await stateOf(c.hal, 2)).toBe('charging');

    // Back online: a remote start is refused, saying why; back in service, the waiting vehicle charges.
    proxy.setTarget(tp.port);
    const start = await send('POST', `/v1/operator/devices/${c.deviceId}/connectors/1/start`);
    expect((await commandReaches(start.body.data.command_id, 'rejected')).reason).toMatch(
      /connector 1 is out of service/,
    );
    const on = await send('PUT', `/v1/operator/devices/${c.deviceId}/connectors/1/availability`, {
      available: true,
    });
    await commandReaches(on.body.data.command_id, 'succeeded');
    await waitFor(
      () => stateOf(c.hal, 1),
      (s) => s === 'charging',
      5_000,
    );
    const shown = await waitFor(
      () => connectorView(c.deviceId, 1),
      (v) => v?.status === 'charging',
      8_000,
      500,
    );
    expect(shown).toMatchObject({ status: 'charging', available: true });
  });

  it('changes the telemetry cadence live: the telemetry itself comes faster, and the configuration is reported', async () => {
    const c = await startCharger(`MNT-CF-${process.pid}`);
    c.hal.plugIn(1, ev);
    await waitFor(
      () => stateOf(c.hal, 1),
      (s) => s === 'charging',
      5_000,
    );
    await stream.waitForSite(c.deviceId, tenant.siteId);
    const conn = await stream.connect({ token: tenant.token });
    expect(await stream.subscribe(conn, { device_ids: [c.deviceId] })).toMatchObject({ type: 'subscribed' });
    const gapsBefore = await telemetryGaps(conn, 4, Date.now());

    const patch = await send('PATCH', `/v1/operator/devices/${c.deviceId}/configuration`, {
      values: { telemetry_interval_seconds: 1 },
    });
    expect(patch.status, patch.text).toBe(200);
    const done = await commandReaches(patch.body.data.command_id, 'succeeded');
    expect(done.result?.values).toMatchObject({
      telemetry_interval_seconds: 1,
      heartbeat_interval_seconds: 30,
    });
    const gapsAfter = await telemetryGaps(conn, 5, Date.now());
    expect(median(gapsBefore), JSON.stringify(gapsBefore)).toBeGreaterThan(1_700);
    expect(median(gapsAfter), JSON.stringify(gapsAfter)).toBeLessThan(1_300);

    const reported = await waitFor(
      async () => (await get(`/v1/operator/devices/${c.deviceId}/configuration`)).body.data,
      (v) => v?.values?.telemetry_interval_seconds === 1,
      5_000,
      250,
    );
    expect(reported).toMatchObject({
      device_id: c.deviceId,
      values: {
        telemetry_interval_seconds: 1,
        idle_telemetry_interval_seconds: 60,
        heartbeat_interval_seconds: 30,
      },
      reported_at: expect.any(String),
    });
    // Kept across a restart: the new start runs at 1 s from its first sample.
    await c.restart();
    expect(median(await telemetryGaps(conn, 4, Date.now()))).toBeLessThan(1_300);
  });

  it('unlocks a connector through the HAL', async () => {
    const c = await startCharger(`MNT-UL-${process.pid}`);
    const res = await send('POST', `/v1/operator/devices/${c.deviceId}/connectors/2/unlock`);
    expect(res.status, res.text).toBe(200);
    expect((await commandReaches(res.body.data.command_id, 'succeeded')).reason).toBe(
      'cable lock of connector 2 released',
    );
    expect(c.hal.maintenance.unlocks.get(2)).toBe(1);
  });

  it('a reset when idle waits for the session to end, then the agent restarts and comes back online', async () => {
    const c = await startCharger(`MNT-RI-${process.pid}`);
    c.hal.plugIn(1, ev);
    await waitFor(
      () => stateOf(c.hal, 1),
      (s) => s === 'charging',
      5_000,
    );
    const boots = await bootEvents(c.deviceId);
    const reset = await send('POST', `/v1/operator/devices/${c.deviceId}/reset`);
    expect(reset.status, reset.text).toBe(200);
    await commandReaches(reset.body.data.command_id, 'accepted');
    await sleep(2_000);
    expect(c.restarts).toBe(0);
    expect((await tp.store.getCommand(reset.body.data.command_id))?.command.status).toBe('accepted');

    const stop = await send('POST', `/v1/operator/devices/${c.deviceId}/connectors/1/stop`);
    await commandReaches(stop.body.data.command_id, 'succeeded');
    expect((await commandReaches(reset.body.data.command_id, 'succeeded')).reason).toBe(
      'restarting the agent',
    );
    await waitFor(
      () => c.restarts,
      (n) => n === 1,
      10_000,
    );
    await waitFor(
      () => bootEvents(c.deviceId),
      (n) => n === boots + 1,
      10_000,
      200,
    );
    expect(await bootEvents(c.deviceId)).toBe(boots + 1);
    const device = (await get(`/v1/operator/devices/${c.deviceId}`)).body.data;
    expect(device.status).toBe('online');
  });

  it('an immediate charger reset reboots through the HAL; the agent comes back with what it owed', async () => {
    const c = await startCharger(`MNT-RC-${process.pid}`);
    const boots = await bootEvents(c.deviceId);
    // Cut off, the charger sees a vehicle come and go: two events it owes the platform.
    proxy.setTarget(undefined);
    proxy.cut();
    c.hal.plugIn(2, ev);
    await sleep(300);
    c.hal.unplug(2);
    await waitFor(
      () => c.current().store.outbox.size().items,
      (n) => n >= 2,
      5_000,
    );
    const reset = await send('POST', `/v1/operator/devices/${c.deviceId}/reset`, {
      mode: 'immediate',
      target: 'charger',
    });
    expect(reset.status, reset.text).toBe(200);
    proxy.setTarget(tp.port);
    expect((await commandReaches(reset.body.data.command_id, 'succeeded')).reason).toBe(
      'rebooting the charger',
    );
    await waitFor(
      () => c.restarts,
      (n) => n === 1,
      10_000,
    );
    expect(c.hal.maintenance.reboots).toBe(1);
    await waitFor(
      () => bootEvents(c.deviceId),
      (n) => n === boots + 1,
      10_000,
      200,
    );
    const kinds = (await tp.store.listEvents(c.deviceId, 1, 100)).items
      .filter((e) => e.connector_id === 2)
      .map((e) => e.kind);
    expect(kinds).toEqual(expect.arrayContaining(['vehicle_plugged', 'vehicle_unplugged']));
    await waitFor(
      () => c.current().store.outbox.size().items,
      (n) => n === 0,
      10_000,
    );
    expect((await get(`/v1/operator/devices/${c.deviceId}`)).body.data.status).toBe('online');
  });
});

/**
 * The gaps between `count + 1` consecutive telemetry records of connector 1 on the stream, by their timestamps,
 * taken at `sinceMs` or later (older ones are skipped).
 */
async function telemetryGaps(conn: StreamConn, count: number, sinceMs: number): Promise<number[]> {
  const stamps: number[] = [];
  while (stamps.length < count + 1) {
    const m = await conn.take((x) => x.type === 'telemetry' && x.connector_id === 1, 10_000);
    if (Date.parse(m.timestamp) >= sinceMs) stamps.push(Date.parse(m.timestamp));
  }
  return stamps.slice(1).map((t, i) => t - stamps[i]!);
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}
