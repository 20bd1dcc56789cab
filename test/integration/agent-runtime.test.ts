import { statSync } from 'node:fs';
import { Agent } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AgentRuntime, startAgent } from '../../agent/runtime/agent-runtime.js';
import { agentStoreFile } from '../../agent/store/agent-store.js';
import { AGENT_VERSION } from '../../agent/version.js';
import { createSimulatedHal, type SimulatedHal } from '../../simulators/simulated-hal.js';
import { quietLogger, tempDir, waitFor } from '../helpers/agent.js';
import { createTenant, operatorToken, startTestPlatform, type TestPlatform } from '../helpers/platform.js';

/**
 * A real agent (in process, simulated HAL) against a real platform over HTTPS: registration, heartbeats,
 * telemetry visible to operators, every command end to end, token renewal on 2002, secret rotation,
 * re-registration after an operator reset, and the offline heartbeat at shutdown. Cadences are shortened.
 */

let tp: TestPlatform;
let tenant: Awaited<ReturnType<typeof createTenant>>;
let tmp: ReturnType<typeof tempDir>;
let hal: SimulatedHal;
let agent: AgentRuntime;
let deviceId: string;
let dispatcher: Agent;
const SN = `AGENT-RT-${process.pid}`;

const get = (path: string) => tp.http.get(path, { token: tenant.token });
const post = (path: string, json: unknown) => tp.http.post(path, { token: tenant.token, json });
/**
 * The operator API allows a client 60 reads a minute: the visibility checks use it, the many polls of this
 * file read the platform's store directly.
 */
const device = async () => (await get(`/v1/operator/devices/${deviceId}`)).body.data;
const connector = async (id: number) => {
  const row = (await tp.store.listConnectors(deviceId)).find((c) => c.connector_id === id);
  return row ? { status: row.state, power: row.power ?? undefined } : undefined;
};
const online = () => waitFor(device, (v) => v?.status === 'online', 5_000, 500);

/** Waits (on the store) for the command to reach `want`, then confirms it through the operator API. */
async function commandStatus(commandId: string, want = 'succeeded') {
  const found = await waitFor(
    () => tp.store.getCommand(commandId),
    (v) => v?.command.status === want,
    8_000,
  );
  expect(found?.command.status, JSON.stringify(found)).toBe(want);
  const res = await get(`/v1/operator/commands/${commandId}`);
  expect(res.status, res.text).toBe(200);
  expect(res.body.data.status).toBe(want);
  return res.body.data as { status: string; reason?: string; history: Array<{ status: string }> };
}

beforeAll(async () => {
  tp = await startTestPlatform();
  tenant = await createTenant(tp, 'agent-runtime');
  tmp = tempDir();
  hal = createSimulatedHal({
    connectors: 2,
    v2g: true,
    seed: 11,
    vehicles: 'manual',
    meanTimeBetweenFaultsMs: Number.POSITIVE_INFINITY,
    tickIntervalMs: 200,
  });
  dispatcher = new Agent({ connect: { ca: tp.ca } });
  agent = await startAgent({
    config: {
      dataDir: tmp.dir,
      platformUrl: tp.url,
      sn: SN,
      model: 'RT-1',
      manufacturer: 'Acme',
      firmware: '9.9',
    },
    hal,
    logger: quietLogger(),
    dispatcher,
    tuning: {
      heartbeatIntervalMs: 1_000,
      pollWaitSeconds: 2,
      telemetry: { activeMs: 500, idleMs: 2_000 },
      sampleTickMs: 500,
      backoff: { baseMs: 50, capMs: 500 },
      flushPaceMs: 10,
      controlSafetyIntervalMs: 1_000,
    },
  });
  const identity = await agent.registered;
  deviceId = identity!.deviceId;
  await tp.store.assignDevice(deviceId, tenant.siteId);
});

afterAll(async () => {
  await agent?.stop();
  await dispatcher?.close();
  await tp?.stop();
  tmp?.remove();
});

describe('agent runtime against a real platform', () => {
  it('registers with its serial number and connectors, and keeps its identity private', async () => {
    expect(deviceId).toMatch(/^dev_/);
    expect(statSync(agentStoreFile(tmp.dir)).mode & 0o777).toBe(0o600);
    const d = await online();
    expect(d).toMatchObject({
      sn: SN,
      model: 'RT-1',
      manufacturer: 'Acme',
      firmware_version: '9.9',
      status: 'online',
    });
    // Its own release, declared at registration (and again by its boot event): the fleet's inventory.
    expect(d.agent_version).toBe(AGENT_VERSION);
    expect(d.connectors).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ connector_id: 2, v2g_capable: true, max_power_kw: 22 }),
      ]),
    );
    // Online says some request of the charger's arrived (its first long poll may come before its first
    // heartbeat's answer is stored): wait for that answer.
    const heartbeat = await waitFor(
      () => agent.store.getState('last_heartbeat'),
      (v) => v !== undefined,
      5_000,
    );
    expect(heartbeat?.ok, JSON.stringify(heartbeat)).toBe(true);
    expect(Math.abs(agent.store.getState('clock_skew')?.ms ?? 99_999)).toBeLessThan(1_000);
  });

  it('shows its telemetry to the operator: a plugged-in vehicle charges (no schedule: unrestricted)', async () => {
    hal.plugIn(1, { capacityKwh: 80, soc: 30, maxChargeKw: 22, maxDischargeKw: 11 });
    await waitFor(
      () => connector(1),
      (c) => c?.status === 'charging',
    );
    const seen = await waitFor(
      async () => (await device()).connectors.find((c: { connector_id: number }) => c.connector_id === 1),
      (c) => c?.status === 'charging' && c.power > 20,
      5_000,
      500,
    );
    expect(seen).toMatchObject({ status: 'charging', soc: 30, last_telemetry_time: expect.any(String) });
    expect(seen.power).toBeGreaterThan(20);
  });

  it('runs stop, start and discharge end to end to succeeded', async () => {
    const stop = await post(`/v1/operator/devices/${deviceId}/connectors/1/stop`, { reason: 'user_request' });
    const stopped = await commandStatus(stop.body.data.command_id);
    expect(stopped.history.map((h) => h.status)).toEqual(['queued', 'delivered', 'accepted', 'succeeded']);
    expect((await hal.readConnector(1)).state).toBe('idle');
    await waitFor(
      () => connector(1),
      (c) => c?.status === 'idle',
    );

    const start = await post(`/v1/operator/devices/${deviceId}/connectors/1/start`, { power_limit: 7 });
    expect((await commandStatus(start.body.data.command_id)).reason).toMatch(/up to 7 kW/);
    await waitFor(
      () => connector(1),
      (c) => c?.status === 'charging' && Math.abs((c.power ?? 0) - 7) < 0.01,
    );

    hal.plugIn(2, { capacityKwh: 60, soc: 70, maxChargeKw: 11, maxDischargeKw: 11 });
    const discharge = await post(`/v1/operator/devices/${deviceId}/connectors/2/discharge`, {
      discharge_power: 6,
      duration: 600,
      min_soc: 30,
    });
    await commandStatus(discharge.body.data.command_id);
    const c2 = await waitFor(
      () => connector(2),
      (c) => c?.status === 'discharging',
    );
    expect(c2?.power).toBeCloseTo(-6, 2);
  });

  it('runs set_schedule and delete_schedule end to end, and follows the schedule', async () => {
    // A schedule whose only slot is far from now: connector 1 may not charge outside it.
    const hour = new Date().getUTCHours();
    const slot = `${String((hour + 12) % 24).padStart(2, '0')}:00`;
    const slotEnd = `${String((hour + 13) % 24).padStart(2, '0')}:00`;
    // Stop the start-override first (a start outranks the schedule until the vehicle leaves).
    hal.unplug(1);
    hal.plugIn(1, { capacityKwh: 80, soc: 30, maxChargeKw: 22, maxDischargeKw: 11 });
    const set = await post(`/v1/operator/devices/${deviceId}/connectors/1/schedule`, {
      schedule_id: 'far',
      type: 'daily',
      time_slots: [{ start: slot, end: slotEnd, power_limit: 11 }],
      timezone: 'UTC',
    });
    await commandStatus(set.body.data.command_id);
    expect(agent.store.listSchedules(1).map((s) => s.schedule.schedule_id)).toEqual(['far']);
    await waitFor(
      async () => (await hal.readConnector(1)).state,
      (s) => s === 'idle',
    );
    expect(agent.controlLoop.targets().get(1)?.reason).toMatch(/outside the slots of schedule far/);

    const del = await tp.http.delete(`/v1/operator/devices/${deviceId}/connectors/1/schedules/far`, {
      token: tenant.token,
    });
    await commandStatus(del.body.data.command_id);
    expect(agent.store.listSchedules(1)).toEqual([]);
    await waitFor(
      async () => (await hal.readConnector(1)).state,
      (s) => s === 'charging',
    );
  });

  it('runs set_power_limit and pause_charging (flexibility controls) end to end, and lifts them on cancel', async () => {
    const flex = await post('/v1/operator/control/flexibility', {
      target_type: 'site',
      target_ids: [tenant.siteId],
      command: 'set_power_limit',
      params: { power_limit_percent: 25, duration: 600 },
    });
    const controlId = flex.body.data.control_id as string;
    const control = await tp.store.getControl(controlId);
    await commandStatus(control!.commands[0]!.command_id);
    expect(agent.controlLoop.targets().get(1)?.powerLimitKw).toBe(5.5);
    await waitFor(
      () => connector(1),
      (c) => Math.abs((c?.power ?? 0) - 5.5) < 0.01,
    );

    const cancel = await tp.http.delete(`/v1/operator/control/${controlId}`, { token: tenant.token });
    expect(cancel.status).toBe(200);
    await waitFor(
      () => agent.controlLoop.targets().get(1)?.powerLimitKw,
      (kw) => kw === 22,
    );

    const pause = await post('/v1/operator/control/flexibility', {
      target_type: 'site',
      target_ids: [tenant.siteId],
      command: 'pause_charging',
      params: { duration: 600, reason: 'grid peak' },
    });
    const paused = await tp.store.getControl(pause.body.data.control_id);
    await commandStatus(paused!.commands[0]!.command_id);
    await waitFor(
      () => connector(1),
      (c) => c?.status === 'idle',
    );
    expect(agent.controlLoop.targets().get(1)?.reason).toMatch(/paused by control/);
    await tp.http.delete(`/v1/operator/control/${pause.body.data.control_id}`, { token: tenant.token });
    await waitFor(
      () => connector(1),
      (c) => c?.status === 'charging',
    );
  });

  it('renews an expired token (401/2002) and carries on', async () => {
    const before = agent.store.getToken()?.accessToken;
    const advancedAt = Date.now();
    tp.advance(25 * 3_600_000); // the platform's clock passes the token's expiry
    tenant.token = await operatorToken(tp.http, tenant.clientId, tenant.clientSecret); // ours expired too
    await waitFor(
      () => agent.store.getToken()?.accessToken,
      (t) => t !== undefined && t !== before,
      5_000,
    );
    expect((await online()).status).toBe('online');
    const hb = await waitFor(
      () => agent.store.getState('last_heartbeat'),
      (h) => h?.ok === true && Date.parse(h.at) > advancedAt + 100,
    );
    expect(hb).toMatchObject({ ok: true });
    expect(Date.parse(hb!.at)).toBeGreaterThan(advancedAt);
    // The agent now sees a 25 h skew and says so; commands are still judged in platform time.
    await waitFor(
      () => agent.store.getState('clock_skew')?.ms ?? 0,
      (ms) => ms > 24 * 3_600_000,
    );
    const stop = await post(`/v1/operator/devices/${deviceId}/connectors/2/stop`, {});
    await commandStatus(stop.body.data.command_id);
  });

  it('rotates its secret and keeps working with the new one; the old one is retired', async () => {
    const before = agent.store.getIdentity()!.secret;
    await agent.rotateSecret();
    const after = agent.store.getIdentity()!;
    expect(after.secret).not.toBe(before);
    expect(after.pendingSecret).toBeUndefined();
    const tokenWith = (secret: string) =>
      tp.http.post('/v1/device/token', {
        json: { device_id: deviceId, device_secret: secret, grant_type: 'client_credentials' },
      });
    expect((await tokenWith(before)).status).toBe(401);
    expect((await tokenWith(after.secret)).status).toBe(200);
    const sentBefore = agent.stats().uplink.delivered.telemetry;
    await waitFor(
      () => agent.stats().uplink.delivered.telemetry,
      (n) => n > sentBefore + 2,
    );
    expect(agent.store.getState('last_heartbeat')?.ok).toBe(true);
  });

  it('registers again, keeping its device id, after the operator resets it', async () => {
    const before = agent.store.getIdentity()!.secret;
    expect(await tp.store.resetDevice(deviceId)).toBe(true);
    await tp.platform.context.directory.refreshDevice(deviceId);
    const after = await waitFor(
      () => agent.store.getIdentity()!,
      (i) => i.secret !== before,
      8_000,
    );
    expect(after.deviceId).toBe(deviceId);
    expect((await online()).status).toBe('online');
  });

  it('sends an offline heartbeat and leaves nothing in the outbox when stopped', async () => {
    await agent.stop();
    expect((await device()).status).toBe('offline');
    const { openAgentStore } = await import('../../agent/store/agent-store.js');
    const store = openAgentStore(tmp.dir, { readonly: true });
    expect(store.outbox.size().items).toBe(0);
    expect(store.getState('agent_process')?.stoppedAt).toBeDefined();
    store.close();
  });
});

describe('an agent whose charger must sign its writes', () => {
  it('signs heartbeats, telemetry and command reports so the platform accepts them', async () => {
    const dir = tempDir();
    const signingHal = createSimulatedHal({
      connectors: 1,
      seed: 12,
      vehicles: 'manual',
      meanTimeBetweenFaultsMs: Number.POSITIVE_INFINITY,
    });
    const signer = await startAgent({
      config: { dataDir: dir.dir, platformUrl: tp.url, sn: `${SN}-SIGNED`, signRequests: true },
      hal: signingHal,
      logger: quietLogger(),
      dispatcher,
      tuning: {
        heartbeatIntervalMs: 500,
        pollWaitSeconds: 1,
        backoff: { baseMs: 50, capMs: 300 },
        flushPaceMs: 10,
      },
    });
    try {
      const id = (await signer.registered)!.deviceId;
      await tp.store.assignDevice(id, tenant.siteId);
      expect(await tp.store.setRequireSignature('device', id, true)).toBe(true);
      await tp.platform.context.directory.refreshDevice(id);
      const since = Date.now();
      const hb = await waitFor(
        () => signer.store.getState('last_heartbeat'),
        (h) => h?.ok === true && Date.parse(h.at) > since + 600,
      );
      expect(hb?.ok).toBe(true);
      const stop = await post(`/v1/operator/devices/${id}/connectors/1/stop`, {});
      const found = await waitFor(
        () => tp.store.getCommand(stop.body.data.command_id),
        (c) => c?.command.status === 'succeeded',
      );
      expect(found?.command.status).toBe('succeeded');
      expect(signer.stats().uplink.refused).toEqual({
        telemetry: 0,
        event: 0,
        charging_record: 0,
        command_status: 0,
        firmware_status: 0,
      });
    } finally {
      await signer.stop();
      dir.remove();
    }
  });
});
