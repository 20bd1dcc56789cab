import { expect } from 'vitest';
import { expectError, type HttpResult } from './platform.js';

/**
 * The item of one rate class in a `RateLimit` or `RateLimit-Policy` list (IETF httpapi draft syntax): a request
 * may be counted against several classes (the unauthenticated routes' address budget, then a credential's).
 */
export function rateItem(res: HttpResult, header: 'ratelimit' | 'ratelimit-policy', rateClass: string) {
  const value = res.headers[header];
  if (typeof value !== 'string') return undefined;
  return value.split(', ').find((item) => item.startsWith(`"${rateClass}";`));
}

/**
 * The assertions of rate-limits.test.ts on a 429 and on a success, and the 429s they saw by limiter class
 * (`refusals`), to compare with GET /metrics at the end.
 */
export function rateLimitExpectations() {
  const refusals = new Map<string, number>();

  /** Asserts the 429 ErrorResponse and its headers; returns retry_after_seconds. */
  function expectRateLimited(
    res: HttpResult,
    rateClass: string,
    limit: number,
    windowSeconds: number,
  ): number {
    const body = expectError(res, 429, 5001);
    expect(body.message).toBe('Too many requests');
    const retry = body.details?.retry_after_seconds;
    expect(Number.isInteger(retry)).toBe(true);
    expect(retry).toBeGreaterThanOrEqual(1);
    expect(retry).toBeLessThanOrEqual(windowSeconds);
    expect(res.headers['retry-after']).toBe(String(retry));
    expect(rateItem(res, 'ratelimit-policy', rateClass)).toBe(`"${rateClass}";q=${limit};w=${windowSeconds}`);
    expect(rateItem(res, 'ratelimit', rateClass)).toBe(`"${rateClass}";r=0;t=${retry}`);
    refusals.set(rateClass, (refusals.get(rateClass) ?? 0) + 1);
    return retry;
  }

  /** A success that carries the RateLimit fields with the remaining budget. */
  function expectAllowed(res: HttpResult, status: number, rateClass: string, remaining: number) {
    if (res.status !== status) throw new Error(`expected ${status}, got ${res.status} ${res.text}`);
    expect(rateItem(res, 'ratelimit', rateClass)).toMatch(
      new RegExp(`^"${rateClass}";r=${remaining};t=\\d+$`),
    );
    expect(rateItem(res, 'ratelimit-policy', rateClass)).toMatch(
      new RegExp(`^"${rateClass}";q=\\d+;w=\\d+$`),
    );
  }

  return { refusals, expectRateLimited, expectAllowed };
}
