import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';

/**
 * A closed-loop HTTPS load generator: `connections` keep-alive connections, each sending its next request as
 * soon as the previous answer arrives. The same generator measures the platform and the bare baseline, so
 * their ratio compares servers, not clients.
 */
export interface LoadResult {
  requests: number;
  errors: number;
  statusCounts: Record<string, number>;
  seconds: number;
  rps: number;
  p50_ms: number;
  p99_ms: number;
}

/** One timed run: what `summarizeLoad` adds up. */
export interface LoadRound {
  errors: number;
  statusCounts: Record<string, number>;
  seconds: number;
  /** Round-trip of every answered request, ms. */
  latencies: number[];
}

export type Request = { path: string; headers: Record<string, string>; body: string };

/** Keep-alive connections to `origin`, kept across rounds (their TLS handshakes are not part of a round). */
export function openLoadPool(origin: string, ca: string, connections: number): Pool {
  return new Pool(origin, { connect: { ca }, connections, pipelining: 1 });
}

export async function runLoad(opts: {
  pool: Pool;
  connections: number;
  durationMs: number;
  /** Builds request number `i`: path, headers and body. */
  next: (i: number) => Request;
}): Promise<LoadRound> {
  const { pool } = opts;
  const latencies: number[] = [];
  const statusCounts: Record<string, number> = {};
  let errors = 0;
  let i = 0;
  const start = performance.now();
  const deadline = start + opts.durationMs;
  const worker = async () => {
    while (performance.now() < deadline) {
      const req = opts.next(i++);
      const t0 = performance.now();
      try {
        const res = await pool.request({
          method: 'POST',
          path: req.path,
          headers: req.headers,
          body: req.body,
        });
        await res.body.dump();
        latencies.push(performance.now() - t0);
        statusCounts[res.statusCode] = (statusCounts[res.statusCode] ?? 0) + 1;
        if (res.statusCode !== 200) errors++;
      } catch {
        errors++;
      }
    }
  };
  await Promise.all(Array.from({ length: opts.connections }, worker));
  return { errors, statusCounts, seconds: (performance.now() - start) / 1000, latencies };
}

/** Rounds added up: requests and time summed, percentiles over every latency of every round. */
export function summarizeLoad(rounds: readonly LoadRound[]): LoadResult {
  const latencies = rounds.flatMap((r) => r.latencies).sort((a, b) => a - b);
  const seconds = rounds.reduce((s, r) => s + r.seconds, 0);
  const statusCounts: Record<string, number> = {};
  for (const r of rounds)
    for (const [status, n] of Object.entries(r.statusCounts))
      statusCounts[status] = (statusCounts[status] ?? 0) + n;
  const pct = (p: number) =>
    Math.round((latencies[Math.min(latencies.length - 1, Math.ceil(p * latencies.length) - 1)] ?? 0) * 100) /
    100;
  return {
    requests: latencies.length,
    errors: rounds.reduce((s, r) => s + r.errors, 0),
    statusCounts,
    seconds: Math.round(seconds * 100) / 100,
    rps: seconds > 0 ? Math.round(latencies.length / seconds) : 0,
    p50_ms: pct(0.5),
    p99_ms: pct(0.99),
  };
}
