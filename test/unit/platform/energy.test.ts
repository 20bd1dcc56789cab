import { describe, expect, it } from 'vitest';
import {
  accumulateEnergy,
  bucketsInOrder,
  type EnergyBucket,
  MAX_GAP_MS,
  type PowerSample,
} from '../../../platform/domain/energy.js';

const MIN = 60_000;
const HOUR = 60 * MIN;
const T0 = Date.UTC(2026, 0, 1);

/** Samples of one connector: [minutes after T0, kW]. */
const at = (points: Array<[number, number | null]>, connector_id = 1): PowerSample[] =>
  points.map(([m, power]) => ({ connector_id, ts_ms: T0 + m * MIN, power }));

/** Buckets rounded for comparison: [minutes after T0, imported, exported, samples, max, power sum]. */
const shape = (buckets: EnergyBucket[]) =>
  buckets.map((b) => [
    (b.start_ms - T0) / MIN,
    Math.round(b.imported_kwh * 1e6) / 1e6,
    Math.round(b.exported_kwh * 1e6) / 1e6,
    b.samples,
    b.max_power,
    Math.round(b.power_sum * 1e6) / 1e6,
  ]);

const integrate = (samples: PowerSample[], startMin: number, endMin: number, intervalMin: number) =>
  shape(
    bucketsInOrder(
      accumulateEnergy(new Map(), samples, {
        startMs: T0 + startMin * MIN,
        endMs: T0 + endMin * MIN,
        intervalMs: intervalMin * MIN,
      }),
    ),
  );

describe('accumulateEnergy: the integration rule', () => {
  it.each([
    {
      name: 'a sample’s power holds until the next one (left sum); the last one adds nothing after it',
      samples: at([
        [0, 6],
        [1, 12],
        [3, 0],
      ]),
      range: [0, 60, 60] as const,
      // 6 kW × 1 min + 12 kW × 2 min = 0.1 + 0.4 kWh
      want: [[0, 0.5, 0, 3, 12, 18]],
    },
    {
      name: 'negative power exports',
      samples: at([
        [0, -6],
        [2, 6],
        [3, 6],
      ]),
      range: [0, 60, 60] as const,
      want: [[0, 0.1, 0.2, 3, 6, 6]],
    },
    {
      name: 'a gap of exactly MAX_GAP_MS is integrated; one a millisecond longer is no data',
      samples: [
        ...at([[0, 12]]),
        { connector_id: 1, ts_ms: T0 + MAX_GAP_MS, power: 12 },
        { connector_id: 1, ts_ms: T0 + 2 * MAX_GAP_MS + 1, power: 0 },
      ],
      range: [0, 60, 60] as const,
      want: [[0, 1, 0, 3, 12, 24]],
    },
    {
      name: 'a sample without power adds no energy until the next sample',
      samples: at([
        [0, null],
        [1, 60],
        [2, 0],
      ]),
      range: [0, 60, 60] as const,
      want: [[0, 1, 0, 3, 60, 60]],
    },
    {
      name: 'an interval crossing a bucket boundary is split between the buckets',
      samples: at([
        [13, 60],
        [17, 0],
      ]),
      range: [0, 30, 15] as const,
      // 60 kW: 2 min in the first bucket (2 kWh), 2 min in the second (2 kWh)
      want: [
        [0, 2, 0, 1, 60, 60],
        [15, 2, 0, 1, 0, 0],
      ],
    },
    {
      name: 'connectors integrate apart, interleaved as they come',
      samples: [...at([[0, 30]], 1), ...at([[0, 60]], 2), ...at([[1, 0]], 1), ...at([[1, 0]], 2)],
      range: [0, 60, 60] as const,
      want: [[0, 1.5, 0, 4, 60, 90]],
    },
    {
      name: 'samples before the range integrate from its start but are not counted as samples',
      samples: at([
        [-2, 60],
        [2, 0],
      ]),
      range: [0, 60, 60] as const,
      want: [[0, 2, 0, 1, 0, 0]],
    },
    {
      name: 'the range’s end is exclusive: a sample on it is not counted, the interval before it is cut there',
      samples: at([
        [58, 60],
        [60, 60],
        [62, 0],
      ]),
      range: [0, 60, 60] as const,
      want: [[0, 2, 0, 1, 60, 60]],
    },
    {
      name: 'a repeated timestamp adds a sample but no time',
      samples: at([
        [0, 60],
        [0, 60],
        [1, 0],
      ]),
      range: [0, 60, 60] as const,
      want: [[0, 1, 0, 3, 60, 120]],
    },
    {
      name: 'no samples, no buckets',
      samples: [],
      range: [0, 60, 15] as const,
      want: [],
    },
  ])('$name', ({ samples, range, want }) => {
    expect(integrate(samples, range[0], range[1], range[2])).toEqual(want);
  });

  it('adds devices up when called once per device with the same map', () => {
    const buckets = new Map<number, EnergyBucket>();
    const range = { startMs: T0, endMs: T0 + HOUR, intervalMs: HOUR };
    accumulateEnergy(
      buckets,
      at([
        [0, 60],
        [1, 0],
      ]),
      range,
    );
    accumulateEnergy(
      buckets,
      at([
        [0, 120],
        [1, 0],
      ]),
      range,
    );
    expect(shape(bucketsInOrder(buckets))).toEqual([[0, 3, 0, 4, 120, 180]]);
  });
});
