import { constants, zstdCompressSync, zstdDecompressSync } from 'node:zlib';

/**
 * The compressed block of one connector's samples (DESIGN.md §21): columnar, lossless, a few bytes a sample.
 *
 * Before compression a block is, little-endian:
 *   u8 version (1) · uvarint count
 *   times: uvarint first · uvarint first delta · zigzag varint delta-of-delta for each further sample
 *   states: one byte each (index into STATES)
 *   per measurement (MEASUREMENTS order): u8 mode · presence · values
 *     mode 0: no sample has it · 1: decimal, u8 scale k, zigzag varint deltas of round(v·10^k) ·
 *     2: float64 each (a value no decimal scale holds exactly)
 *     presence: u8 1 (every sample) or 0 and a bitmap of count bits
 *   phase details: presence, then uvarint byte length and UTF-8 JSON for each present
 * and then zstd over the whole. Times strictly increase (one sample per instant and connector). A decimal scale
 * is used only when every value reads back identical (`Object.is`), so the block is exact: what the charger
 * sent, as JSON numbers parse.
 */

export const STATES = ['idle', 'charging', 'discharging', 'fault'] as const;
export const MEASUREMENTS = [
  'voltage',
  'current',
  'power',
  'energy_delivered',
  'soc',
  'temperature',
] as const;
export type BlockMeasurement = (typeof MEASUREMENTS)[number];

/** One sample of a connector as a block holds it. */
export type BlockSample = {
  ts_ms: number;
  state: string;
  /** JSON text as the charger sent it, or null. */
  phase_details: string | null;
} & Record<BlockMeasurement, number | null>;

const VERSION = 1;
const MAX_SCALE = 9;
/** Scaled integers stay below this, so that deltas and their zigzag stay exact doubles. */
const MAX_SCALED = 2 ** 50;
const ZSTD_LEVEL = 9;

/** Encodes samples (sorted by `ts_ms`, each instant once) into a compressed block. */
export function encodeBlock(samples: readonly BlockSample[]): Buffer {
  const w = createWriter(64 + samples.length * 16);
  w.byte(VERSION);
  w.uvarint(samples.length);
  writeTimes(w, samples);
  for (const s of samples) {
    const i = STATES.indexOf(s.state as (typeof STATES)[number]);
    if (i < 0) throw new Error(`telemetry block: unknown state ${JSON.stringify(s.state)}`);
    w.byte(i);
  }
  for (const m of MEASUREMENTS) writeMeasurement(w, samples, m);
  const details = samples.map((s) => s.phase_details);
  writePresence(w, details);
  for (const d of details) {
    if (d === null) continue;
    const bytes = Buffer.from(d);
    w.uvarint(bytes.length);
    w.bytes(bytes);
  }
  return zstdCompressSync(w.done(), { params: { [constants.ZSTD_c_compressionLevel]: ZSTD_LEVEL } });
}

/**
 * A block's quarter-hour summary, stored beside it so that a read at 15-minute resolution need not decode it:
 * for each quarter of the block's hour, 15 float64 (little-endian): samples, the last sample's time, its state
 * (index into STATES), then each measurement's sum and then each one's count (MEASUREMENTS order). A quarter
 * without samples is all zeros. Sums add the values in time order from zero, exactly as a read that walks the
 * decoded block does, so the averages read back are the same numbers.
 */
export const SUMMARY_BUCKET_MS = 900_000;
export const SUMMARY_QUARTERS = 4;
const SUMMARY_FIELDS = 3 + 2 * MEASUREMENTS.length;

export function encodeSummary(samples: readonly BlockSample[], blockStartMs: number): Buffer {
  const out = new Float64Array(SUMMARY_QUARTERS * SUMMARY_FIELDS);
  for (const s of samples) {
    const q = Math.floor((s.ts_ms - blockStartMs) / SUMMARY_BUCKET_MS);
    if (q < 0 || q >= SUMMARY_QUARTERS) throw new Error('telemetry block: a sample outside its hour');
    const at = q * SUMMARY_FIELDS;
    out[at] = (out[at] as number) + 1;
    // Samples come in time order: the last one seen is the quarter's last.
    out[at + 1] = s.ts_ms;
    out[at + 2] = STATES.indexOf(s.state as (typeof STATES)[number]);
    MEASUREMENTS.forEach((m, k) => {
      const v = s[m];
      if (v === null) return;
      out[at + 3 + k] = (out[at + 3 + k] as number) + v;
      out[at + 3 + MEASUREMENTS.length + k] = (out[at + 3 + MEASUREMENTS.length + k] as number) + 1;
    });
  }
  return Buffer.from(out.buffer, out.byteOffset, out.byteLength);
}

/** One quarter of a summary: what a 15-minute bucket takes from the block. */
export interface SummaryQuarter {
  samples: number;
  lastMs: number;
  /** Index into STATES. */
  state: number;
  sums: number[];
  counts: number[];
}

/** The quarters of a stored summary (undefined for a quarter without samples). */
export function decodeSummary(summary: Uint8Array): Array<SummaryQuarter | undefined> {
  if (summary.byteLength !== SUMMARY_QUARTERS * SUMMARY_FIELDS * 8)
    throw new Error('telemetry block: corrupt summary');
  const view = new DataView(summary.buffer, summary.byteOffset, summary.byteLength);
  const field = (q: number, f: number) => view.getFloat64((q * SUMMARY_FIELDS + f) * 8, true);
  const quarters: Array<SummaryQuarter | undefined> = [];
  for (let q = 0; q < SUMMARY_QUARTERS; q++) {
    const samples = field(q, 0);
    if (samples === 0) {
      quarters.push(undefined);
      continue;
    }
    const n = MEASUREMENTS.length;
    quarters.push({
      samples,
      lastMs: field(q, 1),
      state: field(q, 2),
      sums: MEASUREMENTS.map((_, k) => field(q, 3 + k)),
      counts: MEASUREMENTS.map((_, k) => field(q, 3 + n + k)),
    });
  }
  return quarters;
}

/**
 * A block's samples as columns, in time order: what reads that average or filter walk without making an
 * object per sample. A measurement a sample did not have is NaN.
 */
export interface BlockColumns {
  count: number;
  ts: Float64Array;
  /** Index into STATES. */
  state: Uint8Array;
  values: Record<BlockMeasurement, Float64Array>;
  phaseDetails: Array<string | null>;
}

export function decodeColumns(block: Uint8Array): BlockColumns {
  const r = createReader(zstdDecompressSync(block));
  const columns = readColumns(r);
  if (!r.atEnd()) throw new Error('telemetry block: trailing bytes');
  return columns;
}

/** A block's content, decompressed. */
function readColumns(r: Reader): BlockColumns {
  const version = r.byte();
  if (version !== VERSION)
    throw new Error(`telemetry block: version ${version} is not one this platform reads`);
  const count = r.uvarint();
  // One allocation for every column: a typed array's own buffer costs more to make than its bytes to decode.
  const columns = new Float64Array(count * (1 + MEASUREMENTS.length));
  const column = (k: number) => columns.subarray(k * count, (k + 1) * count);
  const ts = readTimes(r, column(0));
  // A copy (slice), not Uint8Array.from: that walks the bytes through the iterator protocol.
  const state = r.take(count).slice();
  for (let i = 0; i < count; i++)
    if ((state[i] as number) >= STATES.length) throw new Error('telemetry block: corrupt state');
  const values = {} as Record<BlockMeasurement, Float64Array>;
  MEASUREMENTS.forEach((m, k) => {
    values[m] = readMeasurement(r, column(k + 1));
  });
  const detailsPresent = readPresence(r, count);
  const phaseDetails: Array<string | null> = new Array<string | null>(count).fill(null);
  for (let i = 0; i < count; i++)
    if (!detailsPresent || detailsPresent[i]) phaseDetails[i] = r.utf8(r.uvarint());
  return { count, ts, state, values, phaseDetails };
}

/** The samples of a block, in time order. */
export function decodeBlock(block: Uint8Array): BlockSample[] {
  const c = decodeColumns(block);
  const out: BlockSample[] = [];
  for (let i = 0; i < c.count; i++) out.push(sampleAt(c, i));
  return out;
}

/** The `i`th sample of decoded columns. */
export function sampleAt(c: BlockColumns, i: number): BlockSample {
  const s = { ts_ms: c.ts[i] as number, state: STATES[c.state[i] as number] as string } as BlockSample;
  for (const m of MEASUREMENTS) {
    const v = c.values[m][i] as number;
    s[m] = Number.isNaN(v) ? null : v;
  }
  s.phase_details = c.phaseDetails[i] ?? null;
  return s;
}

/**
 * `existing` and `incoming` as one time-ordered list, each instant once: a sample already in `existing` wins
 * (a re-sent sample is a duplicate, never a correction), as the recent table's unique index decides on insert.
 */
export function mergeSamples(
  existing: readonly BlockSample[],
  incoming: readonly BlockSample[],
): BlockSample[] {
  const byTime = new Map<number, BlockSample>();
  for (const s of incoming) if (!byTime.has(s.ts_ms)) byTime.set(s.ts_ms, s);
  for (const s of existing) byTime.set(s.ts_ms, s);
  return [...byTime.values()].sort((a, b) => a.ts_ms - b.ts_ms);
}

function writeTimes(w: Writer, samples: readonly BlockSample[]): void {
  let prev = 0;
  let prevDelta = 0;
  samples.forEach((s, i) => {
    if (!Number.isSafeInteger(s.ts_ms) || s.ts_ms < 0) throw new Error('telemetry block: bad timestamp');
    if (i === 0) w.uvarint(s.ts_ms);
    else {
      const delta = s.ts_ms - prev;
      if (delta <= 0) throw new Error('telemetry block: timestamps must strictly increase');
      if (i === 1) w.uvarint(delta);
      else w.varint(delta - prevDelta);
      prevDelta = delta;
    }
    prev = s.ts_ms;
  });
}

/** Reads the times into `out` (one per sample). */
function readTimes(r: Reader, out: Float64Array): Float64Array {
  const count = out.length;
  if (count === 0) return out;
  let prev = r.uvarint();
  out[0] = prev;
  if (count === 1) return out;
  let delta = r.uvarint();
  prev += delta;
  out[1] = prev;
  const deltas = r.zigzags(count - 2);
  for (let i = 2; i < count; i++) {
    delta += deltas[i - 2] as number;
    prev += delta;
    out[i] = prev;
  }
  return out;
}

/** The smallest decimal scale that holds every value exactly, or undefined. */
export function decimalScale(values: readonly number[]): number | undefined {
  let k = 0;
  for (const v of values) {
    while (k <= MAX_SCALE && !holds(v, k)) k++;
    if (k > MAX_SCALE) return undefined;
  }
  // A larger scale chosen for a later value must still hold the earlier ones.
  return values.every((v) => holds(v, k)) ? k : undefined;
}

function holds(v: number, k: number): boolean {
  const p = 10 ** k;
  const n = Math.round(v * p);
  return Math.abs(n) < MAX_SCALED && !Object.is(n, -0) && !Object.is(v, -0) && Object.is(n / p, v);
}

function writeMeasurement(w: Writer, samples: readonly BlockSample[], m: BlockMeasurement): void {
  const column = samples.map((s) => s[m]);
  const present = column.filter((v): v is number => v !== null);
  if (present.length === 0) {
    w.byte(0);
    return;
  }
  const k = decimalScale(present);
  w.byte(k === undefined ? 2 : 1);
  writePresence(w, column);
  if (k === undefined) {
    for (const v of present) w.float64(v);
    return;
  }
  w.byte(k);
  const p = 10 ** k;
  let prev = 0;
  for (const v of present) {
    const n = Math.round(v * p);
    w.varint(n - prev);
    prev = n;
  }
}

/** Reads a measurement into `out` (one per sample, zeroed): NaN where a sample lacks it. */
function readMeasurement(r: Reader, out: Float64Array): Float64Array {
  const count = out.length;
  const mode = r.byte();
  if (mode === 0) return out.fill(Number.NaN);
  const present = readPresence(r, count);
  // Every sample has it (the common case): no NaN to fill, no presence to test.
  if (present) out.fill(Number.NaN);
  if (mode === 2) {
    for (let i = 0; i < count; i++) if (!present || present[i]) out[i] = r.float64();
    return out;
  }
  if (mode !== 1) throw new Error('telemetry block: corrupt measurement');
  const p = 10 ** r.byte();
  let presentCount = count;
  if (present) for (let i = 0; i < count; i++) presentCount -= 1 - (present[i] as number);
  const deltas = r.zigzags(presentCount);
  let n = 0;
  for (let i = 0, k = 0; i < count; i++) {
    if (present && !present[i]) continue;
    n += deltas[k++] as number;
    out[i] = n / p;
  }
  return out;
}

function writePresence(w: Writer, column: ReadonlyArray<unknown>): void {
  if (column.every((v) => v !== null)) {
    w.byte(1);
    return;
  }
  w.byte(0);
  const bits = new Uint8Array(Math.ceil(column.length / 8));
  column.forEach((v, i) => {
    if (v !== null) bits[i >> 3]! |= 1 << (i & 7);
  });
  w.bytes(bits);
}

/** Which samples have a value (1), or undefined when every one has. */
function readPresence(r: Reader, count: number): Uint8Array | undefined {
  if (r.byte() === 1) return undefined;
  const out = new Uint8Array(count);
  const bits = r.take(Math.ceil(count / 8));
  for (let i = 0; i < count; i++) out[i] = (bits[i >> 3] as number) & (1 << (i & 7)) ? 1 : 0;
  return out;
}

interface Writer {
  byte(v: number): void;
  bytes(b: Uint8Array): void;
  uvarint(v: number): void;
  varint(v: number): void;
  float64(v: number): void;
  done(): Buffer;
}

function createWriter(initial: number): Writer {
  let buf = Buffer.allocUnsafe(initial);
  let at = 0;
  const room = (n: number) => {
    if (at + n <= buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(buf.length * 2, at + n));
    buf.copy(next, 0, 0, at);
    buf = next;
  };
  const uvarint = (v: number) => {
    room(8);
    // Arithmetic, not bit operators: values go past 32 bits.
    let x = v;
    while (x >= 128) {
      buf[at++] = (x % 128) | 128;
      x = Math.floor(x / 128);
    }
    buf[at++] = x;
  };
  return {
    byte(v) {
      room(1);
      buf[at++] = v;
    },
    bytes(b) {
      room(b.length);
      buf.set(b, at);
      at += b.length;
    },
    uvarint,
    varint(v) {
      uvarint(v < 0 ? -2 * v - 1 : 2 * v);
    },
    float64(v) {
      room(8);
      buf.writeDoubleLE(v, at);
      at += 8;
    },
    done: () => buf.subarray(0, at),
  };
}

interface Reader {
  atEnd(): boolean;
  byte(): number;
  take(n: number): Uint8Array;
  uvarint(): number;
  /**
   * `n` zigzag varints (the hot loop of a block, with the position in a local), in an array shared by every
   * call: valid until the next.
   */
  zigzags(n: number): Float64Array;
  float64(): number;
  utf8(n: number): string;
}

/** zigzags()'s answer: decoding is synchronous, so one array serves every block. */
let scratch = new Float64Array(1024);

function createReader(buf: Buffer): Reader {
  let at = 0;
  const need = (n: number) => {
    if (at + n > buf.length) throw new Error('telemetry block: truncated');
  };
  const uvarint = () => {
    // Most values fit one byte: that path first.
    const first = buf[at++];
    if (first === undefined) throw new Error('telemetry block: truncated');
    if (first < 128) return first;
    let x = first & 127;
    let scale = 128;
    for (;;) {
      const b = buf[at++];
      if (b === undefined) throw new Error('telemetry block: truncated');
      x += (b & 127) * scale;
      if (b < 128) return x;
      scale *= 128;
      if (scale > 2 ** 56) throw new Error('telemetry block: corrupt varint');
    }
  };
  return {
    atEnd: () => at === buf.length,
    byte() {
      need(1);
      return buf[at++] as number;
    },
    take(n) {
      need(n);
      const out = buf.subarray(at, at + n);
      at += n;
      return out;
    },
    uvarint,
    zigzags(n) {
      if (scratch.length < n) scratch = new Float64Array(Math.max(n, 2 * scratch.length));
      const out = scratch;
      const end = buf.length;
      let pos = at;
      for (let i = 0; i < n; i++) {
        if (pos >= end) throw new Error('telemetry block: truncated');
        let b = buf[pos++] as number;
        let z = b & 127;
        let scale = 128;
        while (b >= 128) {
          if (pos >= end) throw new Error('telemetry block: truncated');
          b = buf[pos++] as number;
          z += (b & 127) * scale;
          if (b < 128) break;
          scale *= 128;
          if (scale > 2 ** 56) throw new Error('telemetry block: corrupt varint');
        }
        // Bit operators while they are exact (below 2^31): `%` on a double is a slow fmod.
        if (z < 2_147_483_648) out[i] = z & 1 ? -((z >>> 1) + 1) : z >>> 1;
        else out[i] = z % 2 === 1 ? -(z + 1) / 2 : z / 2;
      }
      at = pos;
      return out;
    },
    float64() {
      need(8);
      const v = buf.readDoubleLE(at);
      at += 8;
      return v;
    },
    utf8(n) {
      need(n);
      const s = buf.toString('utf8', at, at + n);
      at += n;
      return s;
    },
  };
}
