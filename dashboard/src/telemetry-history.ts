import type uPlot from 'uplot';

/**
 * The charger page's telemetry chart (DESIGN.md §21), its pure part: which range and resolution a window reads,
 * every page of it, the stream's samples added as they come, and the items as uPlot's aligned data per connector.
 * The API's types are written again here: shared/telemetry-history.ts brings zod and Buffer, which the bundle may
 * not hold; the unit test checks that the API's page fits them.
 */

export type TelemetryResolution = 'raw' | '1m' | '15m';

const HOUR_MS = 3_600_000;

/** Each window with the resolution that keeps it to a few thousand points per connector at most. */
export const WINDOWS = {
  '1h': { label: '1 h', spanMs: HOUR_MS, resolution: 'raw' },
  '6h': { label: '6 h', spanMs: 6 * HOUR_MS, resolution: '1m' },
  '24h': { label: '24 h', spanMs: 24 * HOUR_MS, resolution: '1m' },
  '7d': { label: '7 d', spanMs: 7 * 24 * HOUR_MS, resolution: '15m' },
} as const satisfies Record<string, { label: string; spanMs: number; resolution: TelemetryResolution }>;
export type WindowLength = keyof typeof WINDOWS;

export const MEASUREMENTS = {
  power: { label: 'Power', unit: 'kW' },
  voltage: { label: 'Voltage', unit: 'V' },
  current: { label: 'Current', unit: 'A' },
  soc: { label: 'SOC', unit: '%' },
  temperature: { label: 'Temperature', unit: '°C' },
} as const;
export type Measurement = keyof typeof MEASUREMENTS;

/** The API's bucket lengths (TELEMETRY_BUCKET_MS; the unit test compares them). */
export const BUCKET_MS = { '1m': 60_000, '15m': 900_000 } as const;
const PAGE_LIMIT = 2000;

/** What the chart keeps of an item of the API's page; a stream message has the same shape. */
export interface HistoryItem {
  timestamp: string;
  connector_id: number;
  state: 'idle' | 'charging' | 'discharging' | 'fault';
  power?: number;
  voltage?: number;
  current?: number;
  soc?: number;
  temperature?: number;
  /** Averaged buckets: how many samples the bucket holds. */
  samples?: number;
}
export interface HistoryPage {
  items: HistoryItem[];
  next_cursor: string | null;
}

export interface HistoryWindow {
  length: WindowLength;
  startMs: number;
  endMs: number;
  resolution: TelemetryResolution;
  /** Ends now and moves with the stream. */
  live: boolean;
}

/** The window of `length` ending at `endMs`, or now when `endMs` is null (live). */
export function historyWindow(length: WindowLength, endMs: number | null, nowMs: number): HistoryWindow {
  const { spanMs, resolution } = WINDOWS[length];
  const end = endMs ?? nowMs;
  return { length, startMs: end - spanMs, endMs: end, resolution, live: endMs === null };
}

/** The end of the window before: one window length earlier. */
export function earlierEnd(length: WindowLength, endMs: number | null, nowMs: number): number {
  return (endMs ?? nowMs) - WINDOWS[length].spanMs;
}

/** The end of the window after, or null (live) once that would reach now. */
export function laterEnd(length: WindowLength, endMs: number | null, nowMs: number): number | null {
  if (endMs === null) return null;
  const next = endMs + WINDOWS[length].spanMs;
  return next >= nowMs ? null : next;
}

export function historyQuery(w: HistoryWindow, cursor?: string): Record<string, string | number | undefined> {
  return {
    start_time: new Date(w.startMs).toISOString(),
    end_time: new Date(w.endMs).toISOString(),
    resolution: w.resolution,
    limit: PAGE_LIMIT,
    cursor,
  };
}

/**
 * Every item of the window, following `next_cursor` until null (a short page may have a next one). Stops after
 * `maxPages` (a charger sending far faster than 1 Hz): `complete` says whether it read them all.
 */
export async function readWindow(
  readPage: (cursor: string | undefined) => Promise<HistoryPage>,
  maxPages = 25,
): Promise<{ items: HistoryItem[]; complete: boolean }> {
  const items: HistoryItem[] = [];
  let cursor: string | undefined;
  for (let pages = 0; pages < maxPages; pages++) {
    const page = await readPage(cursor);
    for (const item of page.items) items.push(item);
    if (page.next_cursor === null) return { items, complete: true };
    cursor = page.next_cursor;
  }
  return { items, complete: false };
}

/**
 * `items` (oldest first) with one stream sample added, those older than `fromMs` dropped (the live window
 * moves). Raw: the sample in its place, replacing one of the same connector and time (a sample the history read
 * already had). Averaged: folded into its bucket's means, weighted by the bucket's `samples` (exact when every
 * sample of the bucket had the measurement, as chargers send them), so the last bucket moves too.
 */
export function addSample(
  items: readonly HistoryItem[],
  sample: HistoryItem,
  resolution: TelemetryResolution,
  fromMs: number,
): HistoryItem[] {
  const first = firstIndexFrom(items, fromMs);
  const kept = first > 0 ? items.slice(first) : [...items];
  const atMs = Date.parse(sample.timestamp);
  if (Number.isNaN(atMs) || atMs < fromMs) return kept;
  const at = resolution === 'raw' ? atMs : Math.floor(atMs / BUCKET_MS[resolution]) * BUCKET_MS[resolution];
  let i = kept.length;
  // Samples come newest last: look from the end.
  while (i > 0) {
    const prev = kept[i - 1] as HistoryItem;
    const d = Date.parse(prev.timestamp) - at || prev.connector_id - sample.connector_id;
    if (d < 0) break;
    if (d === 0) {
      kept[i - 1] = resolution === 'raw' ? pick(sample, sample.timestamp) : fold(prev, sample);
      return kept;
    }
    i--;
  }
  const added = pick(sample, new Date(at).toISOString());
  if (resolution !== 'raw') added.samples = 1;
  kept.splice(i, 0, added);
  return kept;
}

/**
 * The stream's samples that came while the window was read, added to what it read. Averaged, those before the
 * window's end are left out: the read has already counted them in their buckets.
 */
export function addBuffered(
  items: readonly HistoryItem[],
  buffered: readonly HistoryItem[],
  w: HistoryWindow,
  fromMs: number,
): HistoryItem[] {
  let out = [...items];
  for (const s of buffered) {
    if (w.resolution !== 'raw' && Date.parse(s.timestamp) < w.endMs) continue;
    out = addSample(out, s, w.resolution, fromMs);
  }
  return out;
}

function firstIndexFrom(items: readonly HistoryItem[], fromMs: number): number {
  let lo = 0;
  let hi = items.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (Date.parse((items[mid] as HistoryItem).timestamp) < fromMs) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function pick(s: HistoryItem, timestamp: string): HistoryItem {
  const item: HistoryItem = { timestamp, connector_id: s.connector_id, state: s.state };
  for (const m of MEASUREMENT_KEYS) if (s[m] !== undefined) item[m] = s[m];
  return item;
}

function fold(bucket: HistoryItem, s: HistoryItem): HistoryItem {
  const n = bucket.samples ?? 1;
  const item: HistoryItem = { ...bucket, state: s.state, samples: n + 1 };
  for (const m of MEASUREMENT_KEYS) {
    const v = s[m];
    if (v === undefined) continue;
    const mean = bucket[m];
    item[m] = mean === undefined ? v : (mean * n + v) / (n + 1);
  }
  return item;
}

const MEASUREMENT_KEYS = Object.keys(MEASUREMENTS) as Measurement[];

/** Longer than this between two points of a connector is a gap in its line (the charger said nothing). */
export function gapMs(resolution: TelemetryResolution): number {
  return resolution === 'raw' ? 5 * 60_000 : Math.max(5 * 60_000, 3 * BUCKET_MS[resolution]);
}

export interface ChartData {
  connectors: number[];
  /** x in Unix seconds, then one column per connector: undefined where it has no point, null for a gap. */
  data: uPlot.AlignedData;
  /** Values drawn, over all connectors. */
  points: number;
}

/** One series per connector of `measurement`; a gap longer than `gapMs` breaks its line. */
export function chartData(
  items: readonly HistoryItem[],
  measurement: Measurement,
  resolution: TelemetryResolution,
): ChartData {
  const perConnector = new Map<number, Array<[number, number | null]>>();
  const gap = gapMs(resolution) / 1000;
  let points = 0;
  for (const item of items) {
    const v = item[measurement];
    if (v === undefined) continue;
    const x = Date.parse(item.timestamp) / 1000;
    const line = perConnector.get(item.connector_id) ?? [];
    if (line.length === 0) perConnector.set(item.connector_id, line);
    const last = line[line.length - 1];
    if (last && x - last[0] > gap) line.push([(last[0] + x) / 2, null]);
    line.push([x, v]);
    points++;
  }
  const connectors = [...perConnector.keys()].sort((a, b) => a - b);
  const xs = [...new Set([...perConnector.values()].flatMap((line) => line.map(([x]) => x)))].sort(
    (a, b) => a - b,
  );
  const index = new Map(xs.map((x, i) => [x, i]));
  const columns = connectors.map((c) => {
    const column: Array<number | null | undefined> = new Array(xs.length).fill(undefined);
    for (const [x, v] of perConnector.get(c) ?? []) column[index.get(x) as number] = v;
    return column;
  });
  return { connectors, data: [xs, ...columns], points };
}
