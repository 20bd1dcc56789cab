import { describe, expect, it } from 'vitest';
import {
  formatIpv6,
  MAX_PROXY_V2_PAYLOAD,
  type ProxyHeader,
  parseProxyV2,
} from '../../../platform/http/proxy-protocol.js';

const SIG = '0d0a0d0a000d0a515549540a';

/** A v2 header: signature, version/command byte, family/transport byte, then `payload` (hex) with its length. */
function header(versionCommand: number, familyTransport: number, payload: string): Buffer {
  const body = Buffer.from(payload.replace(/\s/g, ''), 'hex');
  const fixed = Buffer.from(SIG, 'hex');
  const len = Buffer.alloc(2);
  len.writeUInt16BE(body.length);
  return Buffer.concat([fixed, Buffer.from([versionCommand, familyTransport]), len, body]);
}

// 203.0.113.7:51000 -> 10.0.0.5:8443
const IPV4 = 'cb007107 0a000005 c738 20fb';
// 2001:db8::1:51000 -> 2001:db8::2:8443
const IPV6 = '20010db8000000000000000000000001 20010db8000000000000000000000002 c738 20fb';
// A TLV (type 0x04 NOOP, 3 bytes) and an authority TLV (0x02, "example.com").
const TLVS = '04 0003 000000 02 000b 6578616d706c652e636f6d';
const TLS_CLIENT_HELLO = Buffer.from('160301020001', 'hex');

const v4Proxy = header(0x21, 0x11, IPV4);
const v6Proxy = header(0x21, 0x21, IPV6);

describe('parseProxyV2', () => {
  it.each<[string, Buffer, ProxyHeader]>([
    [
      'IPv4 over TCP',
      v4Proxy,
      { kind: 'proxy', length: 28, client: { address: '203.0.113.7', port: 51000, family: 'IPv4' } },
    ],
    [
      'IPv6 over TCP',
      v6Proxy,
      { kind: 'proxy', length: 52, client: { address: '2001:db8::1', port: 51000, family: 'IPv6' } },
    ],
    [
      'IPv4 with TLVs after the addresses: skipped',
      header(0x21, 0x11, IPV4 + TLVS),
      { kind: 'proxy', length: 28 + 20, client: { address: '203.0.113.7', port: 51000, family: 'IPv4' } },
    ],
    [
      'the TLS ClientHello right behind it is not part of the header',
      Buffer.concat([v4Proxy, TLS_CLIENT_HELLO]),
      { kind: 'proxy', length: 28, client: { address: '203.0.113.7', port: 51000, family: 'IPv4' } },
    ],
    ['LOCAL (a health check), no addresses', header(0x20, 0x00, ''), { kind: 'local', length: 16 }],
    ['LOCAL with an address block: ignored', header(0x20, 0x11, IPV4), { kind: 'local', length: 28 }],
    ['nothing yet', Buffer.alloc(0), { kind: 'incomplete' }],
    ['part of the signature', Buffer.from(SIG.slice(0, 10), 'hex'), { kind: 'incomplete' }],
    ['signature without the rest of the fixed part', v4Proxy.subarray(0, 15), { kind: 'incomplete' }],
    ['IPv4 header truncated in the addresses', v4Proxy.subarray(0, 27), { kind: 'incomplete' }],
    ['IPv6 header truncated in the addresses', v6Proxy.subarray(0, 40), { kind: 'incomplete' }],
  ])('%s', (_name, bytes, want) => {
    expect(parseProxyV2(bytes)).toEqual(want);
  });

  it.each<[string, Buffer, RegExp]>([
    ['a TLS ClientHello (no header at all)', TLS_CLIENT_HELLO, /no PROXY v2 signature/],
    ['plain HTTP', Buffer.from('GET / HTTP/1.1\r\n'), /no PROXY v2 signature/],
    ['PROXY v1 text', Buffer.from('PROXY TCP4 203.0.113.7 10.0.0.5 51000 8443\r\n'), /v1/],
    ['the signature wrong in its last byte', Buffer.from(`${SIG.slice(0, 22)}0b`, 'hex'), /signature/],
    ['version 1 in the binary form', header(0x11, 0x11, IPV4), /version 1/],
    ['version 3', header(0x31, 0x11, IPV4), /version 3/],
    ['an unknown command', header(0x22, 0x11, IPV4), /command 2/],
    ['PROXY with family UNSPEC', header(0x21, 0x00, ''), /family 0/],
    ['PROXY with a UNIX address', header(0x21, 0x31, '00'.repeat(216)), /family 3/],
    ['PROXY with an unknown family', header(0x21, 0x41, IPV4), /family 4/],
    ['PROXY over UDP', header(0x21, 0x12, IPV4), /transport 2/],
    [
      'an IPv4 block shorter than the addresses',
      header(0x21, 0x11, 'cb007107 0a000005'),
      /IPv4 addresses truncated/,
    ],
    ['an IPv6 block shorter than the addresses', header(0x21, 0x21, IPV4), /IPv6 addresses truncated/],
    [
      'a length past the bound (refused before it all arrives)',
      Buffer.concat([Buffer.from(SIG, 'hex'), Buffer.from([0x21, 0x11, 0x08, 0x01])]),
      /2049 bytes/,
    ],
  ])('refuses %s', (_name, bytes, reason) => {
    const got = parseProxyV2(bytes);
    expect(got.kind).toBe('invalid');
    if (got.kind === 'invalid') expect(got.reason).toMatch(reason);
  });

  it('accepts TLVs up to the bound', () => {
    const atBound = header(0x21, 0x11, IPV4 + '04'.padEnd(2 * (MAX_PROXY_V2_PAYLOAD - 12), '0'));
    expect(parseProxyV2(atBound)).toMatchObject({ kind: 'proxy', length: 16 + MAX_PROXY_V2_PAYLOAD });
  });

  it('reads a header given in a slice of a larger buffer', () => {
    const big = Buffer.concat([Buffer.from('junk'), v4Proxy]);
    expect(parseProxyV2(big.subarray(4))).toMatchObject({
      kind: 'proxy',
      client: { address: '203.0.113.7' },
    });
  });
});

describe('formatIpv6', () => {
  it.each([
    ['00000000000000000000000000000001', '::1'],
    ['00000000000000000000000000000000', '::'],
    ['20010db8000000000000000000000001', '2001:db8::1'],
    ['20010db8000000010000000000000001', '2001:db8:0:1::1'],
    // The first of two equally long zero runs is the one shortened; a single zero group stays.
    ['20010db8000000000001000000000001', '2001:db8::1:0:0:1'],
    ['20010db8000100010001000100010001', '2001:db8:1:1:1:1:1:1'],
    ['20010db8000000010001000100010001', '2001:db8:0:1:1:1:1:1'],
    ['fe800000000000000000abcdef012345', 'fe80::abcd:ef01:2345'],
    ['00000000000000000000ffffcb007107', '::ffff:203.0.113.7'],
  ])('%s -> %s', (hex, want) => {
    expect(formatIpv6(Buffer.from(hex, 'hex'))).toBe(want);
  });
});
