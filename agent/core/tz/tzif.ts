/**
 * A zone of the tz database from its compiled TZif file (RFC 8536, versions 1 to 4), as the system keeps it in
 * /usr/share/zoneinfo: the listed offset changes, then the footer's POSIX rule for every later instant. Pure:
 * bytes in, offsets out; reading the file is `zone-offsets.ts`'s job.
 *
 * Why not Intl: the first `Intl.DateTimeFormat` of a process loads ICU's date formatting, about 7 MiB of a
 * charger's memory (docs/benchmarks.md, "Agent footprint"), for what is a table lookup.
 */
import { type PosixRule, parsePosixRule, posixOffsetAt } from './posix-rule.js';

export interface ZoneRules {
  /** Instants (ms since the epoch, ascending) at which the offset changes. */
  transitions: Float64Array;
  /** The UTC offset in ms in force from `transitions[i]` on. */
  offsetsFrom: Float64Array;
  /** The offset before the first transition (RFC 8536: local time type 0). */
  initialOffsetMs: number;
  /** The rule after the last transition, when the file has one. */
  footer: PosixRule | undefined;
}

export class TzifError extends Error {}

const HEADER_BYTES = 44;

/** Parses a TZif file; throws `TzifError` when it is not one, is cut short, or counts leap seconds. */
export function parseTzif(bytes: Uint8Array): ZoneRules {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const first = readHeader(view, 0);
  if (first.version === 0) return readBody(view, HEADER_BYTES, first, 4).rules;
  // Version 2+: skip the 32-bit block, read the 64-bit one and the footer after it.
  const secondAt = HEADER_BYTES + blockBytes(first, 4);
  const second = readHeader(view, secondAt);
  const { rules, end } = readBody(view, secondAt + HEADER_BYTES, second, 8);
  return { ...rules, footer: readFooter(bytes, end) };
}

/** UTC offset in ms at `instantMs`. */
export function offsetAt(rules: ZoneRules, instantMs: number): number {
  const { transitions, offsetsFrom, footer } = rules;
  const count = transitions.length;
  if (count === 0) return footer ? posixOffsetAt(footer, instantMs) : rules.initialOffsetMs;
  if (instantMs < (transitions[0] as number)) return rules.initialOffsetMs;
  if (instantMs >= (transitions[count - 1] as number) && footer) return posixOffsetAt(footer, instantMs);
  // Last transition at or before the instant.
  let low = 0;
  let high = count - 1;
  while (low < high) {
    const middle = (low + high + 1) >> 1;
    if ((transitions[middle] as number) <= instantMs) low = middle;
    else high = middle - 1;
  }
  return offsetsFrom[low] as number;
}

interface Header {
  version: number;
  isUtCount: number;
  isStdCount: number;
  leapCount: number;
  timeCount: number;
  typeCount: number;
  charCount: number;
}

function readHeader(view: DataView, at: number): Header {
  if (view.byteLength < at + 4 || view.getUint32(at) !== 0x545a6966) {
    throw new TzifError('not a TZif file (no "TZif" magic)');
  }
  need(view, at + HEADER_BYTES);
  const versionByte = view.getUint8(at + 4);
  const version = versionByte === 0 ? 0 : versionByte - 0x30;
  if (version < 0 || version > 9) throw new TzifError(`unknown TZif version byte ${versionByte}`);
  const count = (index: number) => view.getUint32(at + 20 + index * 4);
  const header = {
    version,
    isUtCount: count(0),
    isStdCount: count(1),
    leapCount: count(2),
    timeCount: count(3),
    typeCount: count(4),
    charCount: count(5),
  };
  if (header.typeCount === 0) throw new TzifError('TZif file with no local time types');
  // Files under right/ count leap seconds: their timestamps are not POSIX time.
  if (header.leapCount > 0) throw new TzifError('TZif file with leap seconds is not supported');
  return header;
}

function blockBytes(header: Header, timeSize: 4 | 8): number {
  return (
    header.timeCount * (timeSize + 1) +
    header.typeCount * 6 +
    header.charCount +
    header.leapCount * (timeSize + 4) +
    header.isStdCount +
    header.isUtCount
  );
}

function readBody(
  view: DataView,
  at: number,
  header: Header,
  timeSize: 4 | 8,
): { rules: ZoneRules; end: number } {
  const end = at + blockBytes(header, timeSize);
  need(view, end);
  const { timeCount, typeCount } = header;
  const typesAt = at + timeCount * timeSize + timeCount;
  const typeOffsetMs = (index: number) => {
    if (index >= typeCount) throw new TzifError(`transition to local time type ${index} of ${typeCount}`);
    return view.getInt32(typesAt + index * 6) * 1000;
  };
  const transitions = new Float64Array(timeCount);
  const offsetsFrom = new Float64Array(timeCount);
  for (let i = 0; i < timeCount; i++) {
    const seconds = timeSize === 8 ? Number(view.getBigInt64(at + i * 8)) : view.getInt32(at + i * 4);
    transitions[i] = seconds * 1000;
    if (i > 0 && (transitions[i] as number) <= (transitions[i - 1] as number)) {
      throw new TzifError('TZif transitions out of order');
    }
    offsetsFrom[i] = typeOffsetMs(view.getUint8(at + timeCount * timeSize + i));
  }
  return { rules: { transitions, offsetsFrom, initialOffsetMs: typeOffsetMs(0), footer: undefined }, end };
}

/** The footer: `\n` TZ string `\n`; an empty string means the last offset holds. */
function readFooter(bytes: Uint8Array, at: number): PosixRule | undefined {
  if (bytes[at] !== 0x0a) throw new TzifError('TZif footer does not start with a newline');
  const close = bytes.indexOf(0x0a, at + 1);
  if (close < 0) throw new TzifError('TZif footer does not end with a newline');
  const text = String.fromCharCode(...bytes.subarray(at + 1, close));
  return text === '' ? undefined : parsePosixRule(text);
}

function need(view: DataView, end: number): void {
  if (view.byteLength < end) throw new TzifError(`TZif file cut short (${view.byteLength} of ${end} bytes)`);
}
