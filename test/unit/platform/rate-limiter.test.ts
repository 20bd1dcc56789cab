import { afterEach, describe, expect, it } from 'vitest';
import {
  createMemoryRateLimitStore,
  createRateLimiter,
  GUARD_LIMITS,
  type RateDecision,
  type RateLimitStore,
} from '../../../platform/http/rate-limit/rate-limiter.js';
import { failureSubject } from '../../../platform/http/routes/credential-attempts.js';

const stores: RateLimitStore[] = [];
afterEach(() => {
  for (const s of stores.splice(0)) s.close();
});
function memory(): RateLimitStore {
  const s = createMemoryRateLimitStore();
  stores.push(s);
  return s;
}
const sync = (d: RateDecision | Promise<RateDecision>): RateDecision => {
  if (d instanceof Promise) throw new Error('the in-memory store answers at once');
  return d;
};

describe('memory store: peek', () => {
  it('reads where a key stands without counting, and a whole window once it ended', () => {
    const s = memory();
    const steps: Array<[op: 'hit' | 'peek', atMs: number, expected: RateDecision]> = [
      ['peek', 0, { allowed: true, limit: 2, remaining: 2, resetSeconds: 60 }],
      ['hit', 0, { allowed: true, limit: 2, remaining: 1, resetSeconds: 60 }],
      ['peek', 10_000, { allowed: true, limit: 2, remaining: 1, resetSeconds: 50 }],
      ['peek', 10_000, { allowed: true, limit: 2, remaining: 1, resetSeconds: 50 }],
      ['hit', 20_000, { allowed: true, limit: 2, remaining: 0, resetSeconds: 40 }],
      ['peek', 59_999, { allowed: false, limit: 2, remaining: 0, resetSeconds: 1 }],
      ['peek', 60_000, { allowed: true, limit: 2, remaining: 2, resetSeconds: 60 }],
      ['hit', 60_000, { allowed: true, limit: 2, remaining: 1, resetSeconds: 60 }],
    ];
    for (const [op, atMs, expected] of steps) {
      const d = op === 'hit' ? s.hit('k', 2, 60_000, atMs) : s.peek('k', 2, 60_000, atMs);
      expect({ op, atMs, d: sync(d) }).toEqual({ op, atMs, d: expected });
    }
  });
});

describe('rate limiter: guard classes', () => {
  it('has the documented budgets and an override for the address budget', () => {
    let now = 0;
    const limiter = createRateLimiter(memory(), () => now, {
      unauthenticated: { limit: 2, windowSeconds: 60 },
    });
    expect(limiter.policyHeader('operatorTokenFailures')).toBe('"operatorTokenFailures";q=10;w=60');
    expect(limiter.policyHeader('deviceTokenFailures')).toBe('"deviceTokenFailures";q=60;w=60');
    expect(limiter.policyHeader('registerFailures')).toBe('"registerFailures";q=60;w=60');
    expect(GUARD_LIMITS.unauthenticated).toEqual({ limit: 1200, windowSeconds: 60 });
    expect(limiter.policyHeader('unauthenticated')).toBe('"unauthenticated";q=2;w=60');
    expect(sync(limiter.check('unauthenticated', '10.0.0.1')).remaining).toBe(1);
    expect(sync(limiter.check('unauthenticated', '10.0.0.1')).allowed).toBe(true);
    expect(sync(limiter.check('unauthenticated', '10.0.0.1')).allowed).toBe(false);
    expect(sync(limiter.check('unauthenticated', '10.0.0.2')).allowed).toBe(true);
    now = 60_000;
    expect(sync(limiter.check('unauthenticated', '10.0.0.1')).allowed).toBe(true);
  });
});

describe('failureSubject', () => {
  it('puts the address first: it holds no space, so an id with spaces cannot reach the key of another pair', () => {
    const pairs: Array<[id: string, address: string]> = [
      ['a b', '10.0.0.1'],
      ['10.0.0.1 a', '10.0.0.1'],
      ['cli_1', '::1'],
      [':1 cli_1', '::'],
      ['cli_1', '127.0.0.1'],
      ['cli_1', '127.0.0.2'],
      ['', '127.0.0.1'],
    ];
    const keys = pairs.map(([id, address]) => failureSubject(id, address));
    expect(new Set(keys).size).toBe(keys.length);
    expect(failureSubject('cli_1', '127.0.0.1')).toBe('127.0.0.1 cli_1');
  });
});
