/**
 * Builds TZif files (RFC 8536) for tests of the agent's reader: the layout written out field by field from the
 * RFC, independent of the reader, so a misread offset or count shows up as a wrong answer.
 */
export interface TzifInput {
  version?: 1 | 2 | 3;
  /** Transition times in seconds, and the local time type each one switches to. */
  transitions?: { at: number; type: number }[];
  /** Local time types: UTC offset in seconds and whether it is daylight time. */
  types: { utoff: number; isdst?: boolean }[];
  /** The footer's TZ string (version 2+). */
  footer?: string;
  leapSeconds?: number;
}

export function writeTzif(input: TzifInput): Uint8Array {
  const version = input.version ?? 2;
  const transitions = input.transitions ?? [];
  const header = (timeSize: 4 | 8) =>
    block(version, transitions, input.types, input.leapSeconds ?? 0, timeSize);
  if (version === 1) return concat([header(4)]);
  const footer = new TextEncoder().encode(`\n${input.footer ?? ''}\n`);
  return concat([header(4), header(8), footer]);
}

function block(
  version: number,
  transitions: NonNullable<TzifInput['transitions']>,
  types: TzifInput['types'],
  leapSeconds: number,
  timeSize: 4 | 8,
): Uint8Array {
  const chars = new TextEncoder().encode('ZZZ\0');
  const bytes = new Uint8Array(
    44 + transitions.length * (timeSize + 1) + types.length * 6 + chars.length + leapSeconds * (timeSize + 4),
  );
  const view = new DataView(bytes.buffer);
  bytes.set([0x54, 0x5a, 0x69, 0x66], 0); // "TZif"
  bytes[4] = version === 1 ? 0 : 0x30 + version;
  // isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt
  [0, 0, leapSeconds, transitions.length, types.length, chars.length].forEach((count, i) => {
    view.setUint32(20 + i * 4, count);
  });
  let at = 44;
  for (const { at: seconds } of transitions) {
    if (timeSize === 8) view.setBigInt64(at, BigInt(seconds));
    else view.setInt32(at, Math.max(-(2 ** 31), Math.min(2 ** 31 - 1, seconds)));
    at += timeSize;
  }
  for (const { type } of transitions) bytes[at++] = type;
  for (const { utoff, isdst } of types) {
    view.setInt32(at, utoff);
    bytes[at + 4] = isdst ? 1 : 0;
    bytes[at + 5] = 0;
    at += 6;
  }
  bytes.set(chars, at);
  return bytes;
}

function concat(parts: Uint8Array[]): Uint8Array {
  const all = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const part of parts) {
    all.set(part, at);
    at += part.length;
  }
  return all;
}
