import { describe, expect, it } from 'vitest';
import {
  averagedWindow,
  type HistoryRange,
  historyItem,
  historyPage,
  historyRange,
} from '../../../platform/domain/telemetry-history.js';
import type { TelemetryHistoryRow } from '../../../platform/storage/store.js';
import * as blockCodec from '../../../platform/storage/telemetry-block.js';
import {
  MEASUREMENTS as BLOCK_MEASUREMENTS,
  type BlockSample,
  decodeBlock,
  encodeBlock,
} from '../../../platform/storage/telemetry-block.js';
import type { CompactableRow } from '../../../platform/storage/telemetry-compaction.js';
import { BLOCK_MS } from '../../../platform/storage/telemetry-compaction.js';
import {
  HISTORY_BLOCK_MS,
  HISTORY_MEASUREMENTS,
  historyFromBlocks,
  historyFromSamples,
} from '../../../platform/storage/telemetry-history-rows.js';
import {
  decodeTelemetryCursor,
  encodeTelemetryCursor,
  TELEMETRY_MEASUREMENTS,
  TelemetryHistoryQuery,
} from '../../../shared/index.js';

const T = Date.parse('2026-11-27T10:00:00Z');
const MIN = 60_000;

const row = (
  tsMs: number,
  connectorId: number,
  extra: Partial<TelemetryHistoryRow> = {},
): TelemetryHistoryRow => ({
  ts_ms: tsMs,
  connector_id: connectorId,
  state: 'charging',
  voltage: 230.1,
  current: null,
  power: 7.4,
  energy_delivered: null,
  soc: 41,
  temperature: null,
  phase_details: null,
  samples: 1,
  ...extra,
});

describe('historyRange', () => {
  const iso = (ms: number) => new Date(ms).toISOString();
  it.each([
    [
      'raw, both times',
      { start_time: iso(T + 7), end_time: iso(T + 99), resolution: 'raw' },
      [T + 7, T + 99],
    ],
    ['raw, no start: an hour before the end', { end_time: iso(T), resolution: 'raw' }, [T - 60 * MIN, T]],
    ['raw, nothing: the hour before now', { resolution: 'raw' }, [T + 5 - 60 * MIN, T + 5]],
    [
      '1m widened to whole minutes',
      { start_time: iso(T + 30_000), end_time: iso(T + 90_001), resolution: '1m' },
      [T, T + 2 * MIN],
    ],
    [
      '15m widened to whole quarters',
      { start_time: iso(T + 14 * MIN), end_time: iso(T + 16 * MIN), resolution: '15m' },
      [T, T + 30 * MIN],
    ],
    [
      '15m already whole',
      { start_time: iso(T), end_time: iso(T + 15 * MIN), resolution: '15m' },
      [T, T + 15 * MIN],
    ],
  ] as const)('%s', (_label, q, [startMs, endMs]) => {
    const r = historyRange(q, T + 5);
    expect([r.startMs, r.endMs]).toEqual([startMs, endMs]);
    expect(r.bucketMs).toBe(q.resolution === 'raw' ? undefined : q.resolution === '1m' ? MIN : 15 * MIN);
  });
});

describe('averagedWindow', () => {
  const range = { startMs: T, endMs: T + 600 * MIN, bucketMs: MIN };
  it.each([
    ['nothing left', T, undefined, 100, undefined],
    [
      'starts at the first sample’s bucket, limit buckets long',
      T,
      T + 61 * MIN + 5,
      100,
      [T + 61 * MIN, T + 161 * MIN],
    ],
    ['never past the range', T, T + 590 * MIN, 100, [T + 590 * MIN, T + 600 * MIN]],
    [
      'never before where the page starts (the cursor’s bucket)',
      T + 10 * MIN,
      T + 10 * MIN + 1,
      5,
      [T + 10 * MIN, T + 15 * MIN],
    ],
  ] as const)('%s', (_label, fromMs, first, limit, want) => {
    const w = averagedWindow(range, fromMs, first, limit);
    expect(w && [w.startMs, w.endMs]).toEqual(want);
  });
});

describe('historyPage', () => {
  const raw: HistoryRange = { startMs: T, endMs: T + 60 * MIN };
  const averaged: HistoryRange = { startMs: T, endMs: T + 60 * MIN, bucketMs: MIN };
  const cursorOf = (page: { next_cursor: string | null }) =>
    page.next_cursor === null ? null : decodeTelemetryCursor(page.next_cursor);

  it('has no next page when the read found no more than the limit', () => {
    const page = historyPage([row(T, 1), row(T, 2)], {
      resolution: 'raw',
      limit: 2,
      windowEndMs: raw.endMs,
      range: raw,
    });
    expect(page.items).toHaveLength(2);
    expect(page.next_cursor).toBeNull();
  });
  it('continues after the last item shown when there were more', () => {
    const page = historyPage([row(T, 1), row(T, 2), row(T + 5000, 1)], {
      resolution: 'raw',
      limit: 2,
      windowEndMs: raw.endMs,
      range: raw,
    });
    expect(page.items.map((i) => i.connector_id)).toEqual([1, 2]);
    expect(cursorOf(page)).toEqual({ resolution: 'raw', tsMs: T, connectorId: 2 });
  });
  it('continues after the window when an averaged read covered only part of the range', () => {
    const page = historyPage([row(T, 1, { samples: 12 })], {
      resolution: '1m',
      limit: 10,
      windowEndMs: T + 10 * MIN,
      range: averaged,
    });
    expect(cursorOf(page)).toEqual({ resolution: '1m', tsMs: T + 9 * MIN, connectorId: 99 });
    const last = historyPage([], {
      resolution: '1m',
      limit: 10,
      windowEndMs: averaged.endMs,
      range: averaged,
    });
    expect(last).toEqual({ items: [], next_cursor: null });
  });
});

describe('historyItem', () => {
  it('shows the measurements there are; phase details raw only; the count averaged only', () => {
    const details = { l1: { voltage: 230.1 } };
    expect(historyItem(row(T, 1, { phase_details: details }), 'raw')).toEqual({
      timestamp: '2026-11-27T10:00:00.000Z',
      connector_id: 1,
      state: 'charging',
      voltage: 230.1,
      power: 7.4,
      soc: 41,
      phase_details: details,
    });
    expect(historyItem(row(T, 2, { samples: 12, soc: 41.5 }), '1m')).toEqual({
      timestamp: '2026-11-27T10:00:00.000Z',
      connector_id: 2,
      state: 'charging',
      voltage: 230.1,
      power: 7.4,
      soc: 41.5,
      samples: 12,
    });
  });
});

describe('the cursor', () => {
  it('round-trips and refuses what it did not make', () => {
    const c = { resolution: '15m', tsMs: T, connectorId: 16 } as const;
    expect(decodeTelemetryCursor(encodeTelemetryCursor(c))).toEqual(c);
    for (const bad of ['', 'x', Buffer.from('raw.1.2.3').toString('base64url'), 'a'.repeat(49), '%%%']) {
      expect(decodeTelemetryCursor(bad), bad).toBeUndefined();
    }
  });
  it('belongs to the resolution that made it', () => {
    const cursor = encodeTelemetryCursor({ resolution: 'raw', tsMs: T, connectorId: 1 });
    expect(TelemetryHistoryQuery.safeParse({ cursor, resolution: 'raw' }).success).toBe(true);
    const other = TelemetryHistoryQuery.safeParse({ cursor, resolution: '1m' });
    expect(other.success).toBe(false);
    expect(other.error?.issues[0]?.path).toEqual(['cursor']);
  });
});

describe('historyFromSamples (blocks and the recent table together)', () => {
  const s = (tsMs: number, connectorId: number, extra: Partial<CompactableRow> = {}): CompactableRow => ({
    ts_ms: tsMs,
    connector_id: connectorId,
    state: 'charging',
    voltage: 230,
    current: null,
    power: 10,
    energy_delivered: null,
    soc: null,
    temperature: null,
    phase_details: null,
    ...extra,
  });
  // Given in no order, as blocks and the recent table hand them over.
  const samples = [
    s(T + 65_000, 1, { power: 4, state: 'idle' }),
    s(T + 5_000, 2, { power: 2, voltage: null }),
    s(T, 1, { phase_details: '{"l1":{"voltage":230.2}}' }),
    s(T + 5_000, 1, { power: 6 }),
    s(T + 60_000, 1, { power: 8 }),
    s(T + 120_000, 2, { power: 1 }),
  ];
  const read = { deviceId: 'd', startMs: T, endMs: T + 120_000, limit: 100 };

  it.each([
    [
      'everything in the range, by time then connector',
      {},
      ['0|1', '5000|1', '5000|2', '60000|1', '65000|1'],
    ],
    ['one connector', { connectorId: 2 }, ['5000|2']],
    ['after a cursor', { after: { tsMs: T + 5_000, connectorId: 1 } }, ['5000|2', '60000|1', '65000|1']],
    ['at most the limit', { limit: 2 }, ['0|1', '5000|1']],
    ['from a later start', { startMs: T + 60_000 }, ['60000|1', '65000|1']],
  ] as const)('raw: %s', (_label, change, want) => {
    const rows = historyFromSamples(samples, { ...read, ...change });
    expect(rows.map((r) => `${r.ts_ms - T}|${r.connector_id}`)).toEqual(want);
  });

  it('raw rows carry the sample as stored, phase details parsed', () => {
    const [first] = historyFromSamples(samples, read);
    expect(first).toEqual({ ...s(T, 1), phase_details: { l1: { voltage: 230.2 } }, samples: 1 });
  });

  it('averages: per bucket and connector the means of what was there, the last state, the count', () => {
    const rows = historyFromSamples(samples, { ...read, bucketMs: 60_000 });
    expect(rows).toEqual([
      { ...s(T, 1), power: 8, samples: 2 },
      { ...s(T, 2), voltage: null, power: 2, samples: 1 },
      { ...s(T + 60_000, 1), state: 'idle', power: 6, samples: 2 },
    ]);
    const after = historyFromSamples(samples, {
      ...read,
      bucketMs: 60_000,
      after: { tsMs: T, connectorId: 1 },
    });
    expect(after.map((r) => `${r.ts_ms - T}|${r.connector_id}`)).toEqual(['0|2', '60000|1']);
  });
});

describe('the modules the SQLite read worker loads by path', () => {
  it('import nothing but node: modules (and types), and hold the canonical constants', async () => {
    const { readFile } = await import('node:fs/promises');
    for (const file of ['telemetry-history-rows.ts', 'telemetry-block.ts']) {
      const text = await readFile(new URL(`../../../platform/storage/${file}`, import.meta.url), 'utf8');
      const valueImports = text.split('\n').filter((l) => /^import (?!type )/.test(l));
      expect(
        valueImports.every((l) => / from 'node:[a-z_/]+';$/.test(l)),
        file,
      ).toBe(true);
    }
    expect(HISTORY_MEASUREMENTS).toEqual(TELEMETRY_MEASUREMENTS);
    expect(BLOCK_MEASUREMENTS).toEqual(TELEMETRY_MEASUREMENTS);
    expect(HISTORY_BLOCK_MS).toBe(BLOCK_MS);
  });
});

describe('historyFromBlocks (the averaged walk over blocks without an object per sample)', () => {
  const sample = (tsMs: number, power: number, state = 'charging'): BlockSample => ({
    ts_ms: tsMs,
    state,
    voltage: 230,
    current: null,
    power,
    energy_delivered: null,
    soc: null,
    temperature: null,
    phase_details: null,
  });
  const H = Math.floor(T / 3_600_000) * 3_600_000;
  const blocks = [
    {
      connector_id: 1,
      start_ms: H,
      data: encodeBlock([sample(H, 2), sample(H + 30_000, 4, 'idle'), sample(H + 60_000, 6)]),
    },
    { connector_id: 2, start_ms: H, data: encodeBlock([sample(H + 10_000, 1)]) },
  ];
  const recent: CompactableRow[] = [
    // A re-sent sample a block holds already (another value): the block's counts, once.
    { ...sample(H + 30_000, 100), connector_id: 1 },
    // A late one the block does not hold yet.
    { ...sample(H + 45_000, 8, 'fault'), connector_id: 1 },
  ];
  const read = { deviceId: 'd', startMs: H, endMs: H + 3_600_000, limit: 100, bucketMs: 60_000 };

  it('averages blocks and recent rows alike, the last state by time, each instant once', () => {
    const rows = historyFromBlocks(blocks, recent, read, blockCodec);
    expect(rows.map((r) => [r.ts_ms - H, r.connector_id, r.power, r.state, r.samples])).toEqual([
      [0, 1, (2 + 4 + 8) / 3, 'fault', 3],
      [0, 2, 1, 'charging', 1],
      [60_000, 1, 6, 'charging', 1],
    ]);
    // The same as the object-per-sample path over the same samples.
    const samples = [
      ...blocks.flatMap((b) => decodeBlock(b.data).map((s) => ({ ...s, connector_id: b.connector_id }))),
      ...recent,
    ];
    expect(rows).toEqual(historyFromSamples(samples, read));
  });

  it('honours the cursor, the connector and the limit', () => {
    const after = historyFromBlocks(
      blocks,
      recent,
      { ...read, after: { tsMs: H, connectorId: 1 } },
      blockCodec,
    );
    expect(after.map((r) => [r.ts_ms - H, r.connector_id])).toEqual([
      [0, 2],
      [60_000, 1],
    ]);
    expect(historyFromBlocks(blocks, recent, { ...read, connectorId: 2 }, blockCodec)).toHaveLength(1);
    expect(historyFromBlocks(blocks, recent, { ...read, limit: 1 }, blockCodec)).toHaveLength(1);
  });
});
