import { Agent } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { instantAtWallClock, localDayAt } from '../../agent/core/zoned-time.js';
import { type AgentRuntime, startAgent } from '../../agent/runtime/agent-runtime.js';
import { createSimulatedHal, type SimulatedHal } from '../../simulators/simulated-hal.js';
import {
  offsetClock,
  quietLogger,
  startTcpProxy,
  type TcpProxy,
  tempDir,
  waitFor,
} from '../helpers/agent.js';
import { createTenant, startTestPlatform, type TestPlatform } from '../helpers/platform.js';

/**
 * Autonomy and store-and-forward against a real platform that goes away and comes back on the same data:
 * the agent follows its stored schedule while the platform is stopped and after it returns, queues what it
 * could not send, and delivers the whole backlog — every telemetry record it produced is stored exactly once.
 *
 * The agent runs on a clock of its own that the test moves (a 22:00-23:00 slot is crossed in seconds); the
 * platform sits behind a TCP proxy so that it keeps one address across its restart.
 */

const TZ = 'Europe/Berlin';
const HOUR = 3_600_000;

let platformDir: ReturnType<typeof tempDir>;
let agentDir: ReturnType<typeof tempDir>;
let tp: TestPlatform;
let proxy: TcpProxy;
let hal: SimulatedHal;
let agent: AgentRuntime;
let dispatcher: Agent;
let deviceId: string;
let offset = 0;
const jumpTo = (instant: number) => {
  offset = instant - Date.now();
};
/** The next local day (in TZ) on which `hh:mm:ss` is still ahead, as instants of that day. */
let day = 0;
const at = (hh: number, mm: number, ss = 0, plusDays = 0) =>
  instantAtWallClock(day + plusDays, hh * 60 + mm, TZ) + ss * 1000;
const state = async () => (await hal.readConnector(1)).state;

beforeAll(async () => {
  platformDir = tempDir('agent-outage-platform-');
  agentDir = tempDir('agent-outage-agent-');
  tp = await startTestPlatform({ dataDir: platformDir.dir });
  proxy = await startTcpProxy(tp.port);
  day = localDayAt(Date.now(), TZ) + 1;
  jumpTo(at(21, 50));
  hal = createSimulatedHal({
    connectors: 1,
    seed: 5,
    vehicles: 'manual',
    meanTimeBetweenFaultsMs: Number.POSITIVE_INFINITY,
    tickIntervalMs: 250,
  });
  dispatcher = new Agent({ connect: { ca: tp.ca } });
  agent = await startAgent({
    config: {
      dataDir: agentDir.dir,
      platformUrl: `https://127.0.0.1:${proxy.port}`,
      sn: `OUTAGE-${process.pid}`,
    },
    hal,
    logger: quietLogger(),
    clock: offsetClock(() => offset),
    dispatcher,
    tuning: {
      heartbeatIntervalMs: 1_000,
      pollWaitSeconds: 2,
      telemetry: { activeMs: 250, idleMs: 1_000 },
      sampleTickMs: 250,
      controlSafetyIntervalMs: 200,
      backoff: { baseMs: 50, capMs: 400 },
      flushPaceMs: 5,
      requestTimeoutMs: 3_000,
    },
  });
  deviceId = (await agent.registered)!.deviceId;
});

afterAll(async () => {
  await agent?.stop();
  await dispatcher?.close();
  await proxy?.close();
  await tp?.stop().catch(() => undefined); // stopped already when the test failed during the outage
  platformDir?.remove();
  agentDir?.remove();
});

describe('agent through a platform outage', () => {
  it('follows its schedule while the platform is stopped and after it returns, then delivers the whole backlog', async () => {
    const tenant = await createTenant(tp, 'outage');
    await tp.store.assignDevice(deviceId, tenant.siteId);
    const set = await tp.http.post(`/v1/operator/devices/${deviceId}/connectors/1/schedule`, {
      token: tenant.token,
      json: {
        schedule_id: 'evening',
        type: 'daily',
        time_slots: [{ start: '22:00', end: '23:00', power_limit: 11 }],
        timezone: TZ,
      },
    });
    expect(set.status).toBe(200);
    const commandId = set.body.data.command_id as string;
    await waitFor(
      () => tp.store.getCommand(commandId),
      (c) => c?.command.status === 'succeeded',
    );
    hal.plugIn(1, { capacityKwh: 200, soc: 20, maxChargeKw: 22, maxDischargeKw: 11 });
    await waitFor(
      () => agent.controlLoop.targets().get(1)?.reason,
      (r) => r?.includes('outside the slots') === true,
    );
    expect(await state()).toBe('idle');
    expect(
      await waitFor(
        () => agent.stats().outbox.items,
        (n) => n === 0,
        10_000,
      ),
    ).toBe(0);

    // The platform goes away.
    proxy.setTarget(undefined);
    proxy.cut();
    await tp.stop();

    jumpTo(at(22, 0, 5));
    expect(await waitFor(state, (s) => s === 'charging', 3_000)).toBe('charging');
    await waitFor(
      async () => (await hal.readConnector(1)).powerKw,
      (kw) => Math.abs(kw - 11) < 0.01,
    );
    await new Promise((r) => setTimeout(r, 1_000));
    // A vehicle leaves and another arrives during the outage: a charging record and events wait too.
    hal.unplug(1);
    await waitFor(
      () => agent.store.outbox.peek(10_000, 'charging_record').length,
      (n) => n === 1,
    );
    hal.plugIn(1, { capacityKwh: 200, soc: 40, maxChargeKw: 22, maxDischargeKw: 11 });
    expect(await waitFor(state, (s) => s === 'charging', 3_000)).toBe('charging');
    await new Promise((r) => setTimeout(r, 500));
    jumpTo(at(23, 0, 5));
    expect(await waitFor(state, (s) => s === 'idle', 3_000)).toBe('idle');
    await new Promise((r) => setTimeout(r, 500));

    const backlog = agent.store.outbox.peek(10_000);
    const queuedTelemetry = backlog.filter((i) => i.kind === 'telemetry');
    expect(queuedTelemetry.length).toBeGreaterThan(5);
    expect(
      backlog.filter((i) => i.kind === 'event').map((i) => (i.payload as { kind: string }).kind),
    ).toEqual(['vehicle_unplugged', 'vehicle_plugged']);
    const record = backlog.find((i) => i.kind === 'charging_record')?.payload as {
      record_id: string;
      energy: number;
    };
    expect(record.energy).toBeGreaterThan(0);
    expect(agent.stats().uplink.telemetryQueued).toBeGreaterThanOrEqual(queuedTelemetry.length);

    // It comes back on the same data, at the same address.
    tp = await startTestPlatform({ dataDir: platformDir.dir });
    proxy.setTarget(tp.port);
    await waitFor(
      () => agent.stats().outbox.items,
      (n) => n === 0,
      8_000,
    );
    expect(agent.stats().outbox.items).toBe(0);
    const records = await tp.store.listChargingRecords([tenant.operatorId], {
      device_id: deviceId,
      page: 1,
      size: 20,
    });
    expect(records.items.map((r) => r.record_id)).toEqual([record.record_id]);
    expect(records.items[0]).toMatchObject({ energy: record.energy, connector_id: 1 });
    const events = await tp.store.listEvents(deviceId, 1, 20);
    expect(events.items.map((e) => e.kind).sort()).toEqual([
      'boot',
      'configuration_reported',
      'vehicle_plugged',
      'vehicle_plugged',
      'vehicle_unplugged',
    ]);

    // ... and the schedule is still followed: the next evening charges again.
    jumpTo(at(22, 0, 5, 1));
    expect(await waitFor(state, (s) => s === 'charging', 3_000)).toBe('charging');
    await waitFor(
      async () => (await tp.store.listConnectors(deviceId))[0]?.state,
      (s) => s === 'charging',
    );

    await agent.stop();
    const stats = agent.uplink.stats();
    expect(stats.refused.telemetry).toBe(0);
    // Hour buckets aligned on 21:00 local, over every instant the agent's clock visited.
    const buckets = await tp.store.energyBuckets(
      [deviceId],
      at(21, 0) - 48 * HOUR,
      at(21, 0) + 72 * HOUR,
      HOUR,
    );
    const stored = buckets.reduce((n, b) => n + b.samples, 0);
    expect(stored).toBe(stats.telemetryProduced);
    // Power flowed only inside the 22:00-23:00 slots (the outage's and the next day's).
    const bucketAt = (instant: number) => buckets.find((b) => b.start_ms === instant);
    expect(bucketAt(at(21, 0))?.max_power ?? 0).toBe(0);
    expect(bucketAt(at(22, 0))?.max_power).toBeCloseTo(11, 2);
    expect(bucketAt(at(22, 0, 0, 1))?.max_power).toBeCloseTo(11, 2);
  });
});
