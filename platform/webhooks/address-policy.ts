import { type LookupAddress, type LookupOptions, lookup } from 'node:dns';
import { BlockList, isIP } from 'node:net';

/**
 * Webhook URLs may reach only public unicast addresses (DESIGN.md §14 and §18, SSRF), checked on the address
 * actually connected to, at every delivery (a name that resolved to a public address yesterday may not today).
 *
 * IPv4: everything outside the special-purpose ranges (RFC 6890, the IANA registry). IPv6: an allow-list, only
 * global unicast 2000::/3, less the parts of it that are not ordinary hosts or that carry an IPv4 address a
 * relay would reach for us (6to4, Teredo). Everything outside 2000::/3 is refused (loopback, unspecified,
 * link-local, site-local fec0::/10, unique-local, multicast, NAT64 64:ff9b::/96 and 64:ff9b:1::/48, discard,
 * IPv4-compatible ::a.b.c.d), except IPv4-mapped ::ffff:a.b.c.d, judged by the IPv4 address it carries.
 */
const blockedV4 = new BlockList();
/** The special-purpose IPv4 ranges; exported for the table-driven tests, which check each range's edges. */
export const SPECIAL_IPV4: readonly (readonly [string, number])[] = [
  ['0.0.0.0', 8], // "this network"
  ['10.0.0.0', 8], // private
  ['100.64.0.0', 10], // shared (carrier-grade NAT)
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local (cloud metadata)
  ['172.16.0.0', 12], // private
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // documentation
  ['192.88.99.0', 24], // 6to4 relay anycast
  ['192.168.0.0', 16], // private
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation
  ['203.0.113.0', 24], // documentation
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, and 255.255.255.255 broadcast
];
for (const [net, prefix] of SPECIAL_IPV4) blockedV4.addSubnet(net, prefix, 'ipv4');

const globalUnicastV6 = new BlockList();
globalUnicastV6.addSubnet('2000::', 3, 'ipv6');

const blockedV6 = new BlockList();
/** Parts of 2000::/3 refused; exported for the tests. */
export const SPECIAL_IPV6_IN_GLOBAL: readonly (readonly [string, number])[] = [
  // IETF protocol assignments: Teredo 2001::/32, benchmarking, AMT, AS112, ORCHID(v2), DRIP; no receivers.
  ['2001::', 23],
  ['2001:db8::', 32], // documentation
  ['2002::', 16], // 6to4: a relay would reach the IPv4 address it embeds
  ['3fff::', 20], // documentation (RFC 9637)
  ['5f00::', 16], // SRv6 segment identifiers (RFC 9602)
];
for (const [net, prefix] of SPECIAL_IPV6_IN_GLOBAL) blockedV6.addSubnet(net, prefix, 'ipv6');

const mappedV4 = new BlockList();
mappedV4.addSubnet('::ffff:0:0', 96, 'ipv6');

/** True for an address a webhook may be delivered to. */
export function isPublicAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return !blockedV4.check(address, 'ipv4');
  if (family !== 6) return false;
  // A zone (fe80::1%eth0) only ever goes with link-local addresses; BlockList does not read one.
  if (address.includes('%')) return false;
  if (mappedV4.check(address, 'ipv6')) {
    const v4 = embeddedIpv4(address);
    return v4 !== undefined && isPublicAddress(v4);
  }
  return globalUnicastV6.check(address, 'ipv6') && !blockedV6.check(address, 'ipv6');
}

/** The IPv4 address in the low 32 bits of an IPv6 address written either way (`::ffff:7f00:1`, `::ffff:1.2.3.4`). */
function embeddedIpv4(address: string): string | undefined {
  const dotted = /(\d{1,3}(?:\.\d{1,3}){3})$/.exec(address);
  if (dotted?.[1]) return dotted[1];
  const groups = /([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(address);
  if (!groups?.[1] || !groups[2]) return undefined;
  const hi = Number.parseInt(groups[1], 16);
  const lo = Number.parseInt(groups[2], 16);
  return [hi >> 8, hi & 0xff, lo >> 8, lo & 0xff].join('.');
}

export class BlockedAddressError extends Error {
  readonly code = 'WEBHOOK_ADDRESS_BLOCKED';
}

type LookupCallback = (
  err: NodeJS.ErrnoException | null,
  address: string | LookupAddress[],
  family?: number,
) => void;

/**
 * A `lookup` for `net.connect`/`tls.connect` that resolves as usual and refuses a name with any address that is
 * not public, so the connection can only go where the check allowed.
 */
export function publicOnlyLookup(hostname: string, options: LookupOptions, callback: LookupCallback): void {
  lookup(hostname, { ...options, all: true }, (err, addresses) => {
    if (err) return callback(err, []);
    const bad = addresses.find((a) => !isPublicAddress(a.address));
    if (bad) {
      return callback(
        new BlockedAddressError(`${hostname} resolves to ${bad.address}, a non-public address`),
        [],
      );
    }
    if (options.all) return callback(null, addresses);
    const first = addresses[0];
    if (!first) return callback(new Error(`${hostname} did not resolve`), []);
    callback(null, first.address, first.family);
  });
}

/** Refuses a URL whose host is written as a non-public address (a name is checked when connecting). */
export function literalHostRefusal(url: URL): string | undefined {
  const host = url.hostname.replace(/^\[|\]$/g, '').replace(/\.$/, '');
  if (host === 'localhost' || host.endsWith('.localhost')) return 'localhost is not allowed';
  if (isIP(host) && !isPublicAddress(host)) return `${host} is not a public address`;
  return undefined;
}
