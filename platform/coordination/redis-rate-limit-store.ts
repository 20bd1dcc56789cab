import type { Redis } from 'ioredis';
import type { RateDecision, RateLimitStore } from '../http/rate-limit/rate-limiter.js';
import { redisScript, runScript } from './redis-link.js';

export interface RedisRateLimitStoreOptions {
  /** Answers while Redis is away (fail-open: each instance then counts on its own). */
  fallback: RateLimitStore;
  /** Called for every hit the fallback answered: for logging and a metrics counter. */
  onFallback?: (err: unknown) => void;
  keyPrefix?: string;
}

/** Why a hit was answered locally without asking Redis (its connection was not ready). */
export class RedisUnavailableError extends Error {
  constructor(status: string) {
    super(`redis not ready (${status})`);
    this.name = 'RedisUnavailableError';
  }
}

// One error per connection status, not one per hit: a hit answered locally during an outage stays cheap.
const unavailable = new Map<string, RedisUnavailableError>();
export function redisUnavailable(status: string): RedisUnavailableError {
  let err = unavailable.get(status);
  if (!err) {
    err = new RedisUnavailableError(status);
    unavailable.set(status, err);
  }
  return err;
}

/**
 * One round trip, atomic: count the hit and start the window on the first one. A key that lost its expiry
 * (PTTL -1: written by hand, or left by a non-atomic writer) would refuse its subject forever, so it gets a
 * window again; its count is kept, erring towards refusing rather than letting a burst through.
 */
const HIT = redisScript(`
local count = redis.call('INCR', KEYS[1])
local ttl = redis.call('PTTL', KEYS[1])
if count == 1 or ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {count, ttl}
`);

/** A hit's count and window left, without counting one (a key without expiry reads as a fresh window). */
const PEEK = redisScript(`
local count = tonumber(redis.call('GET', KEYS[1]) or '0')
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then count = 0 end
return {count, ttl}
`);

/**
 * Fixed windows shared by every instance on one Redis: the window starts at a key's first hit on any instance
 * and Redis' clock ends it, so the instances' clocks need not agree (`nowMs` only reaches the fallback).
 * Never rejects on Redis' account: while it is down or slow each hit is answered by the local fallback.
 */
export function createRedisRateLimitStore(
  client: Redis,
  options: RedisRateLimitStoreOptions,
): RateLimitStore {
  const { fallback, onFallback } = options;
  const prefix = options.keyPrefix ?? 'cp:rl:';

  function local(err: unknown, key: string, limit: number, windowMs: number, nowMs: number) {
    onFallback?.(err);
    return fallback.hit(key, limit, windowMs, nowMs);
  }

  return {
    hit(key, limit, windowMs, nowMs) {
      // The command connection refuses at once while down: skip the round trip (and the promise).
      if (client.status !== 'ready')
        return local(redisUnavailable(client.status), key, limit, windowMs, nowMs);
      return countHit(client, prefix + key, windowMs).then(
        (counted) => decide(counted, limit),
        (err: unknown) => local(err, key, limit, windowMs, nowMs),
      );
    },
    peek(key, limit, windowMs, nowMs) {
      const fallBack = (err: unknown) => {
        onFallback?.(err);
        return fallback.peek(key, limit, windowMs, nowMs);
      };
      if (client.status !== 'ready') return fallBack(redisUnavailable(client.status));
      return runScript(client, PEEK, [prefix + key], []).then((reply) => {
        const { count, pttlMs } = parseCounted(reply);
        return {
          allowed: count < limit,
          limit,
          remaining: Math.max(0, limit - count),
          resetSeconds: Math.max(1, Math.ceil((pttlMs > 0 ? pttlMs : windowMs) / 1000)),
        };
      }, fallBack);
    },
    close() {
      // The client belongs to the Redis link, which closes it.
      fallback.close();
    },
  };
}

interface Counted {
  count: number;
  pttlMs: number;
}

async function countHit(client: Redis, key: string, windowMs: number): Promise<Counted> {
  // PEXPIRE wants a positive integer.
  const ttl = Math.max(1, Math.ceil(windowMs));
  return parseCounted(await runScript(client, HIT, [key], [ttl]));
}

function parseCounted(reply: unknown): Counted {
  if (Array.isArray(reply) && typeof reply[0] === 'number' && typeof reply[1] === 'number')
    return { count: reply[0], pttlMs: reply[1] };
  throw new Error(`unexpected rate-limit script reply: ${JSON.stringify(reply)}`);
}

function decide({ count, pttlMs }: Counted, limit: number): RateDecision {
  return {
    allowed: count <= limit,
    limit,
    remaining: Math.max(0, limit - count),
    resetSeconds: Math.max(1, Math.ceil(pttlMs / 1000)),
  };
}
