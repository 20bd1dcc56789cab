import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRedisLink, type RedisLink } from '../../platform/coordination/redis-link.js';
import { startTestPlatform } from './platform.js';
import { startRedisServer, type TestRedis } from './redis.js';

/**
 * Platform instances over one database (one data directory: one PostgreSQL database in PostgreSQL runs) and one
 * private redis-server (test/helpers/redis.ts, so that a test can stop it), each instance with a Redis link of
 * its own, as machines behind a load balancer would run them (DESIGN.md §13).
 */

/** A logger for Redis links that says nothing. */
export const quiet = { warn: () => undefined, info: () => undefined };

export async function waitUntil(check: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}

type PlatformOptions = NonNullable<Parameters<typeof startTestPlatform>[0]>;

/**
 * The file's Redis and data directory, made by `start()` in beforeAll. `links` holds every link made here;
 * `stop()` (afterAll, once the file has stopped its instances) closes them, stops Redis and removes the directory.
 */
export function instancesOverRedis(dirPrefix: string) {
  let redis: TestRedis | undefined;
  let dataDir: string | undefined;
  const links: RedisLink[] = [];
  const link = (name: string): RedisLink => {
    const l = createRedisLink(redis!.url, name, quiet);
    links.push(l);
    return l;
  };
  return {
    links,
    link,
    async start(): Promise<TestRedis> {
      redis = await startRedisServer();
      dataDir = await mkdtemp(join(tmpdir(), dirPrefix));
      return redis;
    },
    /** An instance named `name` on the shared data directory, once its link (`own`) is up. */
    async instance(
      name: string,
      opts: Omit<PlatformOptions, 'dataDir' | 'redis' | 'instanceId'> = {},
      own = link(name),
    ) {
      await waitUntil(() => own.available());
      return startTestPlatform({ ...opts, dataDir, redis: own, instanceId: name });
    },
    async stop(): Promise<void> {
      for (const l of links) await l.close();
      await redis?.stop();
      if (dataDir) await rm(dataDir, { recursive: true, force: true });
    },
  };
}
