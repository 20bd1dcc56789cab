import { createHash } from 'node:crypto';
import type { SubscriptionRegistry } from '../stream/subscribers.js';
import { type RedisLink, type RedisScript, redisScript, runScript } from './redis-link.js';

/** Three ping periods (30 s each): a live instance refreshes its claims twice before they would lapse. */
export const STREAM_CLAIM_TTL_SECONDS = 90;

/**
 * Takes the set if nobody holds it (SET NX EX), or keeps it if this connection does (same value: the TTL starts
 * again); 0 if another connection holds it. KEYS[1] the set, ARGV[1] holder:connection, ARGV[2] TTL in seconds.
 */
const CLAIM_SCRIPT = `
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'EX', ARGV[2]) then return 1 end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('EXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
`;

/** Compare and delete: only the connection that holds a set gives it up. */
const RELEASE_SCRIPT = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`;

/**
 * Compare and expire, for each set: ARGV[1] the TTL, ARGV[i + 1] the value KEYS[i] should hold. A set found
 * free is taken again (Redis was restarted, or the set was opened while Redis was away and claims answered
 * yes); one held by another connection is left alone. Returns how many are held now.
 */
const REFRESH_SCRIPT = `
local held = 0
for i, key in ipairs(KEYS) do
  local value = ARGV[i + 1]
  local current = redis.call('GET', key)
  if current == value then
    redis.call('EXPIRE', key, ARGV[1])
    held = held + 1
  elseif not current then
    redis.call('SET', key, value, 'EX', ARGV[1])
    held = held + 1
  end
end
return held
`;

/** Sets per refresh script call: bounds one call's time in Redis, whatever the number of subscribers. */
const REFRESH_BATCH = 500;

const CLAIM = redisScript(CLAIM_SCRIPT);
const RELEASE = redisScript(RELEASE_SCRIPT);
const REFRESH = redisScript(REFRESH_SCRIPT);

/**
 * The stream's subscription sets held across the instances of one platform (DESIGN.md §13), in Redis: one key
 * per set, `prefix` + sha256 of the stream's subscription key (which names a client and devices or sites, so
 * it is not written out), holding `holder:connectionId` with a TTL. The stream refreshes the sets its
 * connections hold on every ping, so a killed instance's sets come free by themselves within `ttlSeconds`.
 *
 * Fail-open, like everything shared through Redis: while Redis is away, or when a command fails, a claim is
 * granted (the instance's own check still refuses a second connection there) and releases and refreshes are
 * skipped. Nothing here rejects or throws.
 */
export function createStreamRegistry(
  link: RedisLink,
  options: { prefix: string; holder: string; ttlSeconds?: number },
): SubscriptionRegistry {
  const ttl = String(Math.max(1, Math.ceil(options.ttlSeconds ?? STREAM_CLAIM_TTL_SECONDS)));
  const redisKey = (key: string) => options.prefix + createHash('sha256').update(key).digest('hex');
  const value = (connectionId: string) => `${options.holder}:${connectionId}`;

  const run = (s: RedisScript, keys: readonly string[], args: readonly string[]) =>
    runScript(link.client, s, keys, args);
  /** Runs a script whose answer does not matter, never rejecting. */
  const fireAndForget = (s: RedisScript, keys: readonly string[], args: readonly string[]) => {
    if (!link.available()) return;
    run(s, keys, args).catch(() => undefined);
  };

  return {
    claim(key, connectionId) {
      if (!link.available()) return true;
      return run(CLAIM, [redisKey(key)], [value(connectionId), ttl]).then(
        (reply) => reply !== 0,
        () => true,
      );
    },
    release(key, connectionId) {
      fireAndForget(RELEASE, [redisKey(key)], [value(connectionId)]);
    },
    refresh(held) {
      for (let i = 0; i < held.length; i += REFRESH_BATCH) {
        const batch = held.slice(i, i + REFRESH_BATCH);
        fireAndForget(
          REFRESH,
          batch.map(([key]) => redisKey(key)),
          [ttl, ...batch.map(([, connectionId]) => value(connectionId))],
        );
      }
    },
  };
}
