import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisLink, type RedisLink } from '../../platform/coordination/redis-link.js';
import { createStreamRegistry } from '../../platform/coordination/stream-registry.js';
import { instancesOverRedis, quiet, waitUntil } from '../helpers/instances.js';
import type { TestRedis } from '../helpers/redis.js';

/**
 * The registry in Redis behind the stream's "one connection per client_id per subscription set" across the
 * instances of one platform (DESIGN.md §8, §13; platform/coordination/stream-registry.ts), on its own against a
 * private redis-server, which is also frozen to show the fail-open fallback. The instances themselves are in
 * stream-across-instances.test.ts. Where the test servers run, like it (`npm run test:postgres`).
 */

const cluster = instancesOverRedis('cp-stream-registry-');
const { links, link } = cluster;
let redis: TestRedis;
/** Reads Redis behind the registries' backs. */
let inspector: RedisLink;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

beforeAll(async () => {
  redis = await cluster.start();
  inspector = link('inspector');
});

afterAll(async () => {
  await cluster.stop();
});

describe('the subscription registry in Redis', () => {
  const prefix = 'test:stream:';
  const uniqueKey = () => `client-${randomBytes(4).toString('hex')}|d:dev-1,dev-2`;
  const stored = (key: string) =>
    inspector.client.get(prefix + createHash('sha256').update(key).digest('hex'));

  it('claims a set for one connection, answers its owner yes again and everyone else no', async () => {
    const one = createStreamRegistry(link('reg-1'), { prefix, holder: 'h1', ttlSeconds: 5 });
    const two = createStreamRegistry(link('reg-2'), { prefix, holder: 'h2', ttlSeconds: 5 });
    await waitUntil(() => links.every((l) => l.available()));
    const key = uniqueKey();
    expect(await one.claim(key, 'c1')).toBe(true);
    expect(await one.claim(key, 'c1')).toBe(true);
    expect(await one.claim(key, 'c2')).toBe(false);
    expect(await two.claim(key, 'c1')).toBe(false);
    expect(await two.claim(key, 'c9')).toBe(false);
    // Stored under the key's hash, never the client and device ids themselves, with the TTL.
    expect(await stored(key)).toBe('h1:c1');
    const all = await inspector.client.keys(`${prefix}*`);
    expect(all.length).toBeGreaterThan(0);
    for (const k of all) expect(k).toMatch(/^test:stream:[0-9a-f]{64}$/);
    const ttl = await inspector.client.ttl(prefix + createHash('sha256').update(key).digest('hex'));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(5);
  });

  it('gives a set up only when its holder releases it', async () => {
    const one = createStreamRegistry(link('reg-3'), { prefix, holder: 'h1' });
    const two = createStreamRegistry(link('reg-4'), { prefix, holder: 'h2' });
    await waitUntil(() => links.every((l) => l.available()));
    const key = uniqueKey();
    expect(await one.claim(key, 'c1')).toBe(true);
    two.release(key, 'c1'); // another holder with the same connection id
    one.release(key, 'c2'); // this holder, another connection
    await sleep(200);
    expect(await stored(key)).toBe('h1:c1');
    expect(await two.claim(key, 'c1')).toBe(false);
    one.release(key, 'c1');
    await waitUntil(async () => (await stored(key)) === null);
    expect(await two.claim(key, 'c1')).toBe(true);
    expect(await stored(key)).toBe('h2:c1');
  });

  it('lets a claim lapse after its TTL unless refreshed, and refreshes only what is ours', async () => {
    const one = createStreamRegistry(link('reg-5'), { prefix, holder: 'h1', ttlSeconds: 2 });
    const two = createStreamRegistry(link('reg-6'), { prefix, holder: 'h2', ttlSeconds: 2 });
    await waitUntil(() => links.every((l) => l.available()));
    const [lapsing, kept, others, free] = [uniqueKey(), uniqueKey(), uniqueKey(), uniqueKey()];
    const othersKey = prefix + createHash('sha256').update(others).digest('hex');
    expect(await one.claim(lapsing, 'c1')).toBe(true);
    expect(await one.claim(kept, 'c2')).toBe(true);
    expect(await two.claim(others, 'c3')).toBe(true);
    // The refresh of a set held by someone else changes nothing: neither its holder nor its TTL.
    await sleep(1_000);
    one.refresh([[others, 'c3']]);
    await sleep(100);
    expect(await stored(others)).toBe('h2:c3');
    expect(await inspector.client.pttl(othersKey)).toBeLessThan(1_000);
    // Three seconds of refreshes every 0.5 s, as the stream's ping timer makes them. A set found free (Redis
    // restarted, say) is taken again.
    const started = Date.now();
    while (Date.now() - started < 3_000) {
      one.refresh([
        [kept, 'c2'],
        [free, 'c4'],
      ]);
      await sleep(500);
    }
    expect(await stored(lapsing)).toBeNull();
    expect(await two.claim(lapsing, 'c5')).toBe(true);
    expect(await stored(kept)).toBe('h1:c2');
    expect(await two.claim(kept, 'c5')).toBe(false);
    expect(await stored(free)).toBe('h1:c4');
    expect(await stored(others)).toBeNull();
  });

  it('fails open: says yes while Redis is unreachable or does not answer, and never throws', async () => {
    const nowhere = createRedisLink('redis://127.0.0.1:1', 'nowhere', quiet);
    try {
      const unreachable = createStreamRegistry(nowhere, { prefix, holder: 'h1' });
      expect(unreachable.claim(uniqueKey(), 'c1')).toBe(true);
      unreachable.release(uniqueKey(), 'c1');
      unreachable.refresh([[uniqueKey(), 'c1']]);
    } finally {
      await nowhere.close();
    }

    const one = createStreamRegistry(link('reg-7'), { prefix, holder: 'h1' });
    const two = createStreamRegistry(link('reg-8'), { prefix, holder: 'h2' });
    await waitUntil(() => links.every((l) => l.available()));
    const key = uniqueKey();
    expect(await one.claim(key, 'c1')).toBe(true);
    redis.freeze();
    try {
      // The command times out (500 ms): the instance's own check will have to do.
      const started = Date.now();
      expect(await two.claim(key, 'c2')).toBe(true);
      expect(Date.now() - started).toBeLessThan(2_000);
      two.release(key, 'c2');
      two.refresh([[key, 'c2']]);
    } finally {
      redis.thaw();
    }
    await waitUntil(() => links.every((l) => l.available()));
    expect(await stored(key)).toBe('h1:c1');
  });
});
