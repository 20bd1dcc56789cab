import { describe, expect, it } from 'vitest';
import {
  flatMemory,
  notGrowing,
  type SoakSample,
  sampleTable,
  slope,
  steadyP99,
  summarizeSoak,
} from '../../../simulators/bench/soak-summary.js';

const sample = (at_s: number, over: Partial<SoakSample> = {}): SoakSample => ({
  at_s,
  phase: 'steady',
  platform_rss_mib: 150,
  platform_fds: 2_600,
  platform_cpu_s: at_s * 0.2,
  sim_rss_mib: 1_100,
  sim_heap_used_mib: 300,
  sim_active_handles: 12_000,
  online: 2_000,
  requests: 33_000,
  requests_per_s: 550,
  p50_ms: 2,
  p99_ms: 19,
  failed: 0,
  errors: 0,
  ...over,
});

describe('soak: criteria', () => {
  it('flat memory: end within max(50 MiB, 15 %) of start', () => {
    expect(flatMemory(150, 199).pass).toBe(true);
    expect(flatMemory(150, 201).pass).toBe(false);
    expect(flatMemory(1_000, 1_149).pass).toBe(true);
    expect(flatMemory(1_000, 1_151).pass).toBe(false);
    expect(flatMemory(1_000, 900)).toMatchObject({ pass: true, detail: expect.stringContaining('-100') });
  });

  it('handles not growing: end within max(16, 5 %) of start', () => {
    expect(notGrowing(100, 116).pass).toBe(true);
    expect(notGrowing(100, 117).pass).toBe(false);
    expect(notGrowing(12_000, 12_600).pass).toBe(true);
    expect(notGrowing(12_000, 12_601).pass).toBe(false);
  });

  it('steady p99: max within 3 × median, or under 100 ms', () => {
    expect(steadyP99([10, 12, 30]).pass).toBe(true);
    expect(steadyP99([10, 12, 90]).pass).toBe(true); // 7.5 × median, but under 100 ms
    expect(steadyP99([100, 110, 330]).pass).toBe(true);
    expect(steadyP99([100, 110, 331]).pass).toBe(false);
    expect(steadyP99([]).pass).toBe(false);
  });

  it('slope: least squares, 0 without a trend to fit', () => {
    expect(
      slope([
        [0, 1],
        [1, 3],
        [2, 5],
      ]),
    ).toBeCloseTo(2);
    expect(slope([[1, 7]])).toBe(0);
  });
});

describe('soak: summary of the samples', () => {
  it('starts at the first steady sample, ends at the last, and fails the criterion that broke', () => {
    const samples = [
      sample(40, { phase: 'ramp', sim_rss_mib: 900, p99_ms: 900 }),
      sample(100),
      sample(160, { p99_ms: 25 }),
      sample(220, { sim_rss_mib: 1_300, platform_fds: 2_700, failed: 3, errors: 1 }),
    ];
    const s = summarizeSoak(samples);
    expect(s).toMatchObject({
      steady_samples: 3,
      steady_from_s: 100,
      steady_until_s: 220,
      platform: { rss_mib: { start: 150, end: 150 }, fds: { start: 2_600, end: 2_700 }, cpu_cores: 0.2 },
      simulator: { rss_mib: { start: 1_100, end: 1_300, max: 1_300 } },
      window_p99_ms: { min: 19, median: 19, max: 25 },
      requests_steady: 99_000,
      failed_requests_steady: 3,
      errors_steady: 1,
      pass: false,
    });
    expect(s.verdicts.simulator_memory_flat.pass).toBe(false);
    expect(s.verdicts.platform_memory_flat.pass).toBe(true);
    expect(s.verdicts.platform_fds_not_growing.pass).toBe(true); // +100 of 2,600: within 5 %
    expect(s.verdicts.p99_steady.pass).toBe(true); // the ramp's 900 ms is not a steady window
    expect(s.simulator.rss_trend_mib_per_10_min).toBeGreaterThan(0);
    expect(() => summarizeSoak([sample(40, { phase: 'ramp' })])).toThrow(/no steady sample/);
  });

  it('prints one table row per sample', () => {
    const table = sampleTable([sample(40, { phase: 'ramp' }), sample(100)]).split('\n');
    expect(table).toHaveLength(4);
    expect(table[0]).toMatch(/^\| +t \(s\) \| +phase \|/);
    expect(table[2]).toMatch(/^\| +40 \| +ramp \| +150\.0 \|/);
  });
});
