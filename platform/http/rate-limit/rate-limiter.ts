import { RATE_LIMITS } from '../../../shared/index.js';

/**
 * Budgets the spec's Limits table has no row for (DESIGN.md §18 "Nobody can lock someone else out", docs/api.md):
 * failed credential attempts, counted per claimed id *and* source address, so a flood locks out its own address
 * and never the id everywhere; and one budget per source address over the unauthenticated routes. The failure
 * budgets keep the numbers the spec's rows gave those endpoints before (10 a minute for operator tokens, 60 for
 * the charger's); the address budget lets 500 chargers behind one NAT come back after a power cut within one
 * minute (a registration and a token each, or a token and a retry: 1,000), with room for retries.
 */
export const GUARD_LIMITS = {
  operatorTokenFailures: { limit: 10, windowSeconds: 60 },
  deviceTokenFailures: { limit: 60, windowSeconds: 60 },
  registerFailures: { limit: 60, windowSeconds: 60 },
  unauthenticated: { limit: 1200, windowSeconds: 60 },
} as const;

export type RateClass = keyof typeof RATE_LIMITS | keyof typeof GUARD_LIMITS;
export type LimitTable = Record<RateClass, { readonly limit: number; readonly windowSeconds: number }>;

export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the window resets (at least 1). */
  resetSeconds: number;
}

/**
 * Where the counters live. The in-memory store serves one platform instance; a shared store (Redis: INCR with
 * PEXPIRE on first hit) implements the same interface for several instances behind a load balancer.
 */
export interface RateLimitStore {
  /** Count one hit against `key` in a fixed window of `windowMs` and report whether it stays within `limit`. */
  hit(key: string, limit: number, windowMs: number, nowMs: number): RateDecision | Promise<RateDecision>;
  /** Where `key` stands without counting a hit: `allowed` while another hit would stay within `limit`. */
  peek(key: string, limit: number, windowMs: number, nowMs: number): RateDecision | Promise<RateDecision>;
  close(): void;
}

/** Fixed windows that start at a key's first hit: simple, exact at the bound, O(1) per request. */
export function createMemoryRateLimitStore(sweepEveryMs = 60_000): RateLimitStore {
  const windows = new Map<string, { startMs: number; windowMs: number; count: number }>();
  const sweep = setInterval(() => {
    const now = Date.now();
    for (const [key, w] of windows) if (now - w.startMs >= w.windowMs) windows.delete(key);
  }, sweepEveryMs);
  sweep.unref();

  return {
    hit(key, limit, windowMs, nowMs) {
      let w = windows.get(key);
      if (!w || nowMs - w.startMs >= windowMs || nowMs < w.startMs) {
        w = { startMs: nowMs, windowMs, count: 0 };
        windows.set(key, w);
      }
      w.count++;
      const resetSeconds = Math.max(1, Math.ceil((w.startMs + windowMs - nowMs) / 1000));
      return { allowed: w.count <= limit, limit, remaining: Math.max(0, limit - w.count), resetSeconds };
    },
    peek(key, limit, windowMs, nowMs) {
      const w = windows.get(key);
      const open = w !== undefined && nowMs - w.startMs < w.windowMs && nowMs >= w.startMs;
      const count = open ? w.count : 0;
      const endMs = open ? w.startMs + w.windowMs : nowMs + windowMs;
      const resetSeconds = Math.max(1, Math.ceil((endMs - nowMs) / 1000));
      return { allowed: count < limit, limit, remaining: Math.max(0, limit - count), resetSeconds };
    },
    close() {
      clearInterval(sweep);
      windows.clear();
    },
  };
}

/**
 * The limiter the routes use: one class per row of the spec's Limits table, keyed by client or device, and the
 * guard classes, keyed by address (and claimed id). `limits` replaces the numbers of some classes (`serve
 * --address-limit`).
 */
export function createRateLimiter(
  store: RateLimitStore,
  now: () => number,
  limits: Partial<LimitTable> = {},
) {
  const table: LimitTable = { ...RATE_LIMITS, ...GUARD_LIMITS, ...limits };
  // Per class, fixed parts computed once: the key prefix and the `RateLimit-Policy` header.
  const classes = Object.fromEntries(
    (Object.keys(table) as RateClass[]).map((rateClass) => {
      const { limit, windowSeconds } = table[rateClass];
      return [
        rateClass,
        {
          prefix: `${rateClass}:`,
          limit,
          windowMs: windowSeconds * 1000,
          policyHeader: `"${rateClass}";q=${limit};w=${windowSeconds}`,
        },
      ];
    }),
  ) as Record<RateClass, { prefix: string; limit: number; windowMs: number; policyHeader: string }>;
  return {
    /** Synchronous with an in-memory store (no promise on the hot path); a shared store may answer later. */
    check(rateClass: RateClass, subject: string): RateDecision | Promise<RateDecision> {
      const c = classes[rateClass];
      return store.hit(c.prefix + subject, c.limit, c.windowMs, now());
    },
    /** Where `subject` stands in `rateClass` without spending anything (a lock-out check). */
    peek(rateClass: RateClass, subject: string): RateDecision | Promise<RateDecision> {
      const c = classes[rateClass];
      return store.peek(c.prefix + subject, c.limit, c.windowMs, now());
    },
    /** `RateLimit-Policy` of a class (IETF httpapi draft 08+ syntax). */
    policyHeader: (rateClass: RateClass): string => classes[rateClass].policyHeader,
    close: () => store.close(),
  };
}
export type RateLimiter = ReturnType<typeof createRateLimiter>;

/** `RateLimit` of a decision (IETF httpapi draft 08+ syntax). */
export function rateLimitHeader(rateClass: RateClass, d: RateDecision): string {
  return `"${rateClass}";r=${d.remaining};t=${d.resetSeconds}`;
}
