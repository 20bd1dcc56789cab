import { createHash } from 'node:crypto';
import { Redis, type RedisOptions } from 'ioredis';

/** Where the link reports that Redis went away or came back (the server's pino logger fits). */
export interface RedisLinkLog {
  warn(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
}

/**
 * The connections of one platform instance to the Redis that several instances share (DESIGN.md §13): one for
 * commands (rate-limit counters, the replay cache, publishing) and one held in subscriber mode for pub/sub.
 *
 * Redis carries only what is shared but not durable, so the platform must keep serving while it is away: the
 * command connection fails a command at once instead of queueing it (callers fall back to local state), and both
 * reconnect on their own, the subscriber re-subscribing to its channels.
 */
export interface RedisLink {
  readonly client: Redis;
  readonly subscriber: Redis;
  /** The command connection is up (commands are answered rather than refused at once). */
  available(): boolean;
  /** A PING answered within a second: for readiness. */
  check(): Promise<boolean>;
  close(): Promise<void>;
}

/** Reconnect soon after a loss, then every 2 s at most, forever. */
const retryStrategy = (attempt: number) => Math.min(50 * 2 ** attempt, 2_000);

export function createRedisLink(url: string, name: string, log: RedisLinkLog): RedisLink {
  const base: RedisOptions = {
    connectionName: name,
    connectTimeout: 2_000,
    retryStrategy,
    // A command waiting on a Redis that does not answer would hold a charger's request: fall back instead.
    commandTimeout: 500,
    maxRetriesPerRequest: 0,
  };
  // Commands issued in one turn of the event loop (a busy instance's rate-limit checks) go out as one write.
  const client = new Redis(url, { ...base, enableOfflineQueue: false, enableAutoPipelining: true });
  // SUBSCRIBE issued while disconnected waits for the connection; ioredis re-subscribes after a reconnect.
  const subscriber = new Redis(url, { ...base, commandTimeout: undefined, maxRetriesPerRequest: null });
  const where = redactedUrl(url);

  let up = false;
  client.on('ready', () => {
    if (!up) log.info({ redis: where }, 'redis reachable');
    up = true;
  });
  const down = (err?: Error) => {
    if (up) log.warn({ redis: where, err: err?.message }, 'redis unreachable: falling back to local state');
    up = false;
  };
  client.on('close', () => down());
  client.on('error', (err: Error) => down(err));
  // Errors are reported through the command connection's transitions; an unhandled 'error' would end the process.
  subscriber.on('error', () => undefined);

  return {
    client,
    subscriber,
    available: () => client.status === 'ready',
    async check() {
      if (client.status !== 'ready') return false;
      try {
        return (await client.ping()) === 'PONG';
      } catch {
        return false;
      }
    },
    async close() {
      client.disconnect();
      subscriber.disconnect();
    },
  };
}

/** The URL without its password, for logs. */
export function redactedUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return 'redis';
  }
}

/** A Lua script, named by its SHA1 for EVALSHA, with its text for when Redis has not cached it. */
export interface RedisScript {
  text: string;
  sha: string;
}

export function redisScript(text: string): RedisScript {
  return { text, sha: createHash('sha1').update(text).digest('hex') };
}

/** EVALSHA, or the whole script once when Redis does not know it (first use, or Redis restarted). */
export async function runScript(
  client: Redis,
  script: RedisScript,
  keys: readonly string[],
  args: ReadonlyArray<string | number>,
): Promise<unknown> {
  try {
    return await client.evalsha(script.sha, keys.length, ...keys, ...args);
  } catch (err) {
    if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
    return await client.eval(script.text, keys.length, ...keys, ...args);
  }
}
