import { describe, expect, it } from 'vitest';
import { connectionsCheckingMs } from '../../../platform/http/connection-limits.js';

describe('connectionsCheckingMs: how often Node looks for requests past the limit', () => {
  it.each([
    // A tenth of the limit, at most a second, at least 10 ms.
    [30_000, 1_000],
    [10_000, 1_000],
    [2_000, 200],
    [1_234, 124],
    [50, 10],
  ])('request limit %i ms: every %i ms', (requestMs, want) => {
    expect(connectionsCheckingMs({ requestMs })).toBe(want);
  });
});
