import { describe, expect, it } from 'vitest';
import * as blockCodec from '../../../platform/storage/telemetry-block.js';
import {
  type BlockSample,
  decodeBlock,
  decodeSummary,
  encodeBlock,
  encodeSummary,
} from '../../../platform/storage/telemetry-block.js';
import {
  historyFromBlocks,
  historyFromSamples,
  planBlocks,
} from '../../../platform/storage/telemetry-history-rows.js';

/**
 * A block's quarter-hour summary (DESIGN.md §21, docs/data.md): a 15-minute read that takes its buckets from the
 * summaries answers exactly what decoding every block answers, and decodes the blocks a summary cannot speak for.
 */
const T = Date.parse('2026-11-27T10:00:00Z');

describe('15-minute reads from block summaries (planBlocks, encodeSummary)', () => {
  const H = Math.floor(T / 3_600_000) * 3_600_000;
  // A seeded day of two connectors: noisy decimals, a measurement often absent, states changing.
  let seed = 7;
  const random = () => {
    seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
    return seed / 2 ** 31;
  };
  const hourOf = (startMs: number): BlockSample[] => {
    const out: BlockSample[] = [];
    for (
      let t = startMs + Math.floor(random() * 5000);
      t < startMs + 3_600_000;
      t += 4000 + Math.floor(random() * 2000)
    )
      out.push({
        ts_ms: t,
        state: random() < 0.1 ? 'idle' : random() < 0.05 ? 'fault' : 'charging',
        voltage: Math.round((225 + random() * 10) * 100) / 100,
        current: random() < 0.3 ? null : Math.round(random() * 3200) / 100,
        power: Math.round(random() * 22_000) / 1000,
        energy_delivered: Math.round(random() * 1e6) / 1000,
        soc: random() < 0.5 ? null : Math.floor(random() * 101),
        temperature: random() < 0.02 ? Math.PI : Math.round(random() * 600) / 10,
        phase_details: null,
      });
    return out;
  };
  const day = [1, 2].flatMap((c) =>
    Array.from({ length: 24 }, (_, h) => {
      const samples = hourOf(H + h * 3_600_000);
      return {
        connector_id: c,
        start_ms: H + h * 3_600_000,
        data: encodeBlock(samples),
        summary: encodeSummary(samples, H + h * 3_600_000),
        samples: samples.length,
      };
    }),
  );
  const read = { deviceId: 'd', startMs: H, endMs: H + 86_400_000, limit: 2000, bucketMs: 900_000 };
  const decodedOnly = day.map(({ summary: _, ...b }) => b);

  it('answers what decoding every block answers, to the last bit', () => {
    const plan = planBlocks(day, [], read, blockCodec);
    expect(plan.summarized).toHaveLength(48);
    expect(plan.decode).toHaveLength(0);
    const fromSummaries = historyFromBlocks(day, [], read, blockCodec);
    expect(fromSummaries).toHaveLength(2 * 96);
    expect(fromSummaries).toStrictEqual(historyFromBlocks(decodedOnly, [], read, blockCodec));
    // And what the object-per-sample path answers over the same samples.
    const samples = day.flatMap((b) =>
      decodeBlock(b.data).map((s) => ({ ...s, connector_id: b.connector_id })),
    );
    expect(fromSummaries).toStrictEqual(historyFromSamples(samples, read));
  });

  it('honours the cursor and the connector with summaries too', () => {
    const after = { ...read, after: { tsMs: H + 900_000, connectorId: 1 } };
    expect(historyFromBlocks(day, [], after, blockCodec)).toStrictEqual(
      historyFromBlocks(decodedOnly, [], after, blockCodec),
    );
    const one = { ...read, connectorId: 2 };
    expect(planBlocks(day, [], one, blockCodec).summarized).toHaveLength(24);
    expect(historyFromBlocks(day, [], one, blockCodec)).toStrictEqual(
      historyFromBlocks(decodedOnly, [], one, blockCodec),
    );
  });

  it.each([
    [
      'a late sample in an hour',
      [{ ...hourOf(H + 3_600_000)[3]!, ts_ms: H + 3_600_001, connector_id: 1 }],
      1,
    ],
    ['a repeat of a stored sample', [{ ...decodeBlock(day[5]!.data)[2]!, power: 999, connector_id: 1 }], 1],
  ])('decodes the block of %s, and answers as decoding all would', (_name, recent, decoded) => {
    const plan = planBlocks(day, recent, read, blockCodec);
    expect(plan.decode).toHaveLength(decoded);
    expect(historyFromBlocks(day, recent, read, blockCodec)).toStrictEqual(
      historyFromBlocks(decodedOnly, recent, read, blockCodec),
    );
  });

  it.each([
    [
      'a block compacted before summaries (none stored)',
      day.map((b, i) => (i === 3 ? { ...b, summary: null } : b)),
      read,
      1,
    ],
    [
      'a summary that does not count the block (merged into by an earlier release)',
      day.map((b, i) => (i === 7 ? { ...b, samples: b.samples + 1 } : b)),
      read,
      1,
    ],
    ['a read at 1m', day, { ...read, bucketMs: 60_000 }, 48],
    ['bounds that are not whole quarters', day, { ...read, startMs: H + 60_000 }, 48],
  ])('decodes for %s', (_name, blocks, r, decoded) => {
    expect(planBlocks(blocks, [], r, blockCodec).decode).toHaveLength(decoded);
  });

  it('keeps each quarter apart, and refuses a sample outside the hour', () => {
    const samples = hourOf(H);
    const quarters = decodeSummary(encodeSummary(samples, H));
    expect(quarters.map((q) => q?.samples)).toEqual(
      [0, 1, 2, 3].map((q) => samples.filter((s) => Math.floor((s.ts_ms - H) / 900_000) === q).length),
    );
    expect(() => encodeSummary([{ ...samples[0]!, ts_ms: H + 3_600_000 }], H)).toThrow(/outside its hour/);
    expect(() => decodeSummary(new Uint8Array(10))).toThrow(/corrupt summary/);
  });
});
