import { zstdCompressSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import {
  type BlockSample,
  decimalScale,
  decodeBlock,
  decodeColumns,
  encodeBlock,
  mergeSamples,
} from '../../../platform/storage/telemetry-block.js';

const T = Date.parse('2026-11-27T10:00:00Z');

const sample = (tsMs: number, extra: Partial<BlockSample> = {}): BlockSample => ({
  ts_ms: tsMs,
  state: 'charging',
  voltage: 230.1,
  current: 15.93,
  power: 11.004,
  energy_delivered: 3.217,
  soc: 41,
  temperature: 31.5,
  phase_details: null,
  ...extra,
});

/** An hour of a charging session as the simulated HAL reports it (rounded as the agent rounds). */
function realisticHour(): BlockSample[] {
  const round = (v: number, d: number) => Math.round(v * 10 ** d) / 10 ** d;
  let energy = 0;
  let temperature = 22;
  let seed = 7;
  const noise = () => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed / 2 ** 31;
  };
  return Array.from({ length: 720 }, (_, i) => {
    const charging = i < 500;
    const voltage = 230 + noise() * 4 - 2;
    const power = charging ? 11 - noise() * 0.05 : 0;
    energy += (power * 5) / 3600;
    temperature += ((charging ? 45 : 22) - temperature) * (1 - Math.exp(-5000 / 600_000));
    return sample(T + i * 5000 + (i % 10 === 3 ? 1 : 0), {
      state: charging ? 'charging' : 'idle',
      voltage: round(voltage, 1),
      current: round((power * 1000) / (3 * voltage), 2),
      power: round(power, 3),
      energy_delivered: round(energy, 3),
      soc: 20 + Math.floor(i / 30),
      temperature: round(temperature, 1),
    });
  });
}

describe('telemetry blocks', () => {
  it.each<[string, BlockSample[]]>([
    ['no sample', []],
    ['one sample', [sample(T)]],
    ['two samples', [sample(T), sample(T + 5000, { state: 'idle', power: 0 })]],
    [
      'irregular times (the delta of deltas goes negative)',
      [sample(T), sample(T + 5000), sample(T + 5001), sample(T + 9000), sample(T + 1_000_000)],
    ],
    [
      'measurements absent in some samples, and one absent in every one',
      [
        sample(T, { temperature: null, soc: null }),
        sample(T + 5000, { soc: null }),
        sample(T + 10_000, { voltage: null, soc: null }),
      ],
    ],
    [
      'values no decimal scale holds: stored as they are',
      [
        sample(T, { power: Math.PI, voltage: 0.1 + 0.2 }),
        sample(T + 5000, { power: -Math.E, current: 1e-12 }),
      ],
    ],
    [
      'values no decimal scale holds, absent in some samples',
      [
        sample(T, { power: Math.PI }),
        sample(T + 5000, { power: null }),
        sample(T + 10_000, { power: Math.E }),
      ],
    ],
    [
      'phase details on every sample',
      [
        sample(T, { phase_details: '{"l1":{"voltage":230.1}}' }),
        sample(T + 5000, { phase_details: '{"l1":{"voltage":230.2}}' }),
      ],
    ],
    ['negative zero stays negative zero', [sample(T, { power: -0 }), sample(T + 5000, { power: 0 })]],
    [
      'large and small values, negative power (discharging)',
      [
        sample(T, { state: 'discharging', power: -999.999, energy_delivered: 999_999.999 }),
        sample(T + 5000, { state: 'fault', power: 0.000_000_001, energy_delivered: 1_000_000 }),
      ],
    ],
    [
      'phase details, some with non-ASCII text',
      [
        sample(T, { phase_details: '{"l1":{"voltage":230.1,"current":10.5}}' }),
        sample(T + 5000),
        sample(T + 10_000, { phase_details: '{"l2":{"voltage":229.9},"note":"Überlast ✓"}' }),
      ],
    ],
    ['a realistic hour', realisticHour()],
  ])('reads back exactly what went in: %s', (_label, samples) => {
    const back = decodeBlock(encodeBlock(samples));
    expect(back).toHaveLength(samples.length);
    back.forEach((s, i) => {
      expect(s).toEqual(samples[i]);
      // toEqual tells 0 from -0 (Object.is); say so for every value anyway.
      for (const [k, v] of Object.entries(samples[i] as BlockSample)) {
        expect(Object.is((s as Record<string, unknown>)[k], v), k).toBe(true);
      }
    });
  });

  it('keeps an hour of realistic samples in a few bytes each', () => {
    const samples = realisticHour();
    const bytes = encodeBlock(samples).length;
    // The budget of DESIGN.md §21 is about 5.8 bytes per sample (400 KB a charger-day, two connectors at 5 s).
    expect(bytes / samples.length).toBeLessThan(4);
    const columns = decodeColumns(encodeBlock(samples));
    expect(columns.count).toBe(720);
    expect(columns.values.power[600]).toBe(0);
    expect(Number.isNaN(decodeColumns(encodeBlock([sample(T, { soc: null })])).values.soc[0])).toBe(true);
  });

  it.each<[string, BlockSample[], RegExp]>([
    ['a state it does not know', [sample(T, { state: 'unavailable' })], /unknown state/],
    ['times out of order', [sample(T + 5000), sample(T)], /strictly increase/],
    ['one instant twice', [sample(T), sample(T)], /strictly increase/],
    ['a fractional time', [sample(T + 0.5)], /bad timestamp/],
  ])('refuses to encode %s', (_label, samples, message) => {
    expect(() => encodeBlock(samples)).toThrow(message);
  });

  it('refuses a block of another version, and a truncated one', () => {
    const block = encodeBlock([sample(T), sample(T + 5000)]);
    expect(() => decodeBlock(zstdCompressSync(Buffer.from([2, 0])))).toThrow(/version 2/);
    expect(() => decodeBlock(zstdCompressSync(Buffer.from([1, 2, 0x80])))).toThrow(/truncated/);
    expect(() => decodeBlock(block.subarray(0, block.length - 3))).toThrow();
  });

  it.each<[string, number[], number | undefined]>([
    ['integers', [1, 2, 230], 0],
    ['tenths', [230.1, 229.9, 230], 1],
    ['the largest decimals any value needs', [1.5, 2.25, 3.125], 3],
    ['a value that is not a short decimal', [1.5, Math.PI], undefined],
    ['too large to scale exactly', [123_456_789.123_456_78], undefined],
    ['negative zero', [-0], undefined],
  ])('picks the decimal scale of %s', (_label, values, k) => {
    expect(decimalScale(values)).toBe(k);
  });

  it('merges late samples into a block: time order, each instant once, the stored sample winning', () => {
    const stored = [sample(T), sample(T + 10_000, { power: 1 })];
    const late = [sample(T + 15_000), sample(T + 10_000, { power: 2 }), sample(T + 5000), sample(T + 5000)];
    const merged = mergeSamples(stored, late);
    expect(merged.map((s) => s.ts_ms)).toEqual([T, T + 5000, T + 10_000, T + 15_000]);
    expect(merged[2]?.power).toBe(1);
  });
});
