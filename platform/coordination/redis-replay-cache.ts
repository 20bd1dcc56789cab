import type { Redis } from 'ioredis';
import { SIGNATURE_WINDOW_SECONDS } from '../../shared/index.js';
import type { ReplayCache } from '../http/replay-cache.js';
import { redisUnavailable } from './redis-rate-limit-store.js';

export interface RedisReplayCacheOptions {
  /** Answers while Redis is away (fail-open: a signature is then refused again only on the instance that saw it). */
  fallback: ReplayCache;
  windowMs?: number;
  /** Called for every signature the fallback answered: for logging and a metrics counter. */
  onFallback?: (err: unknown) => void;
  keyPrefix?: string;
}

/**
 * Signatures are hex HMACs (64 characters for SHA-256; 128 would hold SHA-512); a verified one never reaches
 * the cap, which only bounds what a key can cost should an unverified string ever get here.
 */
const MAX_SIGNATURE_CHARS = 128;

/**
 * The replay cache shared by every instance on one Redis: a signature used on one instance is refused on all
 * of them for `windowMs` (SET NX PX: atomic, and Redis expires it). Never rejects on Redis' account: while it
 * is down or slow the local fallback answers.
 */
export function createRedisReplayCache(client: Redis, options: RedisReplayCacheOptions): ReplayCache {
  const { fallback, onFallback } = options;
  const windowMs = Math.max(1, Math.ceil(options.windowMs ?? SIGNATURE_WINDOW_SECONDS * 2 * 1000));
  const prefix = options.keyPrefix ?? 'cp:replay:';

  function local(err: unknown, signature: string, nowMs: number) {
    onFallback?.(err);
    return fallback.remember(signature, nowMs);
  }

  return {
    remember(signature, nowMs) {
      // The command connection refuses at once while down: skip the round trip (and the promise).
      if (client.status !== 'ready') return local(redisUnavailable(client.status), signature, nowMs);
      return client.set(prefix + signature.slice(0, MAX_SIGNATURE_CHARS), '1', 'PX', windowMs, 'NX').then(
        (stored) => stored === 'OK',
        (err: unknown) => local(err, signature, nowMs),
      );
    },
  };
}
