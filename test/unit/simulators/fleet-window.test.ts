import { describe, expect, it } from 'vitest';
import {
  type ChargerTally,
  FleetStats,
  failureCauseOf,
  SimulatedOutageError,
} from '../../../simulators/fleet/fleet-stats.js';

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
