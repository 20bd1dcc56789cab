import autocannon from 'autocannon';

/**
 * Closed-loop HTTPS load from autocannon: `connections` keep-alive connections, each sending its next request as
 * soon as the previous answer arrives. autocannon is lean enough to drive a bare node:https server to that
 * server's own limit on the other core here (the ingest benchmark reports the bare server's CPU to show it),
 * which the undici-based generator used before could not: it topped out near 20 k req/s and so flattered the
 * ratio. The same generator measures the platform and the bare baseline, so their ratio compares servers.
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

/**
 * One round against `origin` (https; autocannon does not verify certificates, for either side alike).
 * `requests` is either one fixed request, which autocannon serialises once (what a server that ignores content,
 * the bare baseline, is driven with: the generator then spends nothing per request but the I/O), or a function
 * building each request as it is sent, so that every record is new to the platform. The function mutates and
 * returns autocannon's request object: a copy per request would cost the generator more than it costs the
 * platform to parse.
 */
export function runLoad(opts: {
  origin: string;
  connections: number;
  durationMs: number;
  requests: Request | ((request: Request) => Request);
  /** Requests per second over all connections; unset: as fast as the server answers. */
  rate?: number;
}): Promise<LoadRound> {
  const latencies: number[] = [];
  const statusCounts: Record<string, number> = {};
  const { requests } = opts;
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        // autocannon takes a fixed request's path from its url (a `path` option would be ignored).
        url: typeof requests === 'function' ? opts.origin : `${opts.origin}${requests.path}`,
        connections: opts.connections,
        pipelining: 1,
        duration: opts.durationMs / 1000,
        ...(opts.rate ? { overallRate: opts.rate } : {}),
        ...(typeof requests === 'function'
          ? {
              requests: [
                {
                  method: 'POST',
                  setupRequest: (request) =>
                    requests(request as unknown as Request) as unknown as typeof request,
                },
              ],
            }
          : { method: 'POST', headers: requests.headers, body: requests.body }),
      },
      (error, result) => {
        if (error) {
          reject(error);
          return;
        }
        // Requests that got no answer: connection errors and timeouts (autocannon counts both in `errors`).
        resolve({ errors: result.errors, statusCounts, seconds: result.duration, latencies });
      },
    );
    instance.on('response', (_client, statusCode, _bytes, responseTime) => {
      latencies.push(responseTime);
      statusCounts[statusCode] = (statusCounts[statusCode] ?? 0) + 1;
    });
  });
}

/** Rounds added up: requests and time summed, percentiles over every latency of every round. */
export function summarizeLoad(rounds: readonly LoadRound[]): LoadResult {
  const latencies = rounds.flatMap((r) => r.latencies).sort((a, b) => a - b);
  const seconds = rounds.reduce((s, r) => s + r.seconds, 0);
  const statusCounts: Record<string, number> = {};
  for (const r of rounds)
    for (const [status, n] of Object.entries(r.statusCounts))
      statusCounts[status] = (statusCounts[status] ?? 0) + n;
  const non200 = Object.entries(statusCounts).reduce((n, [status, k]) => n + (status === '200' ? 0 : k), 0);
  const pct = (p: number) =>
    Math.round((latencies[Math.min(latencies.length - 1, Math.ceil(p * latencies.length) - 1)] ?? 0) * 100) /
    100;
  return {
    requests: latencies.length,
    errors: rounds.reduce((s, r) => s + r.errors, 0) + non200,
    statusCounts,
    seconds: Math.round(seconds * 100) / 100,
    rps: seconds > 0 ? Math.round(latencies.length / seconds) : 0,
    p50_ms: pct(0.5),
    p99_ms: pct(0.99),
  };
}
