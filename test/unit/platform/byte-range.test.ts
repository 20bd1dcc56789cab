import { describe, expect, it } from 'vitest';
import { decideRange } from '../../../platform/domain/byte-range.js';

const ETAG = '"abc"';

describe('decideRange', () => {
  it.each([
    // Range, If-Range, decision for a file of 1000 bytes
    [undefined, undefined, { kind: 'whole' }],
    ['bytes=0-', undefined, { kind: 'partial', start: 0, end: 999 }],
    ['bytes=500-', undefined, { kind: 'partial', start: 500, end: 999 }],
    ['bytes=500-599', undefined, { kind: 'partial', start: 500, end: 599 }],
    ['bytes=999-999', undefined, { kind: 'partial', start: 999, end: 999 }],
    // An end past the file is cut to it.
    ['bytes=900-5000', undefined, { kind: 'partial', start: 900, end: 999 }],
    ['bytes=-100', undefined, { kind: 'partial', start: 900, end: 999 }],
    ['bytes=-5000', undefined, { kind: 'partial', start: 0, end: 999 }],
    ['bytes=1000-', undefined, { kind: 'unsatisfiable' }],
    ['bytes=-0', undefined, { kind: 'unsatisfiable' }],
    // Served whole: several ranges, another unit, bad syntax, a reversed range.
    ['bytes=0-1,5-6', undefined, { kind: 'whole' }],
    ['items=0-1', undefined, { kind: 'whole' }],
    ['bytes=abc', undefined, { kind: 'whole' }],
    ['bytes=-', undefined, { kind: 'whole' }],
    ['bytes=600-500', undefined, { kind: 'whole' }],
    ['bytes=99999999999999999999-', undefined, { kind: 'whole' }],
    // If-Range: the part only while the file is the one the charger began with.
    ['bytes=500-', ETAG, { kind: 'partial', start: 500, end: 999 }],
    ['bytes=500-', '"other"', { kind: 'whole' }],
    ['bytes=500-', 'Wed, 21 Oct 2026 07:28:00 GMT', { kind: 'whole' }],
  ] as const)('%s (If-Range %s): %j', (range, ifRange, want) => {
    expect(decideRange(range, ifRange, 1000, ETAG)).toEqual(want);
  });
});
