import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DateTime } from 'luxon';
import { Agent, type Dispatcher } from 'undici';
import { afterAll, describe, expect, it } from 'vitest';
import { type AgentRuntime, type AgentTuning, startAgent } from '../../agent/runtime/agent-runtime.js';
import { DEFAULT_SAFETY_INTERVAL_MS } from '../../agent/runtime/control-loop.js';
import type { OutboxItem } from '../../agent/store/outbox.js';
import type { ChargingRecordUpload, DeviceEvent, TelemetryRecord } from '../../shared/device-api.js';
import { createSeededRandom, pickOne, uniformBetween } from '../../simulators/seeded-random.js';
import { createSimulatedHal, type SimulatedHal } from '../../simulators/simulated-hal.js';
import { quietLogger, waitFor } from '../helpers/agent.js';
import { createTenant, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import {
  type OracleLimit,
  type OracleSchedule,
  occurrences,
  oracleEvaluate,
} from '../helpers/schedule-oracle.js';
import { openStoredData } from '../helpers/stored-data.js';
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
 */

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const MINUTE = 60_000;
/** The control loop's documented bound: a pass at least every 60 s besides the one at each `nextChangeAt`. */
const BOUND_MS = DEFAULT_SAFETY_INTERVAL_MS;
const T0 = Date.parse('2027-03-05T10:00:00Z'); // a Friday
const RETURN_AT = T0 + 30 * DAY; // 2027-04-04T10:00Z
const OUTBOX_CAP = { maxItems: 2_000, maxBytes: 16 * 1024 * 1024 };
const TUNING: Partial<AgentTuning> = {
  sampleTickMs: MINUTE,
  telemetry: { activeMs: MINUTE, idleMs: 15 * MINUTE },
  persistEveryMs: 15 * MINUTE,
  outboxCap: OUTBOX_CAP,
};
const LIMIT_PERCENT = 50;
const LIMIT_SECONDS = 5 * 86_400;

type WireSchedule = Omit<OracleSchedule, 'enabled' | 'received_at'>;

interface Plan {
  name: string;
  zone: string;
  ratingKw: number;
  seed: number;
  schedules: WireSchedule[];
  /** The reboot, while the forced visit below charges. */
  rebootAt: number;
  /** A visit that is sure to charge at the reboot: [local date, arrival HH:MM], and the vehicle. */
  forced: { date: string; arrive: string; ev: { capacityKwh: number; soc: number; maxChargeKw: number } };
  /** Local dates whose evening gets no vehicle (so the DST night's cap changes are all visible). */
  quietEvenings: string[];
}

const BERLIN: Plan = {
  name: 'berlin',
  zone: 'Europe/Berlin',
  ratingKw: 22,
  seed: 2301,
  schedules: [
    {
      schedule_id: 'night',
      type: 'daily',
      time_slots: [{ start: '22:00', end: '06:00', power_limit: 7.4, action: 'charge' }],
      target_soc: 80,
      timezone: 'Europe/Berlin',
    },
    {
      schedule_id: 'weekend',
      type: 'weekly',
      time_slots: [
        { day_of_week: ['sat', 'sun'], start: '10:00', end: '14:00', action: 'charge' },
        // On 2027-03-28 02:30 does not exist: the slot starts at 03:00 CEST (01:00Z).
        { day_of_week: ['sun'], start: '02:30', end: '03:30', power_limit: 3.7, action: 'charge' },
      ],
      target_soc: 90,
      timezone: 'Europe/Berlin',
    },
  ],
  rebootAt: Date.parse('2027-03-19T22:40:17.500Z'), // 23:40:17 CET, in the night slot
  forced: { date: '2027-03-19', arrive: '19:00', ev: { capacityKwh: 100, soc: 20, maxChargeKw: 11 } },
  quietEvenings: ['2027-03-27'],
};

const NEW_YORK: Plan = {
  name: 'new-york',
  zone: 'America/New_York',
  ratingKw: 11,
  seed: 2302,
  schedules: [
    {
      schedule_id: 'overnight',
      type: 'daily',
      time_slots: [{ start: '23:30', end: '06:30', action: 'charge' }],
      target_soc: 85,
      timezone: 'America/New_York',
    },
    {
      schedule_id: 'workdays',
      type: 'weekly',
      time_slots: [
        {
          day_of_week: ['mon', 'tue', 'wed', 'thu', 'fri'],
          start: '12:00',
          end: '13:30',
          power_limit: 7,
          action: 'charge',
        },
        // Wholly inside the gap on 2027-03-14 (02:00-03:00 is skipped): that Sunday it does not happen.
        { day_of_week: ['sun'], start: '02:15', end: '02:45', power_limit: 3, action: 'charge' },
      ],
      target_soc: 70,
      timezone: 'America/New_York',
    },
  ],
  rebootAt: Date.parse('2027-03-20T04:40:17.500Z'), // 00:40:17 EDT, in the overnight slot
  forced: { date: '2027-03-19', arrive: '20:00', ev: { capacityKwh: 100, soc: 15, maxChargeKw: 11 } },
  quietEvenings: ['2027-03-13'],
};

interface Visit {
  arriveAt: number;
  departAt: number;
  ev: { capacityKwh: number; soc: number; maxChargeKw: number; maxDischargeKw: number };
}

/** Instant of a local wall-clock time (never inside a DST gap here), whole seconds plus `seconds`. */
function localInstant(date: string, hhmm: string, zone: string, seconds = 0): number {
  const [h, m] = hhmm.split(':').map(Number);
  return DateTime.fromISO(date, { zone })
    .set({ hour: h ?? 0, minute: m ?? 0, second: seconds })
    .toMillis();
}

/** A vehicle every evening until the next morning, and one around midday on about half the days. */
function visitsOf(plan: Plan, from: number, to: number): Visit[] {
  const random = createSeededRandom(plan.seed);
  const ev = () => ({
    capacityKwh: pickOne(random, [40, 50, 58, 64, 77, 82, 100]),
    soc: Math.round(uniformBetween(random, 10, 75)),
    maxChargeKw: pickOne(random, [7.4, 11, 22]),
    maxDischargeKw: 11,
  });
  const minutesAfter = (date: DateTime, hhmm: string, spread: number) => {
    const [h, m] = hhmm.split(':').map(Number);
    return date
      .set({ hour: h ?? 0, minute: m ?? 0, second: 0 })
      .plus({ minutes: Math.floor(random() * spread) })
      .toMillis();
  };
  const visits: Visit[] = [];
  let date = DateTime.fromMillis(from, { zone: plan.zone }).startOf('day');
  for (; date.toMillis() < to; date = date.plus({ days: 1 })) {
    const next = date.plus({ days: 1 });
    const midday: Visit = {
      arriveAt: minutesAfter(date, '09:30', 150) + 13_000,
      departAt: minutesAfter(date, '13:00', 180) + 41_000,
      ev: ev(),
    };
    const evening: Visit = {
      arriveAt: minutesAfter(date, '16:30', 270) + 13_000,
      departAt: minutesAfter(next, '05:30', 180) + 41_000,
      ev: ev(),
    };
    if (random() < 0.5) visits.push(midday);
    const day = date.toISODate() ?? '';
    if (day === plan.forced.date) {
      visits.push({
        arriveAt: localInstant(day, plan.forced.arrive, plan.zone, 13),
        departAt: evening.departAt,
        ev: { ...plan.forced.ev, maxDischargeKw: 11 },
      });
    } else if (!plan.quietEvenings.includes(day)) visits.push(evening);
  }
  return visits.filter((v) => v.arriveAt > from + MINUTE && v.departAt < to - MINUTE);
}

/** One HTTP exchange the agent completed (an answer arrived), as its dispatcher saw it. */
interface Exchange {
  method: string;
  path: string;
  body: unknown;
  status: number;
  answer: unknown;
}

/** The agent's connection pool to the platform, recording every exchange that got an answer. */
function recordingDispatcher(
  ca: string,
  log: Exchange[],
): { dispatcher: Dispatcher; close(): Promise<void> } {
  const base = new Agent({ connect: { ca } });
  const dispatcher = base.compose((dispatch) => (options, handler) => {
    let status = 0;
    const chunks: Buffer[] = [];
    const body = typeof options.body === 'string' ? (JSON.parse(options.body) as unknown) : undefined;
    const recorder: Dispatcher.DispatchHandler = {
      onRequestStart: (controller, context) => handler.onRequestStart?.(controller, context),
      onRequestUpgrade: (controller, statusCode, headers, socket) =>
        handler.onRequestUpgrade?.(controller, statusCode, headers, socket),
      onResponseStart: (controller, statusCode, headers, statusMessage) => {
        status = statusCode;
        handler.onResponseStart?.(controller, statusCode, headers, statusMessage);
      },
      onResponseData: (controller, chunk) => {
        chunks.push(chunk);
        handler.onResponseData?.(controller, chunk);
      },
      onResponseEnd: (controller, trailers) => {
        let answer: unknown;
        try {
          answer = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        } catch {
          answer = undefined;
        }
        log.push({ method: options.method, path: options.path, body, status, answer });
        handler.onResponseEnd?.(controller, trailers);
      },
      onResponseError: (controller, error) => handler.onResponseError?.(controller, error),
    };
    return dispatch(options, recorder);
  });
  return { dispatcher, close: () => base.close() };
}

/**
 * The platform's address, in front of a platform that restarts on another port: forwards to it, or — with no
 * platform — takes each connection and hangs up after `hangupMs` of real time, as a balancer with no backend
 * does. The agents' loops therefore retry at a real-time pace (about ten attempts a second) while their own time
 * runs at thousands of times that speed: a month of retries at the agent's pace would be hundreds of
 * thousands of TLS handshakes.
 */
interface Gate {
  port: number;
  setTarget(port: number | undefined): void;
  cut(): void;
  close(): Promise<void>;
}

async function startGate(targetPort: number | undefined, hangupMs = 100): Promise<Gate> {
  let target = targetPort;
  const sockets = new Set<net.Socket>();
  const track = (socket: net.Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
  };
  const server = net.createServer((client) => {
    track(client);
    if (target === undefined) {
      setTimeout(() => client.destroy(), hangupMs).unref();
      return;
    }
    const upstream = net.connect(target, '127.0.0.1');
    track(upstream);
    upstream.on('close', () => client.destroy());
    client.on('close', () => upstream.destroy());
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const cut = () => {
    for (const socket of sockets) socket.destroy();
    sockets.clear();
  };
  return {
    port: typeof address === 'object' && address ? address.port : 0,
    setTarget(port) {
      target = port;
    },
    cut,
    close() {
      cut();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

interface Charger {
  plan: Plan;
  dir: string;
  hal: SimulatedHal;
  agent: AgentRuntime;
  deviceId: string;
  exchanges: Exchange[];
  dispatcher: { dispatcher: Dispatcher; close(): Promise<void> };
  /** Every power cap the agent set on the HAL, with the vehicle's SOC at that moment. */
  caps: Array<{ at: number; kw: number; soc: number | undefined }>;
  /** Every hardware state change. */
  states: Array<{ at: number; to: string }>;
  /** Telemetry the sampler produced, as handed to the uplink. */
  produced: TelemetryRecord[];
  schedules: OracleSchedule[];
  limits: OracleLimit[];
  visits: Visit[];
  /** Departures: the vehicle's SOC as it left, and what it arrived with. */
  departures: Array<{ at: number; soc: number; arrivedWith: number }>;
  failures: string[];
}

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

const currentCap = (c: Charger) => c.caps.at(-1)?.kw;
const socOf = (c: Charger) => {
  const ev = c.hal.vehicleOf(1);
  return ev ? Math.floor(ev.soc) : undefined;
};

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

    // The schedule and limit boundaries of the 30 days, from the oracle (soc unknown: the schedules' own caps).
    const boundariesOf = (c: Charger) => {
      const edges = new Set<number>();
      for (const s of c.schedules) {
        for (const o of occurrences(s, outageAt, RETURN_AT)) edges.add(o.startsAt).add(o.endsAt);
      }
      for (const l of c.limits) edges.add(Date.parse(l.starts_at)).add(Date.parse(l.ends_at));
      return [...edges].filter((t) => t > outageAt && t < RETURN_AT).sort((a, b) => a - b);
    };
    const expectedAt = (c: Charger, at: number, soc: number | undefined) =>
      oracleEvaluate(
        {
          ratingKw: c.plan.ratingKw,
          v2gCapable: false,
          schedules: c.schedules,
          limits: c.limits,
          ...(soc !== undefined ? { soc } : {}),
          now: at,
        },
        0,
      );

    // --- 30 days offline: a timeline of vehicles, probes and reboots, in order. ---
    type Action = { at: number; order: number; run: () => Promise<void> | void };
    const actions: Action[] = [];
    const causes = new Map<Charger, number[]>();
    for (const c of chargers) {
      const list: number[] = [];
      causes.set(c, list);
      for (const v of c.visits) {
        list.push(v.arriveAt, v.departAt);
        actions.push({
          at: v.arriveAt,
          order: 1,
          run: async () => {
            await c.hal.readConnectors(); // the simulation up to now, then the vehicle
            c.hal.plugIn(1, v.ev);
          },
        });
        actions.push({
          at: v.departAt,
          order: 1,
          run: async () => {
            await c.hal.readConnectors();
            c.departures.push({ at: v.departAt, soc: socOf(c) ?? -1, arrivedWith: v.ev.soc });
            c.hal.unplug(1);
          },
        });
      }
    }
    /** The cap and state must be what the oracle says, unless a change is under way (within the bound). */
    const probe = (c: Charger, at: number, why: string) =>
      actions.push({
        at,
        order: 2,
        run: async () => {
          const recent = (causes.get(c) ?? []).some((t) => t <= at && at < t + BOUND_MS);
          if (recent) return;
          const soc = socOf(c);
          const expected = expectedAt(c, at, soc);
          const cap = currentCap(c);
          const state = (await c.hal.readConnector(1)).state;
          const present = soc !== undefined;
          // Just reached the target: the agent sees it at its next sample (a minute at most); at the target
          // exactly, the cap may still be the slot's.
          const reaching =
            expected.maxPowerKw === 0 &&
            soc !== undefined &&
            expectedAt(c, at, soc - 1).maxPowerKw === cap &&
            expected.active.some((o) => o.targetSoc === soc);
          if (reaching) return;
          if (
            cap !== expected.maxPowerKw ||
            state !== (present && expected.maxPowerKw > 0 ? 'charging' : 'idle')
          ) {
            c.failures.push(
              `${why} at ${new Date(at).toISOString()}: cap ${cap} kW and ${state} (soc ${soc}), oracle ${expected.maxPowerKw} kW`,
            );
          }
        },
      });
    const boundaries = new Map<Charger, number[]>();
    /** Boundaries at which the cap must change (given the vehicle's SOC just before), and to what. */
    const due = new Map<Charger, Array<{ at: number; to: number }>>();
    for (const c of chargers) {
      const edges = boundariesOf(c);
      boundaries.set(c, edges);
      const changes: Array<{ at: number; to: number }> = [];
      due.set(c, changes);
      for (const b of edges) {
        probe(c, b - 1, 'just before a boundary');
        probe(c, b + BOUND_MS, 'a bound after a boundary');
        actions.push({
          at: b - 1,
          order: 3,
          run: () => {
            const soc = socOf(c);
            const from = expectedAt(c, b - 1, soc).maxPowerKw;
            const to = expectedAt(c, b, soc).maxPowerKw;
            // A vehicle a point below a target may reach it any moment: then the change is not the boundary's.
            const settled =
              soc === undefined ||
              (expectedAt(c, b - 1, soc + 1).maxPowerKw === from &&
                expectedAt(c, b, soc + 1).maxPowerKw === to);
            if (from !== to && settled) changes.push({ at: b, to });
          },
        });
      }
      for (let t = outageAt + 7 * MINUTE + 31_000; t < RETURN_AT; t += 20 * MINUTE) probe(c, t, 'periodic');
    }
    // The outbox within its cap, dropping only telemetry: checked every hour.
    let maxOutbox = 0;
    for (let t = outageAt + HOUR; t < RETURN_AT; t += HOUR) {
      actions.push({
        at: t,
        order: 3,
        run: () => {
          for (const c of chargers) {
            const size = c.agent.store.outbox.size();
            maxOutbox = Math.max(maxOutbox, size.items);
            if (size.items > OUTBOX_CAP.maxItems || size.bytes > OUTBOX_CAP.maxBytes)
              c.failures.push(`outbox over its cap at ${new Date(t).toISOString()}: ${JSON.stringify(size)}`);
            const dropped = c.agent.store.outbox.droppedCounts();
            if (dropped.event + dropped.charging_record + dropped.command_status > 0)
              c.failures.push(`dropped more than telemetry: ${JSON.stringify(dropped)}`);
          }
        },
      });
    }
    // The reboot: stop the runtime and start a new one on the same store at the same instant.
    const reboots = new Map<Charger, { openBefore: string[]; openAfter: string[] }>();
    for (const c of chargers) {
      actions.push({
        at: c.plan.rebootAt,
        order: 0,
        run: async () => {
          const before = {
            cap: currentCap(c),
            state: (await c.hal.readConnector(1)).state,
            outbox: c.agent.store.outbox.peek(1_000_000),
            open: c.agent.store.openSessions().map((s) => s.recordId),
            caps: c.caps.length,
            states: c.states.length,
            dropped: c.agent.store.outbox.droppedCounts(),
          };
          expect(before.state, `${c.plan.name} charges when it reboots`).toBe('charging');
          await c.agent.stop();
          c.agent = await startRuntime(c);
          await clock.advanceTo(c.plan.rebootAt); // its first passes, at the same instant
          expect(clock.now()).toBe(c.plan.rebootAt);
          // Nothing changed on the hardware: still charging, the same cap set again at most.
          expect(c.states.slice(before.states)).toEqual([]);
          expect((await c.hal.readConnector(1)).state).toBe('charging');
          expect(c.caps.slice(before.caps).every((x) => x.kw === before.cap)).toBe(true);
          // The outbox survived: everything still there, plus the boot event and the first sample (which, at
          // the cap, pushed out as many of the oldest telemetry records).
          const after = c.agent.store.outbox.peek(1_000_000);
          const dropped = c.agent.store.outbox.droppedCounts();
          const pushedOut = new Set(
            before.outbox
              .filter((i) => i.kind === 'telemetry')
              .slice(0, dropped.telemetry - before.dropped.telemetry)
              .map((i) => i.seq),
          );
          const kept = before.outbox.filter((i) => !pushedOut.has(i.seq)).map((i) => i.seq);
          expect(after.slice(0, kept.length).map((i) => i.seq)).toEqual(kept);
          expect(
            after
              .slice(kept.length)
              .map((i) => i.kind)
              .sort(),
          ).toEqual(['event', 'telemetry']);
          expect({ ...dropped, telemetry: 0 }).toEqual({ ...before.dropped, telemetry: 0 });
          reboots.set(c, {
            openBefore: before.open,
            openAfter: c.agent.store.openSessions().map((s) => s.recordId),
          });
        },
      });
    }
    actions.sort((a, b) => a.at - b.at || a.order - b.order);
    for (const action of actions) {
      await clock.advanceTo(action.at);
      await action.run();
    }
    await clock.advanceTo(RETURN_AT);

    // --- What the 30 days did on the hardware. ---
    for (const c of chargers) {
      const name = c.plan.name;
      expect(c.failures, name).toEqual([]);
      // Every boundary that changes the cap is met on time: the change is made at the boundary itself (timers
      // sit on nextChangeAt), within the bound in any case, and not before (the probe just before checked that).
      const changes = due.get(c) ?? [];
      for (const change of changes) {
        const made = c.caps.find((x) => x.at >= change.at);
        const what = `${name} boundary ${new Date(change.at).toISOString()}`;
        expect(made, what).toBeDefined();
        expect((made?.at ?? Number.POSITIVE_INFINITY) - change.at, what).toBeLessThanOrEqual(BOUND_MS);
        expect(made?.at, `${what} is met exactly`).toBe(change.at);
        expect(made?.kw, what).toBe(change.to);
      }
      // (Most boundaries: the others fall where a vehicle at its target holds the cap at 0 on both sides, or
      // where the limit ends inside a slot whose own cap is lower.)
      expect(changes.length, name).toBeGreaterThan((boundaries.get(c)?.length ?? 0) / 2);
      // Charging stops at target_soc. Every stop the agent made inside a slot, away from its boundaries, came
      // when the vehicle reached the lowest target of the slots in force — at it, not past it.
      const edges = new Set(boundaries.get(c));
      const lowestTarget = (at: number) =>
        Math.min(100, ...expectedAt(c, at, undefined).active.map((o) => o.targetSoc ?? 100));
      const targetStops = c.caps.filter(
        (x, i) =>
          x.kw === 0 &&
          x.soc !== undefined &&
          !edges.has(x.at) &&
          (c.caps[i - 1]?.kw ?? 0) > 0 &&
          expectedAt(c, x.at, undefined).maxPowerKw > 0,
      );
      expect(targetStops.length, `${name} vehicles reaching their target`).toBeGreaterThan(5);
      for (const x of targetStops) expect(x.soc, new Date(x.at).toISOString()).toBe(lowestTarget(x.at));
      // And no vehicle left fuller than the highest target of the slots it stood through (or than it came).
      for (const d of c.departures) {
        const visit = c.visits.find((v) => v.departAt === d.at) as Visit;
        const targets = c.schedules.flatMap((s) =>
          occurrences(s, visit.arriveAt, visit.departAt).map((o) => o.targetSoc ?? 100),
        );
        const ceiling = Math.max(d.arrivedWith, ...targets.filter((t) => t > 0));
        expect(d.soc, `${name} left at ${new Date(d.at).toISOString()}`).toBeLessThanOrEqual(ceiling);
      }
      // The reboot: the charging session carried on.
      const reboot = reboots.get(c);
      expect(reboot?.openBefore).toHaveLength(1);
      expect(reboot?.openAfter).toEqual(reboot?.openBefore);
    }

    // DST by hand, independent of the oracle: Berlin's night of 2027-03-27/28 (no vehicle that evening).
    const berlin = chargers[0] as Charger;
    const capsBetween = (c: Charger, from: string, to: string) =>
      c.caps
        .filter((x) => x.at >= Date.parse(from) && x.at < Date.parse(to))
        .map((x) => [new Date(x.at).toISOString(), x.kw]);
    expect(capsBetween(berlin, '2027-03-27T20:00:00Z', '2027-03-28T08:00:00Z')).toEqual([
      ['2027-03-27T21:00:00.000Z', 7.4], // 22:00 CET
      ['2027-03-28T01:00:00.000Z', 3.7], // 02:30 does not exist: 03:00 CEST
      ['2027-03-28T01:30:00.000Z', 7.4], // 03:30 CEST
      ['2027-03-28T04:00:00.000Z', 0], // 06:00 CEST
    ]);
    // New York's night of 2027-03-13/14: 23:30 EST to 06:30 EDT, and no 02:15-02:45 slot (wholly in the gap)...
    const newYork = chargers[1] as Charger;
    expect(capsBetween(newYork, '2027-03-14T03:00:00Z', '2027-03-14T12:00:00Z')).toEqual([
      ['2027-03-14T04:30:00.000Z', 11],
      ['2027-03-14T10:30:00.000Z', 0],
    ]);
    // ... while a week later the Sunday slot is there, in EDT.
    expect(capsBetween(newYork, '2027-03-21T06:00:00Z', '2027-03-21T07:00:00Z').map(([at]) => at)).toEqual([
      '2027-03-21T06:15:00.000Z',
      '2027-03-21T06:45:00.000Z',
    ]);

    // --- What is owed when the platform returns. ---
    const owed = new Map<Charger, OutboxItem[]>();
    for (const c of chargers) {
      const items = c.agent.store.outbox.peek(1_000_000);
      owed.set(c, items);
      const of = <T>(kind: OutboxItem['kind']) =>
        items.filter((i) => i.kind === kind).map((i) => i.payload as T);
      // Only the oldest telemetry was given up: what is left is the newest, without a gap.
      const telemetry = of<TelemetryRecord>('telemetry').map((r) => r.timestamp);
      const offline = c.produced.filter((r) => Date.parse(r.timestamp) >= outageAt).map((r) => r.timestamp);
      const dropped = c.agent.store.outbox.droppedCounts();
      expect(dropped.telemetry, c.plan.name).toBeGreaterThan(0);
      expect(dropped.telemetry + telemetry.length).toBe(offline.length);
      expect(telemetry).toEqual(offline.slice(offline.length - telemetry.length));
      expect(dropped).toMatchObject({ event: 0, charging_record: 0, command_status: 0 });
      // Every event: a plug and an unplug per vehicle, and the reboot's boot event.
      const events = of<DeviceEvent>('event').map((e) => [e.kind, e.timestamp]);
      const expectedEvents = [
        ...c.visits.flatMap((v) => [
          ['vehicle_plugged', new Date(v.arriveAt).toISOString()],
          ['vehicle_unplugged', new Date(v.departAt).toISOString()],
        ]),
        ['boot', new Date(c.plan.rebootAt).toISOString()],
      ].sort((a, b) => Date.parse(a[1] as string) - Date.parse(b[1] as string));
      expect(events).toEqual(expectedEvents);
      // A charging record for every vehicle that charged, the one across the reboot once.
      const records = of<ChargingRecordUpload>('charging_record');
      const charged = c.visits.filter((v) =>
        c.states.some((s) => s.to === 'charging' && s.at >= v.arriveAt && s.at < v.departAt),
      );
      expect(records.map((r) => [r.start_time <= r.end_time, r.energy > 0])).toEqual(
        charged.map(() => [true, true]),
      );
      expect(records.map((r) => Date.parse(r.end_time))).toEqual(charged.map((v) => v.departAt));
      const acrossReboot = records.filter(
        (r) => Date.parse(r.start_time) < c.plan.rebootAt && c.plan.rebootAt < Date.parse(r.end_time),
      );
      expect(acrossReboot.map((r) => r.record_id)).toEqual(reboots.get(c)?.openBefore);
      expect(items.filter((i) => i.kind === 'command_status')).toEqual([]);
      expect(items.length).toBeLessThanOrEqual(OUTBOX_CAP.maxItems);
    }

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

    for (const c of chargers) {
      const name = c.plan.name;
      const items = owed.get(c) ?? [];
      const sent = c.exchanges.slice(sentBefore.get(c)).filter((x) => x.status >= 200 && x.status < 300);
      const posted = (p: string) => sent.filter((x) => x.method === 'POST' && x.path.endsWith(p));
      // Telemetry: every owed record in one accepted batch, in order, none a duplicate on arrival.
      const batches = posted('/v1/device/telemetry/batch');
      for (const b of batches) expect((b.answer as { data: { duplicates: number } }).data.duplicates).toBe(0);
      const sentTelemetry = batches.flatMap((b) =>
        (b.body as { records: TelemetryRecord[] }).records.map((r) => r.timestamp),
      );
      const owedTelemetry = items
        .filter((i) => i.kind === 'telemetry')
        .map((i) => (i.payload as TelemetryRecord).timestamp);
      expect(sentTelemetry.slice(0, owedTelemetry.length), name).toEqual(owedTelemetry);
      // Over the whole run, no telemetry record went out twice, and each went out after the ones before it.
      const everything = c.exchanges
        .filter((x) => x.status === 200 && x.method === 'POST' && x.path.includes('/v1/device/telemetry'))
        .flatMap((x) =>
          x.path.endsWith('/batch')
            ? (x.body as { records: TelemetryRecord[] }).records.map((r) => Date.parse(r.timestamp))
            : [Date.parse((x.body as TelemetryRecord).timestamp)],
        );
      expect(
        everything.every((t, i) => i === 0 || t > (everything[i - 1] as number)),
        name,
      ).toBe(true);
      // Events and charging records: each owed one sent once, in order, none a duplicate on arrival.
      for (const [kind, p, key, list] of [
        ['event', '/v1/device/events', 'event_id', 'events'],
        ['charging_record', '/v1/device/charging-records', 'record_id', 'records'],
      ] as const) {
        const uploads = posted(p);
        for (const u of uploads)
          expect((u.answer as { data: { duplicates: number } }).data.duplicates).toBe(0);
        const ids = uploads.flatMap((u) =>
          ((u.body as Record<string, Array<Record<string, string>>>)[list] ?? []).map((e) => e[key]),
        );
        const owedIds = items
          .filter((i) => i.kind === kind)
          .map((i) => (i.payload as Record<string, string>)[key]);
        expect(ids.slice(0, owedIds.length), `${name} ${kind}`).toEqual(owedIds);
        expect(new Set(ids).size, `${name} ${kind}`).toBe(ids.length);
      }
      // And the platform holds it all, stored in the order it came: the owed telemetry of the 30 days and
      // nothing that was dropped, every owed event, every charging record.
      const stored = await openStoredData(platformDir);
      try {
        const rows = await stored.all<{ ts_ms: number | string }>(
          'SELECT ts_ms FROM telemetry WHERE device_id = ? AND ts_ms >= ? AND ts_ms < ? ORDER BY id',
          [c.deviceId, outageAt, returnedAt],
        );
        expect(
          rows.map((r) => new Date(Number(r.ts_ms)).toISOString()),
          name,
        ).toEqual(owedTelemetry.filter((t) => Date.parse(t) < returnedAt));
        const owedEvents = items
          .filter((i) => i.kind === 'event')
          .map((i) => (i.payload as DeviceEvent).event_id);
        const owedSet = new Set(owedEvents);
        const events = await stored.all<{ event_id: string }>(
          'SELECT event_id FROM device_events WHERE device_id = ? ORDER BY id',
          [c.deviceId],
        );
        expect(
          events.map((e) => e.event_id).filter((id) => owedSet.has(id)),
          name,
        ).toEqual(owedEvents);
      } finally {
        await stored.close();
      }
      const records = await back.store.listChargingRecords([tenant.operatorId], {
        device_id: c.deviceId,
        page: 1,
        size: 100,
      });
      const owedRecords = items
        .filter((i) => i.kind === 'charging_record')
        .map((i) => i.payload as ChargingRecordUpload);
      expect(records.items.map((r) => r.record_id).sort()).toEqual(
        owedRecords.map((r) => r.record_id).sort(),
      );
      for (const r of owedRecords) {
        expect(records.items.find((x) => x.record_id === r.record_id)).toMatchObject({
          energy: r.energy,
          start_time: r.start_time,
          end_time: r.end_time,
        });
      }
    }
    // The outbox was full for most of the month.
    expect(maxOutbox).toBe(OUTBOX_CAP.maxItems);
  }, 120_000);
});
