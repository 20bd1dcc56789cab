import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { type AgentRuntime, startAgent } from '../../agent/runtime/agent-runtime.js';
import { createSimulatedHal } from '../../simulators/simulated-hal.js';
import { quietLogger, waitFor } from '../helpers/agent.js';
import { type Charger, socOf } from '../helpers/offline-chargers.js';
import { expectDstByHand, expectHardwareKept, owedOf } from '../helpers/offline-checks.js';
import { expectDeliveredOnce } from '../helpers/offline-delivery.js';
import { type Exchange, type Gate, recordingDispatcher, startGate } from '../helpers/offline-link.js';
import {
  BERLIN,
  LIMIT_PERCENT,
  LIMIT_SECONDS,
  MINUTE,
  NEW_YORK,
  OUTBOX_CAP,
  RETURN_AT,
  T0,
  TUNING,
  visitsOf,
} from '../helpers/offline-plans.js';
import { runOfflineMonth } from '../helpers/offline-timeline.js';
import { createTenant, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import type { OracleLimit } from '../helpers/schedule-oracle.js';
import { VirtualClock } from '../helpers/virtual-clock.js';

/**
 * Thirty days without a platform, end to end (issue 23, item 3; docs/agent.md "Thirty days offline").
 *
 * Two chargers run the real agent runtime on the simulated HAL, each with its real SQLite store in a temporary
 * directory: one in Europe/Berlin, one in America/New_York. They get their daily and weekly schedules and a
 * flexibility limit from a real platform through the operator API; then the platform goes away for 30 days of
 * the agents' (fake) time, 2027-03-05 to 2027-04-04 — across New York's spring-forward (2027-03-14) and
 * Berlin's (2027-03-28). Vehicles arrive and leave every day. Each agent is rebooted once in the middle, while it
 * charges. Then the platform comes back on the same data, at the same address.
 *
 * Checked:
 * - every power-cap change the schedules and the limit call for (times from an independent Luxon oracle,
 *   test/helpers/schedule-oracle.ts, and a few written out by hand) is made on the HAL no later than the control
 *   loop's bound (its 60 s safety pass) after the boundary — in fact exactly on it — and never before; in
 *   between, the cap and the connector state are what the oracle says;
 * - charging stops at `target_soc`: every stop inside a slot comes when the vehicle reaches the lowest target in
 *   force, at it and not past it, and no vehicle leaves fuller than the targets of the slots it stood through;
 * - the outbox never holds more than its cap, drops only telemetry and only the oldest; events and charging
 *   records are never dropped;
 * - the reboot changes nothing on the HAL (no state change, the same cap), the open session carries on as one
 *   charging record, and the outbox survives it;
 * - after the platform returns, everything owed (the outbox as it stood) reaches it once, in order: each kind in
 *   the order it was produced, no request reporting a duplicate, nothing missing from its store.
 *
 * Cadences: the agents sample and send telemetry every 60 s while charging and every 15 min otherwise (instead
 * of 5 s and 60 s) and persist sessions every 15 min, so that 2 × 30 days run in seconds; the outbox cap is
 * 2,000 items (the default, 50,000, holds about three days of 5-second telemetry: the same overflow at the real
 * cadence). Everything else — control loop, heartbeats, polls, backoff, pacing — runs with its defaults. The
 * stores are real SQLite files, in /dev/shm where there is one (tmpfs: the same SQLite, without the fsyncs that
 * would dominate the run).
 *
 * The plans and timing are in test/helpers/offline-plans.ts, the month's timeline in offline-timeline.ts, the
 * checks after it in offline-checks.ts and offline-delivery.ts.
 */

let platformDir: string | undefined;
let tp: TestPlatform | undefined;
let proxy: Gate | undefined;
const chargers: Charger[] = [];
const scratch: string[] = [];

/** A temporary directory on tmpfs when the machine has one (no fsync cost), else in the system's. */
function scratchDir(prefix: string): string {
  let dir: string;
  try {
    dir = mkdtempSync(path.join('/dev/shm', prefix));
  } catch {
    dir = mkdtempSync(path.join(tmpdir(), prefix));
  }
  scratch.push(dir);
  return dir;
}

afterAll(async () => {
  for (const c of chargers) {
    await c.agent.stop().catch(() => undefined);
    await c.dispatcher.close().catch(() => undefined);
  }
  await proxy?.close();
  await tp?.stop().catch(() => undefined);
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
  if (platformDir) rmSync(platformDir, { recursive: true, force: true });
});

describe('thirty days without a platform', () => {
  it('keeps to schedules, limit and target_soc across DST and a reboot, and delivers what it owes once', async () => {
    platformDir = mkdtempSync(path.join(tmpdir(), 'agent-30d-platform-'));
    tp = await startTestPlatform({ dataDir: platformDir });
    tp.advance(T0 - tp.now());
    const platform = tp;
    proxy = await startGate(platform.port);
    const platformUrl = `https://127.0.0.1:${proxy.port}`;
    const clock = new VirtualClock(platform.now());
    clock.follow(() => platform.now());

    async function startRuntime(c: Charger): Promise<AgentRuntime> {
      const agent = await startAgent({
        config: { dataDir: c.dir, platformUrl, sn: `OFFLINE30-${c.plan.name}-${process.pid}` },
        hal: c.hal,
        logger: quietLogger(),
        clock,
        dispatcher: c.dispatcher.dispatcher,
        tuning: TUNING,
      });
      const send = agent.uplink.sendTelemetry.bind(agent.uplink);
      agent.uplink.sendTelemetry = (records) => {
        c.produced.push(...records);
        return send(records);
      };
      return agent;
    }

    // --- Online: register, receive the schedules and the limit through the operator API. ---
    for (const plan of [BERLIN, NEW_YORK]) {
      const hal = createSimulatedHal({
        connectors: 1,
        ratedPowerKw: plan.ratingKw,
        seed: plan.seed,
        vehicles: 'manual',
        meanTimeBetweenFaultsMs: Number.POSITIVE_INFINITY,
        now: () => clock.now(),
        timers: clock.halTimers,
        tickIntervalMs: 10 * MINUTE,
      });
      const exchanges: Exchange[] = [];
      const c: Charger = {
        plan,
        dir: scratchDir(`agent-30d-${plan.name}-`),
        hal,
        agent: undefined as unknown as AgentRuntime,
        deviceId: '',
        exchanges,
        dispatcher: recordingDispatcher(platform.ca, exchanges),
        caps: [],
        states: [],
        produced: [],
        schedules: [],
        limits: [],
        visits: [],
        departures: [],
        failures: [],
      };
      const setPowerLimit = hal.setPowerLimit.bind(hal);
      hal.setPowerLimit = async (connectorId, kw) => {
        await setPowerLimit(connectorId, kw);
        c.caps.push({ at: clock.now(), kw, soc: socOf(c) });
      };
      hal.subscribe((e) => {
        if (e.type === 'state_changed') c.states.push({ at: e.at.getTime(), to: e.to });
      });
      c.agent = await startRuntime(c);
      chargers.push(c);
    }
    for (const c of chargers) c.deviceId = (await c.agent.registered)?.deviceId ?? '';
    const tenant = await createTenant(platform, 'offline-30d');
    const commandIds: string[] = [];
    for (const c of chargers) {
      await platform.store.assignDevice(c.deviceId, tenant.siteId);
      for (const schedule of c.plan.schedules) {
        const res = await platform.http.post(`/v1/operator/devices/${c.deviceId}/connectors/1/schedule`, {
          token: tenant.token,
          json: schedule,
        });
        expect(res.status, res.text).toBe(200);
        commandIds.push(res.body.data.command_id as string);
      }
    }
    const flex = await platform.http.post('/v1/operator/control/flexibility', {
      token: tenant.token,
      json: {
        target_type: 'site',
        target_ids: [tenant.siteId],
        command: 'set_power_limit',
        params: { power_limit_percent: LIMIT_PERCENT, duration: LIMIT_SECONDS, reason: 'grid congestion' },
      },
    });
    expect(flex.status, flex.text).toBe(200);
    const control = await platform.store.getControl(flex.body.data.control_id as string);
    commandIds.push(...(control?.commands ?? []).map((cmd) => cmd.command_id));
    expect(commandIds).toHaveLength(6);
    const limitCommands = new Map<string, Record<string, unknown>>();
    for (const id of commandIds) {
      const done = await waitFor(
        () => platform.store.getCommand(id),
        (v) => v?.command.status === 'succeeded',
        15_000,
      );
      expect(done?.command.status, id).toBe('succeeded');
      if (done?.command.command === 'set_power_limit')
        limitCommands.set(done.command.device_id, done.command.params);
    }
    for (const c of chargers) {
      // What the oracle is given: the schedules as the operator sent them and the limit's window as the platform
      // set it. The agent stored the same.
      c.schedules = c.plan.schedules.map((s) => ({ ...s, enabled: true }));
      const stored = c.agent.store.listSchedules().map(({ schedule }) => schedule);
      expect(stored.sort((a, b) => a.schedule_id.localeCompare(b.schedule_id))).toMatchObject(
        [...c.schedules].sort((a, b) => a.schedule_id.localeCompare(b.schedule_id)),
      );
      const params = limitCommands.get(c.deviceId) as {
        control_id: string;
        starts_at: string;
        ends_at: string;
      };
      c.limits = [
        {
          control_id: params.control_id,
          kind: 'power_limit',
          power_limit_percent: LIMIT_PERCENT,
          starts_at: params.starts_at,
          ends_at: params.ends_at,
        },
      ];
      expect(c.agent.store.listLimits()).toMatchObject(c.limits);
    }

    // --- The platform goes away, once everything owed so far has reached it (an empty outbox, with the
    // agents' time stopped and their live sends settled: no upload is cut in flight). ---
    for (let attempt = 0; ; attempt++) {
      await waitFor(
        () => chargers.every((c) => c.agent.stats().outbox.items === 0),
        (empty) => empty,
        15_000,
      );
      await clock.stopFollowing();
      for (const c of chargers) await c.agent.uplink.settled();
      if (chargers.every((c) => c.agent.stats().outbox.items === 0)) break;
      expect(attempt, 'the outboxes would not stay empty').toBeLessThan(10);
      clock.follow(() => platform.now());
    }
    proxy.setTarget(undefined);
    proxy.cut();
    await platform.stop();
    tp = undefined;
    const outageAt = clock.now();
    for (const c of chargers) {
      // The flexibility limit: 50 % for five days from when the operator sent it.
      const limit = c.limits[0] as OracleLimit;
      expect(Date.parse(limit.ends_at) - Date.parse(limit.starts_at)).toBe(LIMIT_SECONDS * 1000);
      expect(Date.parse(limit.ends_at)).toBeGreaterThan(outageAt);
      c.visits = visitsOf(c.plan, outageAt, RETURN_AT);
    }

    // --- 30 days offline: a timeline of vehicles, probes and reboots, in order. ---
    const month = await runOfflineMonth(chargers, outageAt, clock, startRuntime);
    const { reboots, maxOutbox } = month;

    // --- What the 30 days did on the hardware, and Berlin's and New York's DST nights by hand. ---
    expectHardwareKept(chargers, month);
    expectDstByHand(chargers);

    // --- What is owed when the platform returns. ---
    const owed = owedOf(chargers, outageAt, reboots);

    // --- The platform returns on the same data, at the same address. ---
    const back = await startTestPlatform({ dataDir: platformDir });
    tp = back;
    back.advance(clock.now() - back.now());
    proxy.setTarget(back.port);
    const returnedAt = clock.now();
    const sentBefore = new Map(chargers.map((c) => [c, c.exchanges.length]));
    clock.follow(() => back.now());
    // The uploads wait out their backoff (up to 5 minutes): move both clocks on, a minute every 200 ms of real
    // time for the first 10 minutes, until everything is delivered.
    const deadline = Date.now() + 30_000;
    for (let i = 0; Date.now() < deadline; i++) {
      if (chargers.every((c) => c.agent.stats().outbox.items === 0)) break;
      if (i < 10) back.advance(MINUTE);
      await new Promise((r) => setTimeout(r, 200));
    }
    for (const c of chargers) expect(c.agent.stats().outbox.items, c.plan.name).toBe(0);
    await clock.stopFollowing();
    for (const c of chargers) await c.agent.uplink.settled();
    await expectDeliveredOnce(chargers, {
      back,
      platformDir,
      operatorId: tenant.operatorId,
      outageAt,
      returnedAt,
      sentBefore,
      owed,
    });
    // The outbox was full for most of the month.
    expect(maxOutbox).toBe(OUTBOX_CAP.maxItems);
  }, 120_000);
});
