import { describe, expect, it } from 'vitest';
import { addressKey } from '../../../platform/http/rate-limit/address-key.js';

describe('addressKey: what a per-address budget counts', () => {
  const cases: Array<[ip: string, key: string, why: string]> = [
    ['127.0.0.1', '127.0.0.1', 'IPv4 as is'],
    ['203.0.113.7', '203.0.113.7', 'IPv4 as is'],
    ['::ffff:203.0.113.7', '203.0.113.7', 'IPv4-mapped (a dual-stack listener) is the IPv4 address'],
    ['::FFFF:cb00:7107', '203.0.113.7', 'IPv4-mapped in hex'],
    ['2001:db8:1:2:3:4:5:6', '2001:db8:1:2::/64', 'IPv6 per /64'],
    ['2001:db8:1:2:ffff:ffff:ffff:ffff', '2001:db8:1:2::/64', 'the same /64'],
    ['2001:0DB8:0001:0002::1', '2001:db8:1:2::/64', 'leading zeros and case'],
    ['2001:db8::1', '2001:db8:0:0::/64', 'compressed'],
    ['2001:db8:0:3::1', '2001:db8:0:3::/64', 'another /64'],
    ['::1', '0:0:0:0::/64', 'loopback'],
    ['::', '0:0:0:0::/64', 'unspecified'],
    ['fe80::1%eth0', 'fe80:0:0:0::/64', 'a zone id'],
    ['64:ff9b::192.0.2.33', '64:ff9b:0:0::/64', 'NAT64 with a dotted tail'],
    ['', '', 'no address'],
    ['not-an-address', 'not-an-address', 'as given'],
  ];
  it.each(cases)('%s → %s (%s)', (ip, key) => {
    expect(addressKey(ip)).toBe(key);
  });
});
