/**
 * PROXY protocol version 2 (HAProxy `send-proxy-v2`; https://www.haproxy.org/download/2.6/doc/proxy-protocol.txt
 * §2.2): the binary header a TCP balancer puts before the client's bytes, naming the client's address. Only the
 * binary v2 form is accepted: the v1 text line, or anything else, is refused.
 */

/** `\r\n\r\n\0\r\nQUIT\n`: the first 12 bytes of every v2 header. */
export const PROXY_V2_SIGNATURE = Buffer.from([
  0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a,
]);
const FIXED_BYTES = 16;
/**
 * Addresses and TLVs past this are refused: HAProxy sends 12 (IPv4) or 36 (IPv6) bytes unless told to add TLVs,
 * and an unbounded length would let a connection make the instance hold 64 KiB while it waits.
 */
export const MAX_PROXY_V2_PAYLOAD = 2_048;

const COMMAND_LOCAL = 0x0;
const COMMAND_PROXY = 0x1;
const FAMILY_INET = 0x1;
const FAMILY_INET6 = 0x2;
const TRANSPORT_STREAM = 0x1;

export interface ProxiedClient {
  address: string;
  port: number;
  family: 'IPv4' | 'IPv6';
}

export type ProxyHeader =
  /** More bytes are needed to decide. */
  | { kind: 'incomplete' }
  | { kind: 'invalid'; reason: string }
  /** A connection of the balancer's own (its health checks): keep the socket's address. */
  | { kind: 'local'; length: number }
  | { kind: 'proxy'; length: number; client: ProxiedClient };

/** Reads the header at the start of `bytes` (what has arrived so far); `length` is how many bytes it took. */
export function parseProxyV2(bytes: Uint8Array): ProxyHeader {
  const seen = Math.min(bytes.length, PROXY_V2_SIGNATURE.length);
  for (let i = 0; i < seen; i++) {
    if (bytes[i] !== PROXY_V2_SIGNATURE[i])
      return {
        kind: 'invalid',
        reason: startsLikeV1(bytes) ? 'PROXY protocol v1 (text)' : 'no PROXY v2 signature',
      };
  }
  if (bytes.length < FIXED_BYTES) return { kind: 'incomplete' };
  const versionCommand = bytes[12]!;
  if (versionCommand >> 4 !== 2) return { kind: 'invalid', reason: `version ${versionCommand >> 4}, not 2` };
  const command = versionCommand & 0x0f;
  if (command !== COMMAND_LOCAL && command !== COMMAND_PROXY)
    return { kind: 'invalid', reason: `unknown command ${command}` };
  const payload = (bytes[14]! << 8) | bytes[15]!;
  if (payload > MAX_PROXY_V2_PAYLOAD)
    return { kind: 'invalid', reason: `header of ${payload} bytes, over ${MAX_PROXY_V2_PAYLOAD}` };
  const length = FIXED_BYTES + payload;
  if (bytes.length < length) return { kind: 'incomplete' };
  // LOCAL: the balancer speaking for itself; whatever address block follows is ignored (§2.2).
  if (command === COMMAND_LOCAL) return { kind: 'local', length };

  const family = bytes[13]! >> 4;
  const transport = bytes[13]! & 0x0f;
  // UNSPEC carries no client address and UNIX a path: neither names a client to key lock-outs by.
  if (family !== FAMILY_INET && family !== FAMILY_INET6)
    return { kind: 'invalid', reason: `address family ${family} not supported` };
  if (transport !== TRANSPORT_STREAM)
    return { kind: 'invalid', reason: `transport ${transport}, not a stream` };
  const view = Buffer.from(bytes.buffer, bytes.byteOffset, length);
  if (family === FAMILY_INET) {
    if (payload < 12) return { kind: 'invalid', reason: 'IPv4 addresses truncated' };
    const address = [...view.subarray(16, 20)].join('.');
    return { kind: 'proxy', length, client: { address, port: view.readUInt16BE(24), family: 'IPv4' } };
  }
  if (payload < 36) return { kind: 'invalid', reason: 'IPv6 addresses truncated' };
  const address = formatIpv6(view.subarray(16, 32));
  return { kind: 'proxy', length, client: { address, port: view.readUInt16BE(48), family: 'IPv6' } };
}

function startsLikeV1(bytes: Uint8Array): boolean {
  return (
    Buffer.from(bytes.buffer, bytes.byteOffset, Math.min(bytes.length, 6)).toString('latin1') === 'PROXY '
  );
}

/** RFC 5952 text (lower case, the longest run of two or more zero groups as `::`), as Node prints addresses. */
export function formatIpv6(bytes: Uint8Array): string {
  const groups: number[] = [];
  for (let i = 0; i < 16; i += 2) groups.push((bytes[i]! << 8) | bytes[i + 1]!);
  // IPv4-mapped addresses as Node's remoteAddress shows them: ::ffff:192.0.2.1.
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff)
    return `::ffff:${bytes[12]}.${bytes[13]}.${bytes[14]}.${bytes[15]}`;
  let bestStart = -1;
  let bestLength = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLength) {
      bestStart = i;
      bestLength = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestStart < 0) return hex.join(':');
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLength).join(':')}`;
}
