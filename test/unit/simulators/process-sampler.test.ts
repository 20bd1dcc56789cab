import { describe, expect, it } from 'vitest';
import { sampleHostCpu, stealPercent } from '../../../simulators/bench/process-sampler.js';

describe('host CPU steal', () => {
  it('is the stolen share of the CPU time between two readings', () => {
    expect(stealPercent({ total: 1_000, steal: 10 }, { total: 3_000, steal: 410 })).toBe(20);
    expect(stealPercent({ total: 1_000, steal: 10 }, { total: 1_000, steal: 10 })).toBe(0);
  });

  it('reads monotonic totals from /proc/stat', () => {
    const a = sampleHostCpu();
    const b = sampleHostCpu();
    expect(a.total).toBeGreaterThan(0);
    expect(b.total).toBeGreaterThanOrEqual(a.total);
    expect(b.steal).toBeGreaterThanOrEqual(a.steal);
    expect(a.steal).toBeLessThanOrEqual(a.total);
  });
});
