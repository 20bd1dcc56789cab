import type { BlockColumns, BlockSample, SummaryQuarter } from './telemetry-block.js';
import type { CompactableRow } from './telemetry-compaction.js';
import type { TelemetryHistoryRead, TelemetryHistoryRow } from './telemetry-history-repository.js';

/*
 * The history read's rules over stored samples (DESIGN.md §21), shared by both backends. Self-contained on
 * purpose (type imports only): SQLite's read worker loads this file by its path (`sqlite/reader.ts`), so its
 * constants are its own, held to the canonical ones by a unit test.
 */

/** shared/device-api.ts's TELEMETRY_MEASUREMENTS. */
export const HISTORY_MEASUREMENTS = [
  'voltage',
  'current',
  'power',
  'energy_delivered',
  'soc',
  'temperature',
] as const;
/** telemetry-compaction.ts's BLOCK_MS. */
export const HISTORY_BLOCK_MS = 3_600_000;
const TELEMETRY_MEASUREMENTS = HISTORY_MEASUREMENTS;
const BLOCK_MS = HISTORY_BLOCK_MS;

/** The measurement columns, in the order both backends select them. */
export const MEASUREMENT_COLUMNS = TELEMETRY_MEASUREMENTS.join(', ');

/**
 * Where a read starts: after its cursor's item when that lies in the range, else at `startMs` (connector ids
 * start at 1, so "after connector 0" takes every connector of the first instant).
 */
export function readStart(read: TelemetryHistoryRead): { tsMs: number; connectorId: number } {
  return read.after && read.after.tsMs >= read.startMs ? read.after : { tsMs: read.startMs, connectorId: 0 };
}

/** A row as a backend returned it (phase details as JSON text on SQLite, an object on PostgreSQL). */
export type RawHistoryRow = Omit<TelemetryHistoryRow, 'phase_details'> & { phase_details: unknown };

export function toHistoryRow(raw: RawHistoryRow): TelemetryHistoryRow {
  const details = raw.phase_details;
  return {
    ...raw,
    phase_details:
      typeof details === 'string'
        ? (JSON.parse(details) as Record<string, unknown>)
        : ((details ?? null) as Record<string, unknown> | null),
  };
}

/**
 * The items of `read` from samples gathered from blocks and the recent table (in any order, each instant of a
 * connector once): raw samples, or each bucket's means, last state and count, as the backends' SQL answers
 * them over the recent table alone.
 */
export function historyFromSamples(
  given: readonly CompactableRow[],
  read: TelemetryHistoryRead,
): TelemetryHistoryRow[] {
  const samples = onePerInstant(given);
  const start = readStart(read);
  const wanted = (s: CompactableRow) =>
    s.ts_ms < read.endMs && (read.connectorId === undefined || s.connector_id === read.connectorId);
  const after = (tsMs: number, connectorId: number) =>
    tsMs > start.tsMs || (tsMs === start.tsMs && connectorId > start.connectorId);
  const inOrder = (a: { ts_ms: number; connector_id: number }, b: { ts_ms: number; connector_id: number }) =>
    a.ts_ms - b.ts_ms || a.connector_id - b.connector_id;
  if (read.bucketMs === undefined) {
    return samples
      .filter((s) => wanted(s) && s.ts_ms >= start.tsMs && after(s.ts_ms, s.connector_id))
      .sort(inOrder)
      .slice(0, read.limit)
      .map((s) => toHistoryRow({ ...s, samples: 1 }));
  }
  const bucketMs = read.bucketMs;
  const buckets = new Map<string, Bucket>();
  for (const s of samples) {
    if (!wanted(s) || s.ts_ms < start.tsMs) continue;
    const ts = s.ts_ms - (s.ts_ms % bucketMs);
    if (!after(ts, s.connector_id)) continue;
    const key = `${ts}|${s.connector_id}`;
    let b = buckets.get(key);
    if (!b) {
      b = newBucket(ts, s.connector_id);
      buckets.set(key, b);
    }
    addToBucket(b, s);
  }
  return [...buckets.values()].sort(inOrder).slice(0, read.limit).map(bucketRow);
}

/**
 * Each connector's instant once, the first given winning: on PostgreSQL a sample re-sent while its hour was
 * being compacted on another instance can sit in the recent table and in the block until the next pass merges
 * them (blocks are given first).
 */
function onePerInstant(samples: readonly CompactableRow[]): CompactableRow[] {
  const seen = new Set<string>();
  return samples.filter((s) => {
    const key = `${s.connector_id}|${s.ts_ms}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

interface Bucket {
  ts_ms: number;
  connector_id: number;
  lastMs: number;
  state: string;
  samples: number;
  sums: number[];
  counts: number[];
}

const newBucket = (tsMs: number, connectorId: number): Bucket => ({
  ts_ms: tsMs,
  connector_id: connectorId,
  lastMs: Number.NEGATIVE_INFINITY,
  state: '',
  samples: 0,
  sums: TELEMETRY_MEASUREMENTS.map(() => 0),
  counts: TELEMETRY_MEASUREMENTS.map(() => 0),
});

function addToBucket(b: Bucket, s: CompactableRow): void {
  b.samples++;
  if (s.ts_ms > b.lastMs) {
    b.lastMs = s.ts_ms;
    b.state = s.state;
  }
  TELEMETRY_MEASUREMENTS.forEach((m, i) => {
    const v = s[m];
    if (v === null) return;
    b.sums[i] = (b.sums[i] as number) + v;
    b.counts[i] = (b.counts[i] as number) + 1;
  });
}

function bucketRow(b: Bucket): TelemetryHistoryRow {
  const row = {
    ts_ms: b.ts_ms,
    connector_id: b.connector_id,
    state: b.state,
    phase_details: null,
    samples: b.samples,
  } as TelemetryHistoryRow;
  TELEMETRY_MEASUREMENTS.forEach((m, i) => {
    const n = b.counts[i] as number;
    row[m] = n === 0 ? null : (b.sums[i] as number) / n;
  });
  return row;
}

/**
 * Where a raw page's block samples may stop: the end of the first hour by which the blocks after the page's
 * start hold more than `read.limit` samples (the start's own hour does not count: part of it may lie before
 * the cursor), or the read's end.
 */
export function rawPageEnd(
  counts: ReadonlyArray<{ start_ms: number; samples: number }>,
  fromMs: number,
  read: TelemetryHistoryRead,
): number {
  let total = 0;
  for (const c of counts) {
    if (c.start_ms > fromMs) total += c.samples;
    if (total > read.limit) return Math.min(read.endMs, c.start_ms + BLOCK_MS);
  }
  return read.endMs;
}

/** A statement and its named parameters (`@name`). */
export interface NamedSql {
  sql: string;
  params: Record<string, unknown>;
}

/**
 * A history read as statements over the recent table and the blocks, for `runHistoryRead` to run where the
 * data is (SQLite's read worker). The block and recent statements take `@until`: where the page may stop.
 */
export interface HistoryStatements {
  read: TelemetryHistoryRead;
  fromMs: number;
  /** Raw reads: `start_ms`, `samples` of the blocks per hour, to choose how many hours a page needs. */
  blockCounts?: NamedSql;
  /** `connector_id`, `data` of the blocks up to `@until`. */
  blocks: NamedSql;
  /** The recent table's samples up to `@until`, as they are. */
  recent: NamedSql;
  /** The answer from the recent table alone (averaged in SQL), when there are no blocks. */
  plain: NamedSql;
}

/** Runs `statements` with `all` (synchronous), decoding blocks with `codec`. */
export function runHistoryRead(
  all: (sql: string, params: Record<string, unknown>) => unknown[],
  statements: HistoryStatements,
  codec: BlockCodec,
): TelemetryHistoryRow[] {
  const { read, fromMs } = statements;
  const untilMs = statements.blockCounts
    ? rawPageEnd(
        all(statements.blockCounts.sql, statements.blockCounts.params) as Array<{
          start_ms: number;
          samples: number;
        }>,
        fromMs,
        read,
      )
    : read.endMs;
  const blocks = all(statements.blocks.sql, {
    ...statements.blocks.params,
    until: untilMs,
  }) as FetchedBlock[];
  if (blocks.length === 0)
    return (all(statements.plain.sql, statements.plain.params) as RawHistoryRow[]).map(toHistoryRow);
  const recent = all(statements.recent.sql, {
    ...statements.recent.params,
    until: untilMs,
  }) as CompactableRow[];
  return historyFromBlocks(blocks, recent, { ...read, endMs: untilMs }, codec);
}

/** A block as a read fetches it. */
export interface FetchedBlock {
  connector_id: number;
  start_ms: number;
  data: Uint8Array;
  /** Its quarter-hour summary (`telemetry-block.ts`); null for a block compacted before summaries existed. */
  summary?: Uint8Array | null;
  /** How many samples it holds (the stored count a summary must agree with). */
  samples?: number;
}

/** What a read needs of the block codec (`telemetry-block.ts`), handed in: this file loads no code. */
export interface BlockCodec {
  STATES: readonly string[];
  SUMMARY_BUCKET_MS: number;
  decodeColumns(block: Uint8Array): BlockColumns;
  sampleAt(c: BlockColumns, i: number): BlockSample;
  decodeSummary(summary: Uint8Array): Array<SummaryQuarter | undefined>;
}

/** The read's blocks: those it must decode, and those a 15-minute read takes from their summaries. */
export interface BlockPlan {
  decode: FetchedBlock[];
  summarized: Array<{ block: FetchedBlock; quarters: Array<SummaryQuarter | undefined> }>;
}

/**
 * The items of `read` from blocks and the recent table's rows. Raw pages (a few blocks) go through
 * `historyFromSamples`; averaged ones walk the blocks' columns without an object per sample (a week is some
 * 240,000 samples), a recent row that repeats a block's sample left out (the block's counts); at 15 minutes,
 * most blocks are not decoded at all (`planBlocks`).
 */
export function historyFromBlocks(
  fetched: readonly FetchedBlock[],
  recent: readonly CompactableRow[],
  read: TelemetryHistoryRead,
  codec: BlockCodec,
): TelemetryHistoryRow[] {
  const plan = planBlocks(fetched, recent, read, codec);
  const columns = plan.decode.map((b) => codec.decodeColumns(b.data));
  return historyFromColumns(plan, columns, recent, read, codec);
}

/**
 * Which of the fetched blocks `read` needs (its connector's, when it names one), and which of them a 15-minute
 * read may take from their summaries: every one that has a summary counting the block's samples, unless a
 * recent row lies in its hour (a late sample to merge, or a repeat to leave out, needs the block's own times) —
 * and only when the read's bounds are whole quarters, so that each bucket is in the read or out of it entirely.
 * (A summary that does not count the block's samples is stale: an earlier release merged samples into the block
 * without rewriting it.)
 */
export function planBlocks(
  fetched: readonly FetchedBlock[],
  recent: readonly CompactableRow[],
  read: TelemetryHistoryRead,
  codec: Pick<BlockCodec, 'SUMMARY_BUCKET_MS' | 'decodeSummary'>,
): BlockPlan {
  const blocks =
    read.connectorId === undefined
      ? [...fetched]
      : fetched.filter((b) => b.connector_id === read.connectorId);
  const quarter = codec.SUMMARY_BUCKET_MS;
  const start = readStart(read);
  if (read.bucketMs !== quarter || start.tsMs % quarter !== 0 || read.endMs % quarter !== 0)
    return { decode: blocks, summarized: [] };
  const hoursWithRecent = new Set(recent.map((r) => `${r.connector_id}|${r.ts_ms - (r.ts_ms % BLOCK_MS)}`));
  const plan: BlockPlan = { decode: [], summarized: [] };
  for (const b of blocks) {
    const quarters =
      b.summary && !hoursWithRecent.has(`${b.connector_id}|${b.start_ms}`)
        ? codec.decodeSummary(b.summary)
        : [];
    if (quarters.reduce((n, q) => n + (q?.samples ?? 0), 0) === b.samples)
      plan.summarized.push({ block: b, quarters });
    else plan.decode.push(b);
  }
  return plan;
}

/** `historyFromBlocks` once the blocks to decode are decoded (`columns[k]` is `plan.decode[k]`'s). */
export function historyFromColumns(
  plan: BlockPlan,
  columns: readonly BlockColumns[],
  recent: readonly CompactableRow[],
  read: TelemetryHistoryRead,
  codec: Pick<BlockCodec, 'STATES' | 'sampleAt' | 'SUMMARY_BUCKET_MS'>,
): TelemetryHistoryRow[] {
  const blocks = plan.decode;
  if (read.bucketMs === undefined) {
    const samples: CompactableRow[] = [];
    blocks.forEach((b, k) => {
      const cols = columns[k] as BlockColumns;
      for (let i = 0; i < cols.count; i++)
        samples.push({ ...codec.sampleAt(cols, i), connector_id: b.connector_id });
    });
    return historyFromSamples(samples.concat(recent), read);
  }
  const buckets = createBuckets(read, read.bucketMs);
  const held = new Map<string, Float64Array>();
  blocks.forEach((block, k) => {
    const cols = columns[k] as BlockColumns;
    held.set(`${block.connector_id}|${block.start_ms}`, cols.ts);
    addColumns(buckets, cols, block.connector_id, codec.STATES);
  });
  for (const { block, quarters } of plan.summarized) {
    quarters.forEach((q, i) => {
      const b = q && buckets.at(block.start_ms + i * codec.SUMMARY_BUCKET_MS, block.connector_id);
      if (q && b) addQuarter(b, q, codec.STATES);
    });
  }
  for (const r of recent) {
    if (read.connectorId !== undefined && r.connector_id !== read.connectorId) continue;
    const times = held.get(`${r.connector_id}|${r.ts_ms - (r.ts_ms % BLOCK_MS)}`);
    if (times && sortedIncludes(times, r.ts_ms)) continue;
    const b = buckets.at(r.ts_ms, r.connector_id);
    if (b) addToBucket(b, r);
  }
  return buckets
    .all()
    .sort((a, b) => a.ts_ms - b.ts_ms || a.connector_id - b.connector_id)
    .slice(0, read.limit)
    .map(bucketRow);
}

/** A summary's quarter into its bucket: what walking the quarter's samples would add, the same numbers. */
function addQuarter(b: Bucket, q: SummaryQuarter, states: readonly string[]): void {
  b.samples += q.samples;
  if (q.lastMs > b.lastMs) {
    b.lastMs = q.lastMs;
    b.state = states[q.state] as string;
  }
  for (let m = 0; m < q.sums.length; m++) {
    b.sums[m] = (b.sums[m] as number) + (q.sums[m] as number);
    b.counts[m] = (b.counts[m] as number) + (q.counts[m] as number);
  }
}

/** The buckets of an averaged read, by start and connector; none outside the read or before its cursor. */
function createBuckets(read: TelemetryHistoryRead, bucketMs: number) {
  const start = readStart(read);
  const buckets = new Map<number, Bucket>();
  return {
    bucketMs,
    endMs: read.endMs,
    at(tsMs: number, connectorId: number): Bucket | undefined {
      if (tsMs < start.tsMs || tsMs >= read.endMs) return undefined;
      const ts = tsMs - (tsMs % bucketMs);
      if (ts === start.tsMs && connectorId <= start.connectorId) return undefined;
      // Connector ids are below 32: one number keys a bucket.
      const key = (ts / bucketMs) * 32 + connectorId;
      let b = buckets.get(key);
      if (!b) {
        b = newBucket(ts, connectorId);
        buckets.set(key, b);
      }
      return b;
    },
    all: () => [...buckets.values()],
  };
}

/**
 * Adds a block's samples to their buckets. Its times ascend, so a bucket takes a run of them: one lookup a run,
 * not a sample.
 */
function addColumns(
  buckets: ReturnType<typeof createBuckets>,
  cols: BlockColumns,
  connectorId: number,
  states: readonly string[],
): void {
  const values = TELEMETRY_MEASUREMENTS.map((m) => cols.values[m]);
  let i = 0;
  while (i < cols.count) {
    const first = cols.ts[i] as number;
    if (first >= buckets.endMs) return;
    const runEnd = Math.min(first - (first % buckets.bucketMs) + buckets.bucketMs, buckets.endMs);
    let j = i + 1;
    while (j < cols.count && (cols.ts[j] as number) < runEnd) j++;
    const b = buckets.at(first, connectorId);
    if (b) {
      b.samples += j - i;
      const lastTs = cols.ts[j - 1] as number;
      if (lastTs > b.lastMs) {
        b.lastMs = lastTs;
        b.state = states[cols.state[j - 1] as number] as string;
      }
      for (let m = 0; m < values.length; m++) {
        const column = values[m] as Float64Array;
        let sum = b.sums[m] as number;
        let n = b.counts[m] as number;
        for (let x = i; x < j; x++) {
          const v = column[x] as number;
          if (!Number.isNaN(v)) {
            sum += v;
            n++;
          }
        }
        b.sums[m] = sum;
        b.counts[m] = n;
      }
    }
    i = j;
  }
}

/** Whether the ascending `values` hold `x` (binary search). */
function sortedIncludes(values: Float64Array, x: number): boolean {
  let lo = 0;
  let hi = values.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const v = values[mid] as number;
    if (v === x) return true;
    if (v < x) lo = mid + 1;
    else hi = mid - 1;
  }
  return false;
}
