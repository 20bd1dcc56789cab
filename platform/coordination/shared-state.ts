import { createHash } from 'node:crypto';
import { createMemoryRateLimitStore } from '../http/rate-limit/rate-limiter.js';
import { createReplayCache } from '../http/replay-cache.js';
import { createCommandNotifier } from '../services/command-notifier.js';
import type { SharedLiveness } from '../services/liveness.js';
import type { PlatformKeys } from '../storage/platform-keys.js';
import type { SubscriptionRegistry } from '../stream/subscribers.js';
import type { RedisLink } from './redis-link.js';
import { createRedisRateLimitStore } from './redis-rate-limit-store.js';
import { createRedisReplayCache } from './redis-replay-cache.js';
import { createRelay, type Relay } from './relay.js';
import { createStreamRegistry } from './stream-registry.js';

/**
 * What several instances share through Redis (DESIGN.md §13), each falling back to this instance's own state
 * while Redis is away (logged once per outage by the link, counted in `/metrics`). Keys and channels are named
 * after the platform key, which the instances of one platform share, so that two platforms (a sandbox and
 * production, say) may use one Redis without seeing each other.
 */
export async function shareThroughRedis(
  link: RedisLink,
  keys: PlatformKeys,
  instanceId: string,
  log: { info(obj: object, msg: string): void },
) {
  const namespace = `cp:${createHash('sha256').update(keys.tokenKey).digest('hex').slice(0, 12)}`;
  const fallbacks = { rateLimit: 0, replay: 0 };
  const rateLimitStore = createRedisRateLimitStore(link.client, {
    fallback: createMemoryRateLimitStore(),
    keyPrefix: `${namespace}:rl:`,
    onFallback: () => {
      fallbacks.rateLimit++;
    },
  });
  const replayCache = createRedisReplayCache(link.client, {
    fallback: createReplayCache(),
    keyPrefix: `${namespace}:replay:`,
    onFallback: () => {
      fallbacks.replay++;
    },
  });
  const relay: Relay = await createRelay(link, {
    namespace,
    instanceId,
    notifier: createCommandNotifier(),
  });
  log.info({ namespace }, 'sharing state with other instances through redis');
  return {
    rateLimitStore,
    replayCache,
    relay,
    liveness: sharedLiveness(link, `${namespace}:live:`),
    /** Which instance's connection holds each stream subscription set (for `createTelemetryStream`). */
    streamRegistry: announcingInterest(
      createStreamRegistry(link, { prefix: `${namespace}:stream:`, holder: instanceId }),
      relay,
    ),
    stats: () => ({ redisUp: link.available(), fallbacks: { ...fallbacks }, relay: relay.stats() }),
  };
}

/** A device's last announced status, a day at most. */
const LIVE_STATUS_TTL_SECONDS = 86_400;

/**
 * Each charger's last announced status in Redis: an instance announces a transition only when it changes that
 * status (SET … GET, atomic), so a charger seen by two instances comes online, and goes offline, once. While
 * Redis is away every instance announces what it sees (a subscriber may hear a transition twice).
 */
function sharedLiveness(link: RedisLink, prefix: string): SharedLiveness {
  return {
    claim(deviceId, status) {
      if (!link.available()) return true;
      return link.client.set(prefix + deviceId, status, 'EX', LIVE_STATUS_TTL_SECONDS, 'GET').then(
        (previous) => previous !== status,
        () => true,
      );
    },
  };
}

/**
 * A subscription starting here asks the other instances for telemetry before it is confirmed: the announcement
 * goes out on the command connection ahead of the claim, so it reaches them before the subscriber hears
 * `subscribed` (and before anything it then causes elsewhere).
 */
function announcingInterest(registry: SubscriptionRegistry, relay: Relay): SubscriptionRegistry {
  return {
    ...registry,
    claim(key, connectionId) {
      relay.announceInterest();
      return registry.claim(key, connectionId);
    },
  };
}

/** What this instance shares with the others, as `buildPlatform` uses it. */
export type SharedState = Awaited<ReturnType<typeof shareThroughRedis>>;
