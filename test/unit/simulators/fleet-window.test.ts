import { describe, expect, it } from 'vitest';
import { failureCauseOf, SimulatedOutageError } from '../../../simulators/fleet/failure-classes.js';
import type { FleetLiveStats } from '../../../simulators/fleet/fleet-live.js';
import { mergeLive } from '../../../simulators/fleet/fleet-merge.js';
import { type ChargerTally, FleetStats } from '../../../simulators/fleet/fleet-stats.js';
import { LatencyHistogram } from '../../../simulators/fleet/latency-histogram.js';
import { mergeWindowParts, summarizeWindow } from '../../../simulators/fleet/stats-window.js';

describe('fleet: stats windows', () => {
  it('counts each window on its own: requests, latency, failures by class and cause, new errors', () => {
    let now = 1_000;
    const stats = new FleetStats({ now: () => now });
    const tally: ChargerTally = {};

    // Window 1: slow answers, a refused connection, a 503 and a 429.
    for (let i = 0; i < 100; i++) stats.requestSucceeded(tally, 'telemetry', 0, 200);
    stats.requestFailed(
      tally,
      'heartbeat',
      { error: Object.assign(new Error('x'), { code: 'ECONNREFUSED' }) },
      false,
    );
    stats.requestFailed(tally, 'telemetry', { status: 503 }, false);
    stats.requestFailed(tally, 'poll', { status: 429 }, false);
    now = 61_000;
    const first = stats.takeWindow();
    expect(first).toMatchObject({
      from_ms: 1_000,
      until_ms: 61_000,
      requests: 103,
      failures: { transient: 2, rate_limited: 1, refused: 0, outage: 0, aborted: 0 },
      failed_by_cause: { ECONNREFUSED: 1, http_503: 1, http_429: 1 },
      errors: 0,
    });
    expect(first.latency_ms.count).toBe(100);
    expect(first.latency_ms.p99_ms).toBeGreaterThanOrEqual(200);

    // Window 2: fast answers only, one refusal (an error), one long poll (counted, not timed), one aborted.
    for (let i = 0; i < 50; i++) stats.requestSucceeded(tally, 'heartbeat', 0, 5);
    stats.requestSucceeded(tally, 'poll', 0, 25_000);
    stats.requestFailed(tally, 'events', { status: 400 }, false);
    stats.requestFailed(
      tally,
      'poll',
      { error: Object.assign(new Error('aborted'), { name: 'AbortError' }) },
      false,
    );
    now = 121_000;
    const second = stats.takeWindow();
    expect(second).toMatchObject({
      from_ms: 61_000,
      until_ms: 121_000,
      requests: 52,
      failures: { refused: 1, aborted: 1, transient: 0, rate_limited: 0 },
      failed_by_cause: { http_400: 1 },
      errors: 1,
    });
    expect(second.latency_ms.count).toBe(50);
    expect(second.latency_ms.p99_ms).toBeLessThan(10);

    // An empty window; the totals still hold everything.
    expect(stats.takeWindow()).toMatchObject({ requests: 0, latency_ms: { count: 0, p99_ms: 0 }, errors: 0 });
    expect(stats.totalRequests).toBe(155);
    expect(stats.latency.count).toBe(150);
    expect(stats.failures).toMatchObject({ transient: 2, rate_limited: 1, refused: 1, aborted: 1 });
  });

  it('names the cause of a failure: status, else error code, else error name', () => {
    expect(failureCauseOf({ status: 502 })).toBe('http_502');
    expect(failureCauseOf({ error: new SimulatedOutageError() })).toBe('ECONNREFUSED');
    expect(failureCauseOf({ error: new Error('no complete answer within 5000 ms') })).toBe('Error');
    expect(failureCauseOf({ error: undefined })).toBe('unknown');
  });
});

describe('fleet: merging what worker threads measured', () => {
  it('a histogram survives its snapshot (a structured clone) unchanged', () => {
    const h = new LatencyHistogram();
    for (let i = 1; i <= 1000; i++) h.record(i / 10);
    const copy = LatencyHistogram.from(structuredClone(h.snapshot()));
    expect(copy.summary()).toEqual(h.summary());
    copy.record(5_000);
    expect(h.max).toBe(100); // the snapshot is a copy, not a view
  });

  it('merges windows of the same interval: sums, and percentiles of all samples together', () => {
    let now = 0;
    const fast = new FleetStats({ now: () => now });
    const slow = new FleetStats({ now: () => now + 3 });
    const tally: ChargerTally = {};
    // 99 fast answers in one worker, one slow answer and two failures in the other.
    for (let i = 0; i < 99; i++) fast.requestSucceeded(tally, 'telemetry', 0, 2);
    slow.requestSucceeded(tally, 'telemetry', 0, 900);
    slow.requestFailed(tally, 'telemetry', { status: 503 }, false);
    fast.requestFailed(tally, 'heartbeat', { status: 503 }, false);
    slow.requestFailed(tally, 'events', { status: 400 }, false);
    now = 60_000;
    const merged = summarizeWindow(mergeWindowParts([fast.takeWindowParts(), slow.takeWindowParts()]));
    expect(merged).toMatchObject({
      from_ms: 0,
      until_ms: 60_003,
      requests: 103,
      failures: { transient: 2, refused: 1, rate_limited: 0, outage: 0, aborted: 0 },
      failed_by_cause: { http_503: 2, http_400: 1 },
      errors: 1,
    });
    expect(merged.latency_ms.count).toBe(100);
    expect(merged.latency_ms.p50_ms).toBeLessThanOrEqual(2.05);
    expect(merged.latency_ms.p99_ms).toBeLessThanOrEqual(2.05); // 99 of 100 are fast
    expect(merged.latency_ms.max_ms).toBe(900);
  });
});

describe('fleet: live stats of worker threads', () => {
  const live = (over: Partial<FleetLiveStats>): FleetLiveStats => ({
    elapsed_s: 0,
    count: 0,
    started: 10,
    registered: 10,
    online: 9,
    out: 1,
    requests: 100,
    requests_per_s: 20,
    errors: 0,
    retried: 1,
    outage_failures: 2,
    latency_ms: { p50: 0, p99: 0 },
    event_loop_delay_ms: { p99: 12, max: 40 },
    command_latency_ms: { count: 0, p50: 0, p99: 0 },
    telemetry: { produced: 50, delivered: 48 },
    rss_bytes: 0,
    per_charger_bytes: 0,
    ...over,
  });
  const histogram = (...values: number[]) => {
    const h = new LatencyHistogram();
    for (const v of values) h.record(v);
    return h.snapshot();
  };

  it('adds up counts, takes the worst loop delay, the percentiles of all samples and the process RSS', () => {
    const merged = mergeLive(
      [
        {
          live: live({ errors: 2, outbox_backlog: 5, active_handles: 100 }),
          latency: histogram(...Array<number>(99).fill(1)),
          command: histogram(50),
        },
        {
          live: live({ event_loop_delay_ms: { p99: 30, max: 35 }, outbox_backlog: 0, active_handles: 90 }),
          latency: histogram(500),
          command: histogram(70),
        },
      ],
      { count: 20, elapsedS: 12.34, rss: 300 * 2 ** 20, rssStart: 100 * 2 ** 20 },
    );
    expect(merged).toMatchObject({
      elapsed_s: 12.3,
      count: 20,
      started: 20,
      registered: 20,
      online: 18,
      out: 2,
      requests: 200,
      requests_per_s: 40,
      errors: 2,
      retried: 2,
      outage_failures: 4,
      event_loop_delay_ms: { p99: 30, max: 40 },
      telemetry: { produced: 100, delivered: 96 },
      outbox_backlog: 5,
      active_handles: 190,
      rss_bytes: 300 * 2 ** 20,
      per_charger_bytes: Math.round((200 * 2 ** 20) / 20),
    });
    expect(merged.latency_ms.p99).toBeLessThanOrEqual(1.1); // 99 of 100 samples are 1 ms
    expect(merged.command_latency_ms).toMatchObject({ count: 2 });
    expect(merged.command_latency_ms.p99).toBeGreaterThanOrEqual(70);
  });

  it('leaves out the backlog and handles unless every worker reported them', () => {
    const h = histogram(1);
    const merged = mergeLive(
      [
        { live: live({ outbox_backlog: 5, active_handles: 7 }), latency: h, command: h },
        { live: live({}), latency: h, command: h },
      ],
      { count: 20, elapsedS: 1, rss: 0, rssStart: 0 },
    );
    expect(merged.outbox_backlog).toBeUndefined();
    expect(merged.active_handles).toBeUndefined();
  });
});
