import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  type ChargerLinkState,
  createChargerLink,
  issuedAtOf,
} from '../../../simulators/fleet/charger-link.js';
import { classifyFailure, SimulatedOutageError } from '../../../simulators/fleet/failure-classes.js';
import {
  halOptionsFor,
  outageWindowFor,
  paceHalOptions,
  planFleet,
} from '../../../simulators/fleet/fleet-mix.js';
import { fleetPlan } from '../../../simulators/fleet/fleet-options.js';
import { type ChargerTally, FleetStats } from '../../../simulators/fleet/fleet-stats.js';
import { LatencyHistogram } from '../../../simulators/fleet/latency-histogram.js';
import { requestKindOf } from '../../../simulators/fleet/request-kinds.js';
import { createTickWheel } from '../../../simulators/fleet/tick-wheel.js';

describe('fleet: request kinds and failure classes', () => {
  it('names every charger-surface request by its path', () => {
    expect(requestKindOf('POST', '/v1/device/register')).toBe('register');
    expect(requestKindOf('POST', '/v1/device/telemetry')).toBe('telemetry');
    expect(requestKindOf('POST', '/v1/device/telemetry/batch')).toBe('telemetry_batch');
    expect(requestKindOf('GET', '/v1/device/commands?wait=25')).toBe('poll');
    expect(requestKindOf('POST', '/v1/device/commands/cmd_1/status')).toBe('command_status');
    expect(requestKindOf('POST', '/v1/device/charging-records')).toBe('charging_records');
    expect(requestKindOf('GET', '/healthz')).toBe('other');
  });

  it('classifies failures: outage, aborted, 429, transient, refused', () => {
    expect(classifyFailure({ error: new SimulatedOutageError() }, false)).toBe('outage');
    expect(classifyFailure({ error: new Error('ECONNREFUSED') }, true)).toBe('outage');
    expect(classifyFailure({ error: Object.assign(new Error('x'), { name: 'AbortError' }) }, false)).toBe(
      'aborted',
    );
    expect(
      classifyFailure({ error: Object.assign(new Error('x'), { code: 'UND_ERR_DESTROYED' }) }, false),
    ).toBe('aborted');
    expect(classifyFailure({ status: 429 }, false)).toBe('rate_limited');
    expect(classifyFailure({ error: Object.assign(new Error('reset'), { code: 'ECONNRESET' }) }, false)).toBe(
      'transient',
    );
    expect(classifyFailure({ status: 503 }, false)).toBe('transient');
    expect(classifyFailure({ status: 401 }, false)).toBe('transient');
    expect(classifyFailure({ status: 409 }, false)).toBe('refused');
    expect(classifyFailure({ status: 400 }, true)).toBe('refused');
  });

  it('counts a transient failure as retried once the charger recovers, as an error if it never does', () => {
    const stats = new FleetStats();
    const a: ChargerTally = {};
    const b: ChargerTally = {};
    stats.requestFailed(a, 'telemetry', { status: 502 }, false);
    stats.requestFailed(a, 'poll', { error: new Error('other side closed') }, false);
    stats.requestSucceeded(a, 'telemetry_batch', 0, 5); // batch and single telemetry recover each other
    stats.requestSucceeded(a, 'heartbeat', 0, 5); // a heartbeat fetches commands too
    stats.requestFailed(b, 'events', { status: 503 }, false);
    stats.requestFailed(b, 'heartbeat', { error: new SimulatedOutageError() }, true);
    stats.requestFailed(b, 'charging_records', { status: 400 }, false);
    stats.requestFailed(b, 'heartbeat', { status: 429 }, false);
    stats.requestFailed(
      b,
      'poll',
      { error: Object.assign(new Error('aborted'), { name: 'AbortError' }) },
      false,
    );
    stats.settle([a, b]);
    expect(Object.fromEntries(stats.errors)).toEqual({
      'http_400:charging_records': 1,
      'unrecovered:events': 1,
    });
    expect(stats.recoveredTransient).toBe(2);
    expect(stats.retriedRateLimited).toBe(1);
    expect(stats.failures).toEqual({ outage: 1, aborted: 1, rate_limited: 1, transient: 3, refused: 1 });
    expect(stats.kinds.poll.requests).toBe(1); // the abort is not a request that failed
    expect(a.heartbeatOkAt).toBe(5);
  });

  it('once the stop begins, a request cut with no answer is aborted; an answer still counts', () => {
    const stats = new FleetStats();
    const t: ChargerTally = {};
    stats.stopping = true;
    const cut = Object.assign(
      new Error('Client network socket disconnected before secure TLS connection was established'),
      { code: 'ECONNRESET' },
    );
    expect(stats.requestFailed(t, 'events', { error: cut }, false)).toBe('aborted');
    expect(stats.requestFailed(t, 'telemetry', { status: 503 }, false)).toBe('transient');
    stats.settle([t]);
    expect(Object.fromEntries(stats.errors)).toEqual({ 'unrecovered:telemetry': 1 });
  });

  it('strict: every 429 and transient failure is an error', () => {
    const stats = new FleetStats({ strict: true });
    const t: ChargerTally = {};
    stats.requestFailed(t, 'heartbeat', { status: 429 }, false);
    stats.requestFailed(t, 'telemetry', { status: 500 }, false);
    stats.requestSucceeded(t, 'telemetry', 0, 1);
    expect(stats.errorCount).toBe(2);
  });

  it('measures command latency from when the operator issued the command', () => {
    expect(issuedAtOf({ command: 'stop', params: {}, expiry: '2026-03-01T10:15:00.000Z' })).toBe(
      Date.parse('2026-03-01T10:00:00.000Z'),
    );
    expect(
      issuedAtOf({
        command: 'set_power_limit',
        params: { starts_at: '2026-03-01T10:00:01.000Z', ends_at: '2026-03-01T11:00:00.000Z' },
        expiry: '2026-03-01T11:00:00.000Z',
      }),
    ).toBe(Date.parse('2026-03-01T10:00:01.000Z'));
    expect(issuedAtOf({ command: 'set_power_limit', params: {}, expiry: 'x' })).toBeUndefined();
  });
});

describe('fleet: latency histogram', () => {
  it('reports percentiles within 2 %, never below the true value', () => {
    const h = new LatencyHistogram();
    for (let i = 1; i <= 10_000; i++) h.record(i / 100); // 0.01 .. 100 ms
    const p50 = h.percentile(0.5);
    const p99 = h.percentile(0.99);
    expect(p50).toBeGreaterThanOrEqual(50);
    expect(p50).toBeLessThanOrEqual(50 * 1.02);
    expect(p99).toBeGreaterThanOrEqual(99);
    expect(p99).toBeLessThanOrEqual(99 * 1.02);
    expect(h.summary()).toMatchObject({ count: 10_000, max_ms: 100 });
    expect(new LatencyHistogram().percentile(0.99)).toBe(0);
  });
});

describe('fleet: the mix', () => {
  it('is reproducible from its seed, with exact shares, serials SIM-<seed>-<n> and a ramp', () => {
    const options = {
      count: 200,
      seed: 7,
      rampMs: 20_000,
      v2gShare: 0.2,
      outageShare: 0.05,
      durationMs: 600_000,
    };
    const plans = planFleet(options);
    expect(planFleet(options)).toEqual(plans);
    expect(planFleet({ ...options, seed: 8 })).not.toEqual(plans);
    expect(plans.map((p) => p.sn).slice(0, 2)).toEqual(['SIM-7-1', 'SIM-7-2']);
    expect(plans.filter((p) => p.v2g)).toHaveLength(40);
    expect(plans.every((p) => !p.v2g || p.ratedPowerKw === 11)).toBe(true);
    const twins = plans.filter((p) => p.connectors === 2).length;
    expect(twins).toBeGreaterThan(50);
    expect(twins).toBeLessThan(110);
    expect(plans[100]!.startAtMs).toBe(10_000);
    const outages = plans.filter((p) => p.outage);
    expect(outages).toHaveLength(10);
    for (const p of outages) {
      expect(p.outage!.startMs).toBeGreaterThanOrEqual(Math.max(60_000, p.startAtMs));
      expect(p.outage!.endMs).toBeLessThanOrEqual(300_000 + 120_000);
      expect(p.outage!.endMs - p.outage!.startMs).toBeGreaterThanOrEqual(30_000);
    }
    expect(outageWindowFor(undefined, 10_000).startMs).toEqual([40_000, 310_000]);
  });

  it('all-charging: manual vehicles and no faults; test overrides win', () => {
    const [plan] = planFleet({ count: 1, seed: 1, rampMs: 0, v2gShare: 0, outageShare: 0 });
    expect(halOptionsFor(plan!, { allCharging: true })).toMatchObject({
      vehicles: 'manual',
      meanTimeBetweenFaultsMs: Number.POSITIVE_INFINITY,
    });
    expect(halOptionsFor(plan!, { allCharging: false, overrides: { dwellMs: [1, 2] } })).toMatchObject({
      dwellMs: [1, 2],
      seed: plan!.seed,
    });
  });

  it('the sandbox pace: cars within minutes and a V2G charger however few chargers, unless the share is 0', () => {
    expect(paceHalOptions('realistic')).toEqual({});
    expect(paceHalOptions('sandbox')).toEqual({
      initialOccupancy: 0.75,
      meanVacancyMs: 120_000,
      dwellMs: [120_000, 480_000],
    });
    const base = { platformUrl: 'https://127.0.0.1:8443', seed: 3 };
    // round(count × 0.2) is 0 for one or two chargers.
    for (const count of [1, 2]) {
      expect(fleetPlan({ ...base, count }, 3).filter((p) => p.v2g)).toHaveLength(0);
      expect(fleetPlan({ ...base, count, pace: 'sandbox' }, 3).filter((p) => p.v2g)).toHaveLength(1);
      expect(
        fleetPlan({ ...base, count, pace: 'sandbox', v2gShare: 0 }, 3).filter((p) => p.v2g),
      ).toHaveLength(0);
    }
    // Where round(count × share) gives more, the pace changes nothing.
    expect(fleetPlan({ ...base, count: 20, pace: 'sandbox' }, 3)).toEqual(
      fleetPlan({ ...base, count: 20 }, 3),
    );
  });
});

describe('fleet: shared tick wheel', () => {
  it('runs each callback once per period, spread over the period, until cleared', () => {
    vi.useFakeTimers();
    try {
      const wheel = createTickWheel(10);
      const calls = [0, 0, 0];
      const handles = calls.map((_, i) => wheel.setInterval(() => calls[i]!++, 1_000));
      vi.advanceTimersByTime(100);
      expect(calls).toEqual([1, 0, 0]);
      vi.advanceTimersByTime(2_900);
      expect(calls).toEqual([3, 3, 3]);
      wheel.clearInterval(handles[1]);
      vi.advanceTimersByTime(1_000);
      expect(calls).toEqual([4, 3, 4]);
      wheel.close();
      vi.advanceTimersByTime(5_000);
      expect(calls).toEqual([4, 3, 4]);
    } finally {
      vi.useRealTimers();
    }
  });
});

describe('fleet: a charger’s link', () => {
  let server: Server;
  let origin: string;
  const pool = new Agent();
  beforeAll(async () => {
    server = createServer((req, res) => {
      // A long poll answers after a while; everything else at once.
      const delay = req.url?.startsWith('/v1/device/commands?') ? 2_000 : 0;
      setTimeout(() => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'), delay);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await pool.destroy();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it('observes requests, fails them while out and cuts the ones in flight when the outage begins', async () => {
    const stats = new FleetStats();
    const state: ChargerLinkState = { out: false };
    const link = createChargerLink(pool, () => pool, state, stats);
    const call = (method: 'GET' | 'POST', path: string) =>
      request(`${origin}${path}`, { method, dispatcher: link.dispatcher }).then(
        async (res) => {
          await res.body.text();
          return res.statusCode;
        },
        (error: Error) => error.name,
      );
    expect(await call('POST', '/v1/device/heartbeat')).toBe(200);
    const poll = call('GET', '/v1/device/commands?wait=25');
    await new Promise((r) => setTimeout(r, 100));
    link.setOut(true);
    expect(await poll).toBe('SimulatedOutageError');
    expect(await call('POST', '/v1/device/telemetry')).toBe('SimulatedOutageError');
    link.setOut(false);
    expect(await call('POST', '/v1/device/telemetry')).toBe(200);
    expect(stats.failures.outage).toBe(2);
    expect(stats.kinds.heartbeat).toEqual({ requests: 1, ok: 1, failed: 0 });
    expect(stats.kinds.telemetry).toEqual({ requests: 2, ok: 1, failed: 1 });
    expect(stats.latency.count).toBe(2);
    expect(state.inflight?.size ?? 0).toBe(0);
    expect(stats.errorCount).toBe(0);
  });
});
