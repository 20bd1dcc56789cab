import { describe, expect, it } from 'vitest';
import {
  accumulateEnergy,
  type EnergyBucket,
  MAX_GAP_MS,
  type PowerSample,
} from '../../../platform/domain/energy.js';
import {
  appendedRollupDeltas,
  floorToRollup,
  ROLLUP_MS,
  recomputeRollupRun,
  rollupAlignedRange,
  sumRollups,
  touchedRollupRuns,
} from '../../../platform/domain/energy-rollup.js';

const MIN = 60_000;
const T0 = Date.UTC(2026, 0, 1);
const s = (minutes: number, power: number | null, connector_id = 1): PowerSample => ({
  connector_id,
  ts_ms: T0 + minutes * MIN,
  power,
});
/** [minutes after T0, imported, exported, samples, max, power sum], rounded. */
const shape = (buckets: Iterable<EnergyBucket>) =>
  [...buckets]
    .sort((a, b) => a.start_ms - b.start_ms)
    .map((b) => [
      (b.start_ms - T0) / MIN,
      Math.round(b.imported_kwh * 1e6) / 1e6,
      Math.round(b.exported_kwh * 1e6) / 1e6,
      b.samples,
      b.max_power,
      Math.round(b.power_sum * 1e6) / 1e6,
    ]);

describe('appendedRollupDeltas: samples after the newest rolled-up one', () => {
  it.each([
    {
      name: 'the first samples of a connector: counted, with the intervals between them',
      last: undefined,
      samples: [s(1, 60), s(2, 0)],
      want: [[0, 1, 0, 2, 60, 60]],
    },
    {
      name: 'the interval from the last sample is added; the last sample is not counted again',
      last: s(1, 60),
      samples: [s(3, 0)],
      want: [[0, 2, 0, 1, 0, 0]],
    },
    {
      name: 'an interval from the last sample crossing a bucket boundary is split',
      last: s(13, 60),
      samples: [s(17, 30)],
      want: [
        [0, 2, 0, 0, 0, 0],
        [15, 2, 0, 1, 30, 30],
      ],
    },
    {
      name: 'a gap over MAX_GAP_MS from the last sample adds no energy',
      last: s(0, 60),
      samples: [s(6, 60)],
      want: [[0, 0, 0, 1, 60, 60]],
    },
    {
      name: 'exports from negative power',
      last: s(0, -30),
      samples: [s(2, 0)],
      want: [[0, 0, 1, 1, 0, 0]],
    },
    { name: 'nothing appended, nothing added', last: s(0, 60), samples: [], want: [] },
  ])('$name', ({ last, samples, want }) => {
    expect(shape(appendedRollupDeltas(last, samples))).toEqual(want);
  });

  it('adding the deltas of each append equals integrating the whole stream', () => {
    const stream = [s(0, 10), s(4, 20), s(9, -5), s(14, 30), s(16, 0), s(30, 40), s(33, 40), s(44, 0)];
    const sum = new Map<number, EnergyBucket>();
    for (let i = 0; i < stream.length; i++) {
      for (const d of appendedRollupDeltas(stream[i - 1], [stream[i]!])) {
        const b = sum.get(d.start_ms);
        if (!b) sum.set(d.start_ms, { ...d });
        else {
          b.imported_kwh += d.imported_kwh;
          b.exported_kwh += d.exported_kwh;
          b.power_sum += d.power_sum;
          b.samples += d.samples;
          b.max_power = Math.max(b.max_power, d.max_power);
        }
      }
    }
    const whole = accumulateEnergy(new Map(), stream, {
      startMs: T0,
      endMs: T0 + 60 * MIN,
      intervalMs: ROLLUP_MS,
    });
    expect(shape(sum.values())).toEqual(shape(whole.values()));
  });
});

describe('touchedRollupRuns: the buckets a late sample can change', () => {
  it.each([
    { name: 'mid-bucket: only its own bucket', minutes: [7], want: [[0, 15]] },
    { name: 'near a boundary: the neighbour within MAX_GAP_MS too', minutes: [12], want: [[0, 30]] },
    { name: 'just after a boundary: the bucket before', minutes: [16], want: [[0, 30]] },
    {
      name: 'far apart: separate runs',
      minutes: [7, 67],
      want: [
        [0, 15],
        [60, 75],
      ],
    },
    { name: 'adjacent runs merge', minutes: [7, 22, 37], want: [[0, 45]] },
  ])('$name', ({ minutes, want }) => {
    const runs = touchedRollupRuns(minutes.map((m) => T0 + m * MIN));
    expect(runs.map((r) => [(r.startMs - T0) / MIN, (r.endMs - T0) / MIN])).toEqual(want);
  });

  it('covers every change a sample can make: MAX_GAP_MS either side', () => {
    const ts = T0 + 7 * MIN + 30_000;
    const [run] = touchedRollupRuns([ts]);
    expect(run!.startMs).toBeLessThanOrEqual(ts - MAX_GAP_MS);
    expect(run!.endMs).toBeGreaterThan(ts + MAX_GAP_MS);
  });
});

describe('recomputeRollupRun', () => {
  it('takes intervals that cross into the run from a sample before it, without counting that sample', () => {
    const run = { startMs: T0 + 15 * MIN, endMs: T0 + 30 * MIN };
    expect(shape(recomputeRollupRun([s(13, 60), s(17, 0)], run))).toEqual([[15, 2, 0, 1, 0, 0]]);
  });

  it('ends the interval that crosses out of the run at the first sample after it', () => {
    const run = { startMs: T0, endMs: T0 + 15 * MIN };
    expect(shape(recomputeRollupRun([s(13, 60), s(17, 0)], run))).toEqual([[0, 2, 0, 1, 60, 60]]);
  });
});

describe('series from rollups', () => {
  it.each([
    { name: 'aligned range unchanged', from: 0, to: 60, want: [0, 60] },
    { name: 'start floored, end ceiled to 15 minutes', from: 12, to: 18, want: [0, 30] },
    { name: 'a range inside one bucket becomes that bucket', from: 16, to: 17, want: [15, 30] },
  ])('rollupAlignedRange: $name', ({ from, to, want }) => {
    const r = rollupAlignedRange(T0 + from * MIN, T0 + to * MIN);
    expect([(r.startMs - T0) / MIN, (r.endMs - T0) / MIN]).toEqual(want);
  });

  it('sumRollups adds energy, sums and counts and keeps the greatest power of each series bucket', () => {
    const b = (m: number, imp: number, max: number, n: number): EnergyBucket => ({
      start_ms: T0 + m * MIN,
      imported_kwh: imp,
      exported_kwh: 0.5,
      power_sum: n * 10,
      max_power: max,
      samples: n,
    });
    const out = sumRollups(
      [b(0, 1, 11, 2), b(15, 2, 22, 3), b(45, 4, 7, 1), b(60, 8, 1, 1), b(-15, 9, 99, 9)],
      {
        startMs: T0,
        endMs: T0 + 75 * MIN,
        intervalMs: 60 * MIN,
      },
    );
    expect(shape(out.values())).toEqual([
      [0, 7, 1.5, 6, 22, 60],
      [60, 8, 0.5, 1, 1, 10],
    ]);
  });

  it('floorToRollup aligns to UTC quarter hours', () => {
    expect(floorToRollup(T0 + 14 * MIN + 59_999)).toBe(T0);
    expect(floorToRollup(T0 + 15 * MIN)).toBe(T0 + 15 * MIN);
  });
});
