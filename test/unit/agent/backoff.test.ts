import { describe, expect, it } from 'vitest';
import { nextDelayMs } from '../../../agent/core/backoff.js';

const base = { baseMs: 1_000, capMs: 60_000 };
const fixed = (value: number) => () => value;

describe('nextDelayMs', () => {
  it('grows exponentially: the ceiling doubles with each attempt', () => {
    const almostOne = fixed(0.999999);
    expect(nextDelayMs(0, { ...base, random: almostOne })).toBe(999);
    expect(nextDelayMs(1, { ...base, random: almostOne })).toBe(1_999);
    expect(nextDelayMs(4, { ...base, random: almostOne })).toBe(15_999);
  });

  it('never exceeds the cap, even for huge attempt numbers', () => {
    const almostOne = fixed(0.999999);
    expect(nextDelayMs(6, { ...base, random: almostOne })).toBe(59_999);
    expect(nextDelayMs(10_000, { ...base, random: almostOne })).toBe(59_999);
    expect(Number.isFinite(nextDelayMs(Number.MAX_SAFE_INTEGER, { ...base, random: almostOne }))).toBe(true);
  });

  it('uses full jitter: uniform over [0, ceiling)', () => {
    expect(nextDelayMs(3, { ...base, random: fixed(0) })).toBe(0);
    expect(nextDelayMs(3, { ...base, random: fixed(0.5) })).toBe(4_000);
    let seed = 1;
    const lcg = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const delays = Array.from({ length: 2_000 }, () => nextDelayMs(5, { ...base, random: lcg }));
    expect(Math.min(...delays)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...delays)).toBeLessThan(32_000);
    // Spread over the whole range, not bunched at the ceiling.
    expect(delays.filter((d) => d < 16_000).length).toBeGreaterThan(800);
    expect(delays.filter((d) => d >= 16_000).length).toBeGreaterThan(800);
  });

  it('honours retry_after as a floor, plus at most one base step of jitter', () => {
    expect(nextDelayMs(0, { ...base, random: fixed(0), retryAfterSeconds: 30 })).toBe(30_000);
    expect(nextDelayMs(0, { ...base, random: fixed(0.999999), retryAfterSeconds: 30 })).toBe(30_999);
    // Longer than the cap: the server's wait still wins.
    expect(nextDelayMs(2, { ...base, random: fixed(0.5), retryAfterSeconds: 120 })).toBe(120_500);
  });

  it('honours a server wait of at most an hour: a bogus Retry-After cannot silence the charger for longer', () => {
    expect(nextDelayMs(0, { ...base, random: fixed(0), retryAfterSeconds: 3_600 })).toBe(3_600_000);
    expect(nextDelayMs(0, { ...base, random: fixed(0), retryAfterSeconds: 999_999_999 })).toBe(3_600_000);
    // Not a number of seconds at all: ignored, the exponential backoff applies.
    expect(nextDelayMs(3, { ...base, random: fixed(0.5), retryAfterSeconds: Number.POSITIVE_INFINITY })).toBe(
      4_000,
    );
  });

  it('ignores a missing, zero or invalid retry_after', () => {
    expect(nextDelayMs(2, { ...base, random: fixed(0.5), retryAfterSeconds: 0 })).toBe(2_000);
    expect(nextDelayMs(2, { ...base, random: fixed(0.5), retryAfterSeconds: Number.NaN })).toBe(2_000);
    expect(nextDelayMs(2, { ...base, random: fixed(0.5), retryAfterSeconds: -5 })).toBe(2_000);
  });
});
