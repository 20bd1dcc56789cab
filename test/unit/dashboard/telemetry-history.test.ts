import { describe, expect, it } from 'vitest';
import {
  addBuffered,
  addSample,
  BUCKET_MS,
  chartData,
  earlierEnd,
  type HistoryItem,
  type HistoryPage,
  historyQuery,
  historyWindow,
  laterEnd,
  readWindow,
  type TelemetryResolution,
  WINDOWS,
} from '../../../dashboard/src/telemetry-history.js';
import {
  TELEMETRY_BUCKET_MS,
  TELEMETRY_PAGE_MAX,
  TELEMETRY_RESOLUTIONS,
  type TelemetryHistoryPage,
} from '../../../shared/telemetry-history.js';

/** The charger page's telemetry chart (dashboard/src/telemetry-history.ts), by table. */

// The dashboard's copies of the API's types (it may not import zod): the API's page must fit them.
const fits: HistoryPage = {} as TelemetryHistoryPage;
const resolutions: readonly TelemetryResolution[] = TELEMETRY_RESOLUTIONS;
void fits;

const NOW = Date.parse('2026-11-25T12:00:00.000Z');
const H = 3_600_000;
const iso = (ms: number) => new Date(ms).toISOString();
const at = (minutes: number) => iso(NOW - H + minutes * 60_000);
const sample = (minutes: number, connector: number, power?: number, voltage?: number): HistoryItem => ({
  timestamp: at(minutes),
  connector_id: connector,
  state: 'charging',
  ...(power === undefined ? {} : { power }),
  ...(voltage === undefined ? {} : { voltage }),
});

describe('the API it reads', () => {
  it('has the same resolutions, bucket lengths and page size', () => {
    expect(resolutions).toEqual(['raw', '1m', '15m']);
    expect(BUCKET_MS).toEqual(TELEMETRY_BUCKET_MS);
    expect(historyQuery(historyWindow('1h', null, NOW)).limit).toBe(TELEMETRY_PAGE_MAX);
  });
});

describe('a window', () => {
  it.each([
    ['1h', null, NOW - H, NOW, 'raw', true],
    ['6h', null, NOW - 6 * H, NOW, '1m', true],
    ['24h', null, NOW - 24 * H, NOW, '1m', true],
    ['7d', null, NOW - 168 * H, NOW, '15m', true],
    ['1h', NOW - 5 * H, NOW - 6 * H, NOW - 5 * H, 'raw', false],
    ['24h', NOW - 24 * H, NOW - 48 * H, NOW - 24 * H, '1m', false],
  ] as const)('%s ending at %s reads [%s, %s) at %s, live %s', (length, end, start, stop, res, live) => {
    expect(historyWindow(length, end, NOW)).toEqual({
      length,
      startMs: start,
      endMs: stop,
      resolution: res,
      live,
    });
  });

  it('stays a few thousand points per connector at most, at a sample every 5 s', () => {
    for (const w of Object.values(WINDOWS)) {
      const step = w.resolution === 'raw' ? 5_000 : BUCKET_MS[w.resolution];
      expect(w.spanMs / step).toBeLessThanOrEqual(1440);
    }
  });

  it.each([
    ['earlier from now', '1h', null, 'earlier', NOW - H],
    ['earlier again', '1h', NOW - H, 'earlier', NOW - 2 * H],
    ['earlier by a day', '24h', NOW - H, 'earlier', NOW - 25 * H],
    ['later from now stays now', '1h', null, 'later', null],
    ['later back to a past window', '6h', NOW - 12 * H, 'later', NOW - 6 * H],
    ['later reaching now is live', '1h', NOW - H, 'later', null],
    ['later past now is live', '7d', NOW - 2 * H, 'later', null],
  ] as const)('%s', (_name, length, end, way, expected) => {
    expect(way === 'earlier' ? earlierEnd(length, end, NOW) : laterEnd(length, end, NOW)).toBe(expected);
  });

  it('asks for its range, resolution and a full page, with the cursor when there is one', () => {
    const w = historyWindow('6h', NOW, NOW);
    expect(historyQuery(w)).toEqual({
      start_time: iso(NOW - 6 * H),
      end_time: iso(NOW),
      resolution: '1m',
      limit: 2000,
      cursor: undefined,
    });
    expect(historyQuery(w, 'abc').cursor).toBe('abc');
  });
});

describe('reading every page of a window', () => {
  const pages: Record<string, HistoryPage> = {
    first: { items: [sample(0, 1, 1), sample(0, 2, 2)], next_cursor: 'a' },
    a: { items: [], next_cursor: 'b' },
    b: { items: [sample(1, 1, 3)], next_cursor: null },
  };
  const reader = (asked: Array<string | undefined>) => async (cursor: string | undefined) => {
    asked.push(cursor);
    return pages[cursor ?? 'first'] as HistoryPage;
  };

  it('follows next_cursor until null, through a short or empty page', async () => {
    const asked: Array<string | undefined> = [];
    const read = await readWindow(reader(asked));
    expect(asked).toEqual([undefined, 'a', 'b']);
    expect(read.items.map((i) => i.power)).toEqual([1, 2, 3]);
    expect(read.complete).toBe(true);
  });

  it('stops after its page limit and says so', async () => {
    const asked: Array<string | undefined> = [];
    const read = await readWindow(reader(asked), 2);
    expect(asked).toEqual([undefined, 'a']);
    expect(read).toEqual({ items: [sample(0, 1, 1), sample(0, 2, 2)], complete: false });
  });
});

describe('a stream sample added to a raw window', () => {
  const items = [sample(10, 1, 1), sample(10, 2, 2), sample(20, 1, 3)];
  const from = NOW - H;
  const times = (list: HistoryItem[]) =>
    list.map((i) => `${(Date.parse(i.timestamp) - from) / 60_000}/${i.connector_id}`);

  it.each([
    ['the newest, at the end', sample(30, 2, 9), from, ['10/1', '10/2', '20/1', '30/2']],
    ['a late one, in its place', sample(15, 2, 9), from, ['10/1', '10/2', '15/2', '20/1']],
    ['one at the same time as another connector', sample(20, 2, 9), from, ['10/1', '10/2', '20/1', '20/2']],
    ['one the read already had, once', sample(10, 2, 9), from, ['10/1', '10/2', '20/1']],
    ['one older than the window, left out', sample(-1, 1, 9), from, ['10/1', '10/2', '20/1']],
    ['with the window moved on', sample(70, 1, 9), from + 15 * 60_000, ['20/1', '70/1']],
  ] as const)('%s', (_name, s, fromMs, expected) => {
    const out = addSample(items, s, 'raw', fromMs);
    expect(times(out)).toEqual(expected);
    expect(items).toHaveLength(3);
  });

  it('keeps the newer values of a sample sent again', () => {
    expect(addSample(items, sample(10, 2, 9), 'raw', from)[1]?.power).toBe(9);
  });
});

describe('a stream sample added to an averaged window', () => {
  const bucket = (minute: number, connector: number, power: number, samples: number): HistoryItem => ({
    timestamp: at(minute),
    connector_id: connector,
    state: 'charging',
    power,
    samples,
  });
  const items = [bucket(10, 1, 4, 3), bucket(11, 1, 6, 2), bucket(11, 2, 1, 1)];

  it.each([
    ['folded into its bucket', { ...sample(11, 1, 9), timestamp: iso(NOW - H + 11.5 * 60_000) }, 1, 7, 3],
    ['folded, another connector', sample(11, 2, 3), 2, 2, 2],
    ['a new bucket', { ...sample(12, 1, 5), timestamp: iso(NOW - H + 12.2 * 60_000) }, 3, 5, 1],
  ] as const)('%s', (_name, s, index, power, samples) => {
    const out = addSample(items, s, '1m', NOW - H);
    expect(out[index]).toMatchObject({ power, samples });
    expect(Date.parse(out[index]?.timestamp ?? '') % 60_000).toBe(0);
  });

  it('starts a mean for a measurement the bucket had not', () => {
    expect(addSample(items, sample(10, 1, undefined, 230), '1m', NOW - H)[0]).toMatchObject({
      power: 4,
      voltage: 230,
      samples: 4,
    });
  });

  it('leaves out, of the samples that came while reading, those the read counted', () => {
    const w = historyWindow('6h', null, NOW - H + 11.5 * 60_000);
    const out = addBuffered(items, [sample(11, 1, 100), sample(12, 1, 5)], w, w.startMs);
    expect(out.map((i) => i.power)).toEqual([4, 6, 1, 5]);
  });

  it('adds every buffered sample to a raw window', () => {
    const w = historyWindow('1h', null, NOW);
    const out = addBuffered([sample(10, 1, 1)], [sample(10, 1, 2), sample(11, 1, 3)], w, w.startMs);
    expect(out.map((i) => i.power)).toEqual([2, 3]);
  });
});

describe('the chart’s data', () => {
  const s = (minute: number) => NOW / 1000 - 3600 + minute * 60;
  const items = [
    sample(0, 1, 7, 230),
    sample(0, 2, 3),
    sample(1, 1, 7.5, 231),
    sample(2, 2, 4),
    sample(20, 2, 5),
  ];

  it.each([
    [
      'power: both connectors, a gap of connector 2 broken, not drawn over',
      'power',
      [1, 2],
      [
        [s(0), s(1), s(2), s(11), s(20)],
        [7, 7.5, undefined, undefined, undefined],
        [3, undefined, 4, null, 5],
      ],
      5,
    ],
    [
      'voltage: only the connector that sent it',
      'voltage',
      [1],
      [
        [s(0), s(1)],
        [230, 231],
      ],
      2,
    ],
    ['soc: nothing', 'soc', [], [[]], 0],
  ] as const)('%s', (_name, measurement, connectors, data, points) => {
    expect(chartData(items, measurement, 'raw')).toEqual({ connectors, data, points });
  });

  it('breaks lines only past three buckets when averaged', () => {
    const quarter = (q: number): HistoryItem => ({ ...sample(q * 15, 1, q), samples: 180 });
    const out = chartData([quarter(0), quarter(1), quarter(3), quarter(7)], 'power', '15m');
    expect(out.data[1]).toEqual([0, 1, 3, null, 7]);
  });
});
