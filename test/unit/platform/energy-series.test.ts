import { describe, expect, it } from 'vitest';
import type { EnergyBucket } from '../../../platform/domain/energy.js';
import { energySeriesItems } from '../../../platform/domain/energy-series.js';

const MIN = 60_000;
const HOUR = 60 * MIN;
const T0 = Date.UTC(2026, 0, 1);
const at = (minutes: number) => new Date(T0 + minutes * MIN).toISOString();
const bucket = (minutes: number, b: Partial<Omit<EnergyBucket, 'start_ms'>>): EnergyBucket => ({
  start_ms: T0 + minutes * MIN,
  imported_kwh: 0,
  exported_kwh: 0,
  power_sum: 0,
  max_power: 0,
  samples: 0,
  ...b,
});
const empty = (from: number, to: number) => ({
  start_time: at(from),
  end_time: at(to),
  energy_imported: 0,
  energy_exported: 0,
  avg_power: 0,
  max_power: 0,
  samples: 0,
});

describe('energySeriesItems', () => {
  it.each([
    {
      name: 'no buckets: every interval of the range, zeroed',
      buckets: [],
      range: { start: 0, end: 45, interval: 15 * MIN },
      want: [empty(0, 15), empty(15, 30), empty(30, 45)],
    },
    {
      name: 'a range that is not whole intervals: the last item ends at the range end',
      buckets: [],
      range: { start: 0, end: 90, interval: HOUR },
      want: [empty(0, 60), empty(60, 90)],
    },
    {
      name: 'a bucket fills its interval; average power is the power sum over the samples',
      buckets: [
        bucket(60, { imported_kwh: 2.5, exported_kwh: 0.25, power_sum: 30, max_power: 12, samples: 4 }),
      ],
      range: { start: 0, end: 120, interval: HOUR },
      want: [
        empty(0, 60),
        {
          start_time: at(60),
          end_time: at(120),
          energy_imported: 2.5,
          energy_exported: 0.25,
          avg_power: 7.5,
          max_power: 12,
          samples: 4,
        },
      ],
    },
    {
      name: 'values are rounded to three decimals',
      buckets: [
        bucket(0, {
          imported_kwh: 1.23456,
          exported_kwh: 0.0004,
          power_sum: 10,
          max_power: 7.0006,
          samples: 3,
        }),
      ],
      range: { start: 0, end: 15, interval: 15 * MIN },
      want: [
        {
          ...empty(0, 15),
          energy_imported: 1.235,
          energy_exported: 0,
          avg_power: 3.333,
          max_power: 7.001,
          samples: 3,
        },
      ],
    },
    {
      name: 'a bucket without samples (energy from an interval crossing in) averages to 0',
      buckets: [bucket(0, { imported_kwh: 0.5, power_sum: 0, samples: 0 })],
      range: { start: 0, end: 15, interval: 15 * MIN },
      want: [{ ...empty(0, 15), energy_imported: 0.5 }],
    },
    {
      name: 'buckets off the grid or outside the range are left out',
      buckets: [bucket(15, { imported_kwh: 9, samples: 1 }), bucket(-60, { imported_kwh: 9, samples: 1 })],
      range: { start: 0, end: 60, interval: HOUR },
      want: [empty(0, 60)],
    },
    {
      name: 'an empty range has no items',
      buckets: [bucket(0, { imported_kwh: 1, samples: 1 })],
      range: { start: 0, end: 0, interval: HOUR },
      want: [],
    },
  ])('$name', ({ buckets, range, want }) => {
    expect(
      energySeriesItems(buckets, {
        startMs: T0 + range.start * MIN,
        endMs: T0 + range.end * MIN,
        intervalMs: range.interval,
      }),
    ).toEqual(want);
  });
});
