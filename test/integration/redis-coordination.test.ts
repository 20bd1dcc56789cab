import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisLink, type RedisLink } from '../../platform/coordination/redis-link.js';
import {
  createRedisRateLimitStore,
  RedisUnavailableError,
} from '../../platform/coordination/redis-rate-limit-store.js';
import { createRedisReplayCache } from '../../platform/coordination/redis-replay-cache.js';
import {
  createMemoryRateLimitStore,
  type RateLimitStore,
} from '../../platform/http/rate-limit/rate-limiter.js';
import { createReplayCache, type ReplayCache } from '../../platform/http/replay-cache.js';
import { SIGNATURE_WINDOW_SECONDS } from '../../shared/index.js';
import { startRedisServer, type TestRedis } from '../helpers/redis.js';

/**
 * The rate-limit store and the replay cache that several platform instances share through Redis (DESIGN.md
 * §13), against a real, private redis-server: two instances are two links (two ioredis clients, configured as
 * the platform configures them). The server is stopped, frozen and restarted to show the fail-open fallback.
 */

let redis: TestRedis;
let linkA: RedisLink;
let linkB: RedisLink;
const closers: Array<() => void> = [];

const quietLog = { warn: () => undefined, info: () => undefined };

beforeAll(async () => {
  redis = await startRedisServer();
  linkA = createRedisLink(redis.url, 'test-a', quietLog);
  linkB = createRedisLink(redis.url, 'test-b', quietLog);
  await untilReady(linkA.client, linkB.client);
});
afterAll(async () => {
  for (const close of closers) close();
  await linkA?.close();
  await linkB?.close();
  await redis?.stop();
});

/** Reconnection runs on ioredis' own schedule (at most 2 s apart): poll rather than guess. */
async function untilReady(...clients: Redis[]): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (!clients.every((c) => c.status === 'ready')) {
    if (Date.now() > deadline) throw new Error(`redis clients not ready: ${clients.map((c) => c.status)}`);
    await sleep(20);
  }
}

async function untilNotReady(client: Redis): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (client.status === 'ready') {
    if (Date.now() > deadline) throw new Error('redis client still ready');
    await sleep(10);
  }
}

const uniqueKey = () => `test:${randomBytes(6).toString('hex')}`;
const signature = () => randomBytes(32).toString('hex');

/** The rate-limit store of instances A and B, and what each handed to its fallback. */
function rateStores() {
  const fallbacks: { a: unknown[]; b: unknown[] } = { a: [], b: [] };
  const make = (client: Redis, seen: unknown[]): RateLimitStore => {
    const store = createRedisRateLimitStore(client, {
      fallback: createMemoryRateLimitStore(),
      onFallback: (err) => seen.push(err),
    });
    closers.push(() => store.close());
    return store;
  };
  return { a: make(linkA.client, fallbacks.a), b: make(linkB.client, fallbacks.b), fallbacks };
}

function replayCaches(windowMs?: number) {
  const fallbacks: { a: unknown[]; b: unknown[] } = { a: [], b: [] };
  const make = (client: Redis, seen: unknown[]): ReplayCache =>
    createRedisReplayCache(client, {
      fallback: createReplayCache(windowMs),
      onFallback: (err) => seen.push(err),
      ...(windowMs === undefined ? {} : { windowMs }),
    });
  return { a: make(linkA.client, fallbacks.a), b: make(linkB.client, fallbacks.b), fallbacks };
}

/** A local store the test feeds the same hits as a fallback, to know what the fallback must have said. */
function referenceStore(): RateLimitStore {
  const store = createMemoryRateLimitStore();
  closers.push(() => store.close());
  return store;
}

describe('shared rate-limit store', () => {
  it('counts the hits of two instances in one window: the (N+1)th is refused on either', async () => {
    const { a, b, fallbacks } = rateStores();
    const key = uniqueKey();
    const limit = 4;
    const stores = [a, b, a, b];
    for (const [i, store] of stores.entries()) {
      const d = await store.hit(key, limit, 60_000, Date.now());
      expect(d).toMatchObject({ allowed: true, limit, remaining: limit - (i + 1) });
      expect(d.resetSeconds).toBeGreaterThanOrEqual(59);
      expect(d.resetSeconds).toBeLessThanOrEqual(60);
    }
    for (const store of [a, b, a]) {
      expect(await store.hit(key, limit, 60_000, Date.now())).toMatchObject({
        allowed: false,
        limit,
        remaining: 0,
      });
    }
    const pttl = await linkA.client.pttl(`cp:rl:${key}`);
    expect(pttl).toBeGreaterThan(55_000);
    expect(pttl).toBeLessThanOrEqual(60_000);
    expect(await linkA.client.get(`cp:rl:${key}`)).toBe('7');
    expect(fallbacks).toEqual({ a: [], b: [] });
  });

  it('starts a new window once the last one expired', async () => {
    const { a, b, fallbacks } = rateStores();
    const key = uniqueKey();
    expect(await a.hit(key, 2, 300, Date.now())).toEqual({
      allowed: true,
      limit: 2,
      remaining: 1,
      resetSeconds: 1,
    });
    expect(await b.hit(key, 2, 300, Date.now())).toMatchObject({ allowed: true, remaining: 0 });
    expect(await a.hit(key, 2, 300, Date.now())).toEqual({
      allowed: false,
      limit: 2,
      remaining: 0,
      resetSeconds: 1,
    });

    await sleep(350);
    expect(await b.hit(key, 2, 300, Date.now())).toMatchObject({ allowed: true, remaining: 1 });
    expect(await a.hit(key, 2, 300, Date.now())).toMatchObject({ allowed: true, remaining: 0 });
    expect(await b.hit(key, 2, 300, Date.now())).toMatchObject({ allowed: false, remaining: 0 });
    expect(fallbacks).toEqual({ a: [], b: [] });
  });

  it('peeks without counting, on either instance; an expired or absent key reads as a whole window', async () => {
    const { a, b, fallbacks } = rateStores();
    const key = uniqueKey();
    const now = Date.now();
    expect(await a.peek(key, 3, 60_000, now)).toEqual({
      allowed: true,
      limit: 3,
      remaining: 3,
      resetSeconds: 60,
    });
    expect(await linkA.client.exists(`cp:rl:${key}`)).toBe(0);
    await a.hit(key, 3, 60_000, now);
    await b.hit(key, 3, 60_000, now);
    expect(await b.peek(key, 3, 60_000, now)).toMatchObject({ allowed: true, remaining: 1 });
    await b.hit(key, 3, 60_000, now);
    const spent = await a.peek(key, 3, 60_000, now);
    expect(spent).toMatchObject({ allowed: false, limit: 3, remaining: 0 });
    expect(spent.resetSeconds).toBeGreaterThanOrEqual(59);
    expect(spent.resetSeconds).toBeLessThanOrEqual(60);
    expect(await linkA.client.get(`cp:rl:${key}`)).toBe('3');

    const short = uniqueKey();
    await a.hit(short, 1, 300, Date.now());
    expect(await b.peek(short, 1, 300, Date.now())).toMatchObject({ allowed: false, remaining: 0 });
    await sleep(350);
    expect(await b.peek(short, 1, 300, Date.now())).toEqual({
      allowed: true,
      limit: 1,
      remaining: 1,
      resetSeconds: 1,
    });
    expect(fallbacks).toEqual({ a: [], b: [] });
  });

  it('gives a counter that lost its expiry (PTTL -1) a window again, keeping its count', async () => {
    const { a, fallbacks } = rateStores();
    const key = uniqueKey();
    await linkA.client.set(`cp:rl:${key}`, '5');
    expect(await linkA.client.pttl(`cp:rl:${key}`)).toBe(-1);

    expect(await a.hit(key, 10, 60_000, Date.now())).toMatchObject({
      allowed: true,
      remaining: 4,
      resetSeconds: 60,
    });
    const pttl = await linkA.client.pttl(`cp:rl:${key}`);
    expect(pttl).toBeGreaterThan(55_000);
    expect(pttl).toBeLessThanOrEqual(60_000);
    expect(fallbacks.a).toEqual([]);
  });

  it('honours its key prefix', async () => {
    const store = createRedisRateLimitStore(linkA.client, {
      fallback: referenceStore(),
      keyPrefix: 'other:rl:',
    });
    const key = uniqueKey();
    await store.hit(key, 5, 60_000, Date.now());
    expect(await linkA.client.get(`other:rl:${key}`)).toBe('1');
    expect(await linkA.client.exists(`cp:rl:${key}`)).toBe(0);
  });

  it('answers from the fallback when the script fails, and reports why', async () => {
    const { a, fallbacks } = rateStores();
    const reference = referenceStore();
    const key = uniqueKey();
    await linkA.client.set(`cp:rl:${key}`, 'not a counter');
    for (const nowMs of [1_000, 1_010, 1_020]) {
      expect(await a.hit(key, 2, 60_000, nowMs)).toEqual(await reference.hit(key, 2, 60_000, nowMs));
    }
    expect(fallbacks.a).toHaveLength(3);
    expect(String(fallbacks.a[0])).toMatch(/not an integer/);
  });
});

describe('shared replay cache', () => {
  it('refuses on B a signature first seen on A, and takes it again after the window', async () => {
    const { a, b, fallbacks } = replayCaches(300);
    const sig = signature();
    expect(await a.remember(sig, Date.now())).toBe(true);
    expect(await b.remember(sig, Date.now())).toBe(false);
    expect(await a.remember(sig, Date.now())).toBe(false);
    expect(await b.remember(signature(), Date.now())).toBe(true);

    await sleep(350);
    expect(await b.remember(sig, Date.now())).toBe(true);
    expect(await a.remember(sig, Date.now())).toBe(false);
    expect(fallbacks).toEqual({ a: [], b: [] });
  });

  it('keeps a signature for the same default window as the local cache', async () => {
    const { a } = replayCaches();
    const sig = signature();
    expect(await a.remember(sig, Date.now())).toBe(true);
    const pttl = await linkA.client.pttl(`cp:replay:${sig}`);
    expect(pttl).toBeGreaterThan(SIGNATURE_WINDOW_SECONDS * 2 * 1000 - 5_000);
    expect(pttl).toBeLessThanOrEqual(SIGNATURE_WINDOW_SECONDS * 2 * 1000);
  });

  it('caps the key of an overlong signature', async () => {
    const { a, b } = replayCaches(60_000);
    const long = 'ab'.repeat(500);
    expect(await a.remember(long, Date.now())).toBe(true);
    expect(await b.remember(long, Date.now())).toBe(false);
    expect(await linkA.client.exists(`cp:replay:${long.slice(0, 128)}`)).toBe(1);
  });
});

describe('Redis away and back', () => {
  it('answers from the fallback while Redis does not answer in time', async () => {
    const rate = rateStores();
    const replay = replayCaches(60_000);
    const reference = referenceStore();
    const referenceReplay = createReplayCache(60_000);
    const key = uniqueKey();
    const sig = signature();

    redis.freeze();
    try {
      // The connection stays up; each command gives up after the link's command timeout.
      const [decision, fresh] = await Promise.all([
        rate.a.hit(key, 3, 60_000, 5_000),
        replay.a.remember(sig, 5_000),
      ]);
      expect(decision).toEqual(await reference.hit(key, 3, 60_000, 5_000));
      expect(fresh).toBe(referenceReplay.remember(sig, 5_000));
    } finally {
      redis.thaw();
    }
    expect(rate.fallbacks.a).toHaveLength(1);
    expect(String(rate.fallbacks.a[0])).toMatch(/timed out/i);
    expect(replay.fallbacks.a).toHaveLength(1);
    expect(String(replay.fallbacks.a[0])).toMatch(/timed out/i);

    // Still connected: the next hit is counted in Redis again (after the late one the server ran on thawing).
    expect(linkA.client.status).toBe('ready');
    const other = uniqueKey();
    expect(await rate.b.hit(other, 3, 60_000, Date.now())).toMatchObject({ allowed: true, remaining: 2 });
    expect(await rate.a.hit(other, 3, 60_000, Date.now())).toMatchObject({ allowed: true, remaining: 1 });
    expect(rate.fallbacks.a).toHaveLength(1);
  });

  it('answers every hit from the fallback while Redis is stopped, and shares again once it is back', async () => {
    const rate = rateStores();
    const replay = replayCaches(60_000);
    const reference = { a: referenceStore(), b: referenceStore() };
    const referenceReplay = { a: createReplayCache(60_000), b: createReplayCache(60_000) };
    const key = uniqueKey();
    const sig = signature();

    await redis.stop();
    // Each instance counts on its own: A and B both let two through, then refuse.
    let nowMs = 10_000;
    for (const side of ['a', 'b', 'a', 'b', 'a', 'b'] as const) {
      nowMs += 10;
      const decision = await rate[side].hit(key, 2, 60_000, nowMs);
      expect(decision).toEqual(await reference[side].hit(key, 2, 60_000, nowMs));
    }
    expect(rate.fallbacks.a).toHaveLength(3);
    expect(rate.fallbacks.b).toHaveLength(3);
    // Fail-open: A refuses a replay it saw itself; B, which did not see it, takes it.
    for (const side of ['a', 'a', 'b'] as const) {
      expect(await replay[side].remember(sig, nowMs)).toBe(referenceReplay[side].remember(sig, nowMs));
    }
    expect(replay.fallbacks.a).toHaveLength(2);
    expect(replay.fallbacks.b).toHaveLength(1);

    // Once the link has noticed, Redis is not even asked: the local answer comes at once, without a promise.
    await untilNotReady(linkA.client);
    const immediate = rate.a.hit(key, 2, 60_000, nowMs);
    expect(immediate).not.toBeInstanceOf(Promise);
    expect(immediate).toEqual(await reference.a.hit(key, 2, 60_000, nowMs));
    expect(rate.fallbacks.a.at(-1)).toBeInstanceOf(RedisUnavailableError);
    // A peek (a lock-out check) reads the same local counts.
    const peeked = rate.a.peek(key, 2, 60_000, nowMs);
    expect(peeked).not.toBeInstanceOf(Promise);
    expect(peeked).toEqual(await reference.a.peek(key, 2, 60_000, nowMs));
    expect(peeked).toMatchObject({ allowed: false, remaining: 0 });
    const remembered = replay.a.remember(signature(), nowMs);
    expect(remembered).toBe(true);
    expect(replay.fallbacks.a.at(-1)).toBeInstanceOf(RedisUnavailableError);

    await redis.restart();
    await untilReady(linkA.client, linkB.client);
    const counted = { a: rate.fallbacks.a.length, b: rate.fallbacks.b.length };
    // The restarted server is empty (its script cache too): shared counting resumes on a fresh window.
    expect(await rate.b.hit(key, 2, 60_000, Date.now())).toMatchObject({ allowed: true, remaining: 1 });
    expect(await rate.a.hit(key, 2, 60_000, Date.now())).toMatchObject({ allowed: true, remaining: 0 });
    expect(await rate.b.hit(key, 2, 60_000, Date.now())).toMatchObject({ allowed: false, remaining: 0 });
    expect(await rate.a.hit(key, 2, 60_000, Date.now())).toMatchObject({ allowed: false, remaining: 0 });
    expect({ a: rate.fallbacks.a.length, b: rate.fallbacks.b.length }).toEqual(counted);

    const later = signature();
    expect(await replay.b.remember(later, Date.now())).toBe(true);
    expect(await replay.a.remember(later, Date.now())).toBe(false);
  });
});
