import { isIPv4, isIPv6 } from 'node:net';

/**
 * The source a per-address budget counts (DESIGN.md §18). IPv4 counts per address (an IPv4-mapped IPv6 address,
 * as a dual-stack listener reports IPv4 peers, is the IPv4 address). IPv6 counts per /64: one host or site is
 * given a whole /64 and may pick any address in it, so per /128 a single machine could mint a fresh budget per
 * request. Anything else (no address known) is counted as given.
 */
export function addressKey(ip: string): string {
  if (isIPv4(ip)) return ip;
  const bare = ip.split('%')[0]!;
  if (!isIPv6(bare)) return ip;
  const groups = ipv6Groups(bare);
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) {
    return [groups[6]! >> 8, groups[6]! & 0xff, groups[7]! >> 8, groups[7]! & 0xff].join('.');
  }
  return `${groups
    .slice(0, 4)
    .map((g) => g.toString(16))
    .join(':')}::/64`;
}

/** The eight 16-bit groups of a valid IPv6 address (`::` expanded, a dotted IPv4 tail as two groups). */
function ipv6Groups(ip: string): number[] {
  let text = ip.toLowerCase();
  const dotted = text.match(/(\d+)\.(\d+)\.(\d+)\.(\d+)$/);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split('::') as [string, string | undefined];
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((h) => Number.parseInt(h, 16)));
  const front = parse(head);
  if (tail === undefined) return front;
  const back = parse(tail);
  return [...front, ...new Array<number>(8 - front.length - back.length).fill(0), ...back];
}
