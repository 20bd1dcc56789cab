/**
 * The soak's figures and verdicts (issue 6, item 4), from its samples: pure, so the criteria are tested apart
 * from a 30-minute run.
 *
 * Criteria (each judged on the steady samples, those whose window began once the ramp was over; "start" is the
 * first of them, "end" the last):
 * - flat memory, for the platform and the simulator: end RSS ≤ start RSS + max(50 MiB, 15 % of start). The
 *   50 MiB floor absorbs allocator and GC noise in the small platform process; 15 % is how far a ~1 GiB
 *   simulator heap swings between major collections. A leak of 100 bytes per request at 550 requests a second
 *   grows ~100 MiB in 30 minutes: over the floor.
 * - open handles not growing: the platform's file descriptors and the simulator's active resources (timers,
 *   sockets) at the end ≤ start + max(16, 5 %): connections and timers come and go, a leak only adds.
 * - steady p99: the highest window p99 ≤ 3 × the median window p99, or under 100 ms.
 */

const MiB = 1_048_576;

export interface SoakSample {
  /** Seconds since the fleet started. */
  at_s: number;
  phase: 'ramp' | 'steady';
  platform_rss_mib: number;
  platform_fds: number;
  /** Platform CPU seconds since its start (user + system). */
  platform_cpu_s: number;
  sim_rss_mib: number;
  sim_heap_used_mib: number;
  sim_active_handles: number;
  online: number;
  /** Requests that ended in this sample's window, and their rate. */
  requests: number;
  requests_per_s: number;
  p50_ms: number;
  p99_ms: number;
  /** Failed requests in the window (outages aside: the soak has none), and errors counted in it. */
  failed: number;
  errors: number;
}

export interface Verdict {
  pass: boolean;
  /** What was compared, in words and figures. */
  detail: string;
}

const round1 = (x: number) => Math.round(x * 10) / 10;

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

export function flatMemory(startMiB: number, endMiB: number): Verdict {
  const allowance = Math.max(50, 0.15 * startMiB);
  return {
    pass: endMiB <= startMiB + allowance,
    detail: `${round1(startMiB)} → ${round1(endMiB)} MiB (${endMiB >= startMiB ? '+' : ''}${round1(endMiB - startMiB)}; allowed +${round1(allowance)})`,
  };
}

export function notGrowing(start: number, end: number): Verdict {
  const allowance = Math.max(16, Math.ceil(0.05 * start));
  return {
    pass: end <= start + allowance,
    detail: `${start} → ${end} (allowed +${allowance})`,
  };
}

export function steadyP99(windowP99s: readonly number[]): Verdict {
  if (windowP99s.length === 0) return { pass: false, detail: 'no steady window' };
  const max = Math.max(...windowP99s);
  const med = median(windowP99s);
  return {
    pass: max <= 3 * med || max < 100,
    detail: `window p99 max ${round1(max)} ms, median ${round1(med)} ms (pass: max ≤ 3 × median or < 100 ms)`,
  };
}

/** Least-squares slope of `y` over `x`, per unit of `x`; 0 with fewer than two points. */
export function slope(points: ReadonlyArray<readonly [number, number]>): number {
  const n = points.length;
  if (n < 2) return 0;
  const mx = points.reduce((a, [x]) => a + x, 0) / n;
  const my = points.reduce((a, [, y]) => a + y, 0) / n;
  let num = 0;
  let den = 0;
  for (const [x, y] of points) {
    num += (x - mx) * (y - my);
    den += (x - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

export function summarizeSoak(samples: readonly SoakSample[]) {
  const steady = samples.filter((s) => s.phase === 'steady');
  if (steady.length === 0) throw new Error('no steady sample: run longer than one interval after the ramp');
  const start = steady[0]!;
  const end = steady[steady.length - 1]!;
  const p99s = steady.map((s) => s.p99_ms);
  // Memory trend per 10 minutes over every steady sample: less noisy than two points, for the reader.
  const per10Min = (pick: (s: SoakSample) => number) =>
    round1(slope(steady.map((s) => [s.at_s / 600, pick(s)] as const)));
  const verdicts = {
    platform_memory_flat: flatMemory(start.platform_rss_mib, end.platform_rss_mib),
    simulator_memory_flat: flatMemory(start.sim_rss_mib, end.sim_rss_mib),
    platform_fds_not_growing: notGrowing(start.platform_fds, end.platform_fds),
    simulator_handles_not_growing: notGrowing(start.sim_active_handles, end.sim_active_handles),
    p99_steady: steadyP99(p99s),
  };
  const steadySeconds = end.at_s - start.at_s;
  return {
    steady_samples: steady.length,
    steady_from_s: start.at_s,
    steady_until_s: end.at_s,
    platform: {
      rss_mib: {
        start: start.platform_rss_mib,
        end: end.platform_rss_mib,
        max: maxOf(steady, 'platform_rss_mib'),
      },
      rss_trend_mib_per_10_min: per10Min((s) => s.platform_rss_mib),
      fds: { start: start.platform_fds, end: end.platform_fds, max: maxOf(steady, 'platform_fds') },
      cpu_cores:
        steadySeconds > 0
          ? Math.round(((end.platform_cpu_s - start.platform_cpu_s) / steadySeconds) * 100) / 100
          : 0,
    },
    simulator: {
      rss_mib: { start: start.sim_rss_mib, end: end.sim_rss_mib, max: maxOf(steady, 'sim_rss_mib') },
      rss_trend_mib_per_10_min: per10Min((s) => s.sim_rss_mib),
      heap_used_mib: { start: start.sim_heap_used_mib, end: end.sim_heap_used_mib },
      active_handles: {
        start: start.sim_active_handles,
        end: end.sim_active_handles,
        max: maxOf(steady, 'sim_active_handles'),
      },
    },
    window_p99_ms: { min: Math.min(...p99s), median: median(p99s), max: Math.max(...p99s) },
    window_p50_ms: {
      min: Math.min(...steady.map((s) => s.p50_ms)),
      max: Math.max(...steady.map((s) => s.p50_ms)),
    },
    requests_steady: steady.reduce((a, s) => a + s.requests, 0),
    failed_requests_steady: steady.reduce((a, s) => a + s.failed, 0),
    errors_steady: steady.reduce((a, s) => a + s.errors, 0),
    verdicts,
    pass: Object.values(verdicts).every((v) => v.pass),
  };
}
export type SoakSummary = ReturnType<typeof summarizeSoak>;

function maxOf(samples: readonly SoakSample[], key: keyof SoakSample): number {
  return Math.max(...samples.map((s) => s[key] as number));
}

const COLUMNS: Array<[string, (s: SoakSample) => string]> = [
  ['t (s)', (s) => String(s.at_s)],
  ['phase', (s) => s.phase],
  ['platform RSS MiB', (s) => s.platform_rss_mib.toFixed(1)],
  ['platform fds', (s) => String(s.platform_fds)],
  ['sim RSS MiB', (s) => s.sim_rss_mib.toFixed(1)],
  ['sim heap MiB', (s) => s.sim_heap_used_mib.toFixed(1)],
  ['sim handles', (s) => String(s.sim_active_handles)],
  ['online', (s) => String(s.online)],
  ['req/s', (s) => String(s.requests_per_s)],
  ['p50 ms', (s) => s.p50_ms.toFixed(1)],
  ['p99 ms', (s) => s.p99_ms.toFixed(1)],
  ['failed', (s) => String(s.failed)],
  ['errors', (s) => String(s.errors)],
];

/** The samples as a Markdown table (readable on a terminal too). */
export function sampleTable(samples: readonly SoakSample[]): string {
  const rows = samples.map((s) => COLUMNS.map(([, cell]) => cell(s)));
  const head = COLUMNS.map(([name]) => name);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: readonly string[]) => `| ${cells.map((c, i) => c.padStart(widths[i]!)).join(' | ')} |`;
  return [line(head), `|${widths.map((w) => `${'-'.repeat(w + 1)}:`).join('|')}|`, ...rows.map(line)].join(
    '\n',
  );
}

export const toMiB = (bytes: number) => Math.round((bytes / MiB) * 10) / 10;
