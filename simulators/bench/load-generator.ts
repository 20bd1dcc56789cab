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

export async function runLoad(opts: {
  origin: string;
  ca: string;
  connections: number;
  durationMs: number;
  /** Builds request number `i`: path, headers and body. */
  next: (i: number) => { path: string; headers: Record<string, string>; body: string };
}): Promise<LoadResult> {
  const pool = new Pool(opts.origin, {
    connect: { ca: opts.ca },
    connections: opts.connections,
    pipelining: 1,
  });
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
  const seconds = (performance.now() - start) / 1000;
  await pool.close();
  latencies.sort((a, b) => a - b);
  const pct = (p: number) =>
    Math.round((latencies[Math.min(latencies.length - 1, Math.ceil(p * latencies.length) - 1)] ?? 0) * 100) /
    100;
  return {
    requests: latencies.length,
    errors,
    statusCounts,
    seconds: Math.round(seconds * 100) / 100,
    rps: Math.round(latencies.length / seconds),
    p50_ms: pct(0.5),
    p99_ms: pct(0.99),
  };
}
