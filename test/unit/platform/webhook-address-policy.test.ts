import { describe, expect, it } from 'vitest';
import {
  BlockedAddressError,
  isPublicAddress,
  literalHostRefusal,
  publicOnlyLookup,
} from '../../../platform/webhooks/address-policy.js';

describe('isPublicAddress', () => {
  it.each([
    ['93.184.216.34', true],
    ['8.8.8.8', true],
    ['2606:4700:4700::1111', true],
    ['127.0.0.1', false],
    ['127.255.0.9', false],
    ['10.1.2.3', false],
    ['172.16.0.1', false],
    ['172.31.255.255', false],
    ['172.32.0.1', true],
    ['192.168.1.1', false],
    ['169.254.169.254', false],
    ['100.64.0.1', false],
    ['0.0.0.0', false],
    ['224.0.0.1', false],
    ['255.255.255.255', false],
    ['::1', false],
    ['::', false],
    ['fe80::1', false],
    ['fd00::1', false],
    ['ff02::1', false],
    ['::ffff:127.0.0.1', false],
    ['::ffff:10.0.0.1', false],
    ['::ffff:8.8.8.8', true],
    ['64:ff9b::7f00:1', false],
    ['not an address', false],
  ])('%s → %s', (address, expected) => {
    expect(isPublicAddress(address)).toBe(expected);
  });
});

describe('literalHostRefusal', () => {
  it.each([
    ['https://example.com/hook', undefined],
    ['https://93.184.216.34/hook', undefined],
    ['https://localhost/hook', 'localhost is not allowed'],
    ['https://api.localhost/hook', 'localhost is not allowed'],
    ['https://127.0.0.1:8443/hook', '127.0.0.1 is not a public address'],
    ['https://[::1]/hook', '::1 is not a public address'],
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
