import { describe, expect, it } from 'vitest';
import { addressLimitFor } from '../../../platform/cli/cli-serve.js';

describe('addressLimitFor: the sandbox fleet is not throttled by its own platform', () => {
  it.each([
    ['default, no fleet', 1_200, false, 0, 1_200],
    ['default, the usual 6 chargers', 1_200, false, 6, 1_200],
    ['default, 400 chargers fit', 1_200, false, 400, 1_200],
    ['default, 401 chargers raise it', 1_200, false, 401, 1_203],
    ['default, 1,000 chargers', 1_200, false, 1_000, 3_000],
    ['chosen lower: kept as chosen', 50, true, 1_000, 50],
    ['chosen higher: kept', 5_000, true, 10, 5_000],
  ])('%s', (_label, limit, chosen, chargers, want) => {
    expect(addressLimitFor(limit, chosen, chargers)).toBe(want);
  });
});
