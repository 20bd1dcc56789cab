import { describe, expect, it } from 'vitest';
import {
  BlockedAddressError,
  isPublicAddress,
  literalHostRefusal,
  publicOnlyLookup,
  SPECIAL_IPV4,
  SPECIAL_IPV6_IN_GLOBAL,
} from '../../../platform/webhooks/address-policy.js';

/** The first and last address of an IPv4 range (its public neighbours are listed by hand below). */
function v4Edges(net: string, prefix: number): { first: string; last: string } {
  const n = net.split('.').reduce((acc, part) => acc * 256 + Number(part), 0);
  const size = 2 ** (32 - prefix);
  const text = (x: number) => [24, 16, 8, 0].map((s) => Math.floor(x / 2 ** s) % 256).join('.');
  return { first: text(n), last: text(n + size - 1) };
}

describe('isPublicAddress: every special IPv4 range, at both edges', () => {
  const rows = SPECIAL_IPV4.flatMap(([net, prefix]) => {
    const e = v4Edges(net, prefix);
    return [
      [e.first, false, `${net}/${prefix} first`],
      [e.last, false, `${net}/${prefix} last`],
    ] as const;
  });
  it.each(rows)('%s → %s (%s)', (address, expected) => {
    expect(isPublicAddress(address)).toBe(expected);
  });
  it('has all the ranges of the design', () => {
    expect(SPECIAL_IPV4.map(([n, p]) => `${n}/${p}`)).toEqual([
      '0.0.0.0/8',
      '10.0.0.0/8',
      '100.64.0.0/10',
      '127.0.0.0/8',
      '169.254.0.0/16',
      '172.16.0.0/12',
      '192.0.0.0/24',
      '192.0.2.0/24',
      '192.88.99.0/24',
      '192.168.0.0/16',
      '198.18.0.0/15',
      '198.51.100.0/24',
      '203.0.113.0/24',
      '224.0.0.0/4',
      '240.0.0.0/4',
    ]);
  });
});

describe('isPublicAddress: the public neighbours of the IPv4 ranges', () => {
  it.each([
    ['1.0.0.0'], // after 0/8
    ['9.255.255.255'], // before 10/8
    ['11.0.0.0'], // after 10/8
    ['100.63.255.255'], // before 100.64/10
    ['100.128.0.0'], // after 100.64/10
    ['126.255.255.255'], // before 127/8
    ['128.0.0.0'], // after 127/8
    ['169.253.255.255'], // before 169.254/16
    ['169.255.0.0'], // after 169.254/16
    ['172.15.255.255'], // before 172.16/12
    ['172.32.0.0'], // after 172.16/12
    ['191.255.255.255'], // before 192.0.0/24
    ['192.0.1.0'], // between 192.0.0/24 and 192.0.2/24
    ['192.0.3.0'], // after 192.0.2/24
    ['192.88.98.255'], // before 192.88.99/24
    ['192.88.100.0'], // after 192.88.99/24
    ['192.167.255.255'], // before 192.168/16
    ['192.169.0.0'], // after 192.168/16
    ['198.17.255.255'], // before 198.18/15
    ['198.20.0.0'], // after 198.18/15
    ['198.51.99.255'], // before 198.51.100/24
    ['198.51.101.0'], // after 198.51.100/24
    ['203.0.112.255'], // before 203.0.113/24
    ['203.0.114.0'], // after 203.0.113/24
    ['223.255.255.255'], // before 224/4
    ['8.8.8.8'],
    ['93.184.216.34'],
  ])('%s is public', (address) => {
    expect(isPublicAddress(address)).toBe(true);
  });
  it.each([['255.255.255.255'], ['239.255.255.255'], ['240.0.0.1']])('%s is not', (address) => {
    expect(isPublicAddress(address)).toBe(false);
  });
});

describe('isPublicAddress: IPv6', () => {
  it.each([
    // Global unicast, ordinary hosts.
    ['2606:4700:4700::1111', true],
    ['2a00:1450:4001:81c::200e', true],
    ['2000::', true], // first of 2000::/3
    ['3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff', true],
    ['3fef:ffff:ffff:ffff:ffff:ffff:ffff:ffff', true], // just before 3fff::/20
    ['2001:200::1', true], // just after 2001::/23
    ['2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff', false], // last of 2001::/23
    ['2001:4860:4860::8888', true],
    ['2003::1', true], // just after 6to4
    ['2001:ffff:ffff:ffff:ffff:ffff:ffff:ffff', true], // just before 6to4
    // Outside 2000::/3.
    ['1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', false],
    ['4000::', false],
    ['::', false],
    ['::1', false],
    ['fe80::1', false],
    ['fe80::1%eth0', false],
    ['febf:ffff::1', false],
    ['fec0::1', false], // site-local
    ['feff:ffff::1', false],
    ['fc00::1', false],
    ['fd12:3456::1', false],
    ['ff02::1', false],
    ['ff0e::1', false],
    ['100::1', false], // discard
    // NAT64.
    ['64:ff9b::7f00:1', false],
    ['64:ff9b::808:808', false],
    ['64:ff9b::8.8.8.8', false],
    ['64:ff9b:1::1', false],
    // 6to4, Teredo and the rest of 2001::/23.
    ['2002:7f00:1::1', false],
    ['2002:808:808::1', false],
    ['2002::', false],
    ['2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff', false],
    ['2001::1', false],
    ['2001:0:4136:e378:8000:63bf:80ff:fffe', false],
    ['2001:2::1', false], // benchmarking
    ['2001:10::1', false], // ORCHID
    ['2001:20::1', false], // ORCHIDv2
    // Documentation.
    ['2001:db8::1', false],
    ['2001:db8:ffff:ffff:ffff:ffff:ffff:ffff', false],
    ['3fff::1', false],
    ['3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff', false],
    ['5f00::1', false],
    // IPv4-compatible (deprecated): refused whatever it embeds.
    ['::7f00:1', false],
    ['::127.0.0.1', false],
    ['::8.8.8.8', false],
    ['::808:808', false],
    // IPv4-mapped: judged by the IPv4 address carried.
    ['::ffff:127.0.0.1', false],
    ['::ffff:7f00:1', false],
    ['::ffff:10.0.0.1', false],
    ['::ffff:a9fe:a9fe', false],
    ['::ffff:8.8.8.8', true],
    ['::ffff:808:808', true],
    ['::ffff:0:0', false],
    // Not addresses.
    ['not an address', false],
    ['', false],
    ['127.1', false],
  ])('%s → %s', (address, expected) => {
    expect(isPublicAddress(address)).toBe(expected);
  });

  it.each(SPECIAL_IPV6_IN_GLOBAL.map(([net, prefix]) => [`${net}/${prefix}`, net]))(
    'refuses the first address of %s',
    (_range, net) => {
      expect(isPublicAddress(net)).toBe(false);
    },
  );
});

describe('literalHostRefusal', () => {
  it.each([
    ['https://example.com/hook', undefined],
    ['https://93.184.216.34/hook', undefined],
    ['https://[2606:4700:4700::1111]/hook', undefined],
    ['https://localhost/hook', 'localhost is not allowed'],
    ['https://localhost./hook', 'localhost is not allowed'],
    ['https://api.localhost/hook', 'localhost is not allowed'],
    ['https://127.0.0.1:8443/hook', '127.0.0.1 is not a public address'],
    ['https://2130706433/hook', '127.0.0.1 is not a public address'],
    ['https://0x7f.1/hook', '127.0.0.1 is not a public address'],
    ['https://[::1]/hook', '::1 is not a public address'],
    ['https://[::127.0.0.1]/hook', '::7f00:1 is not a public address'],
    ['https://[::ffff:127.0.0.1]/hook', '::ffff:7f00:1 is not a public address'],
    ['https://[2002:7f00:1::1]/hook', '2002:7f00:1::1 is not a public address'],
    ['https://[64:ff9b::127.0.0.1]/hook', '64:ff9b::7f00:1 is not a public address'],
    ['https://[fec0::1]/hook', 'fec0::1 is not a public address'],
    ['https://169.254.169.254/latest/meta-data', '169.254.169.254 is not a public address'],
  ])('%s', (url, expected) => {
    expect(literalHostRefusal(new URL(url))).toBe(expected);
  });
});

describe('publicOnlyLookup', () => {
  it('refuses a name that resolves to a loopback address', async () => {
    const err = await new Promise<unknown>((resolve) =>
      publicOnlyLookup('localhost', { all: true }, (e) => resolve(e)),
    );
    expect(err).toBeInstanceOf(BlockedAddressError);
  });
});
