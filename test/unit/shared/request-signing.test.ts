import { describe, expect, it } from 'vitest';
import { isSignatureTimestamp, signRequest } from '../../../shared/request-signing.js';

/** DESIGN.md §18: `X-Timestamp` is exactly ten ASCII digits without a leading zero; one spelling per second. */
describe('isSignatureTimestamp', () => {
  const cases: Array<[string, boolean, string]> = [
    ['1700000000', true, 'Unix seconds of 2023'],
    ['1000000000', true, 'the first ten-digit second (2001-09-09)'],
    ['9999999999', true, 'the last ten-digit second (2286-11-20)'],
    ['0123456789', false, 'a leading zero'],
    ['0000000000', false, 'zeros'],
    ['01700000000', false, 'a leading zero before ten digits'],
    ['+1700000000', false, 'a sign'],
    ['-1700000000', false, 'a minus sign'],
    [' 1700000000', false, 'a leading space'],
    ['1700000000 ', false, 'a trailing space'],
    ['1700000000\n', false, 'a trailing newline'],
    ['1700000000.0', false, 'a fraction'],
    ['17000000000', false, 'eleven digits'],
    ['170000000', false, 'nine digits'],
    ['1700000000000', false, 'milliseconds'],
    ['1e9', false, 'an exponent'],
    ['1.7e9', false, 'a decimal exponent'],
    ['0x6553f100', false, 'hexadecimal'],
    ['', false, 'empty'],
    ['١٧٠٠٠٠٠٠٠٠', false, 'Arabic-Indic digits'],
    ['１７００００００００', false, 'fullwidth digits'],
    ['170000000\u0660', false, 'one non-ASCII digit'],
    ['1700000000, 1700000001', false, 'two headers joined'],
    ['yesterday', false, 'words'],
  ];
  it.each(cases)('%j → %s (%s)', (stamp, ok) => {
    expect(isSignatureTimestamp(stamp)).toBe(ok);
  });
});

describe('signRequest', () => {
  it('signs the same text for `?size=10` at T and `?size=1` at 0T: why the stamp has one spelling only', () => {
    const t = 1_700_000_000;
    const a = signRequest('s', 'GET', '/v1/operator/devices?size=10', t, '');
    const b = signRequest('s', 'GET', '/v1/operator/devices?size=1', `0${t}`, '');
    expect(b).toBe(a);
    expect(isSignatureTimestamp(`0${t}`)).toBe(false);
  });
});
