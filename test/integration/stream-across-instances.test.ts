import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import type { RedisLink } from '../../platform/coordination/redis-link.js';
import { instancesOverRedis, waitUntil } from '../helpers/instances.js';
import {
  createTenant,
  type RegisteredDevice,
  registerDevice,
  type TestPlatform,
} from '../helpers/platform.js';
import type { TestRedis } from '../helpers/redis.js';
import { streamUpgrade } from '../helpers/stream-upgrade.js';

/**
 * The stream's "one connection per client_id per subscription set" (DESIGN.md §8) across the instances of one
 * platform (§13): the sets held are registered in Redis (platform/coordination/stream-registry.ts, tested on its
 * own in stream-registry.test.ts), so a second connection is refused with 4429 whichever instance it reaches.
 * Three instances over one PostgreSQL database and a private redis-server, which is also stopped to show the
 * fail-open fallback. PostgreSQL only, like several-instances.test.ts.
 */

// biome-ignore lint/suspicious/noExplicitAny: stream messages are inspected field by field
type Msg = any;

const PING_MS = 300;
const DUPLICATE_REASON = 'subscription already open on another connection';
const cluster = instancesOverRedis('cp-stream-instances-');
const { links, link } = cluster;
const instance = (name: string, own = link(name)) => cluster.instance(name, { streamPingMs: PING_MS }, own);
let redis: TestRedis;
/** Reads Redis behind the instances' backs. */
let inspector: RedisLink;
let a: TestPlatform;
let b: TestPlatform;
let c: TestPlatform;
let tenant: Awaited<ReturnType<typeof createTenant>>;
let dev1: RegisteredDevice;
let dev2: RegisteredDevice;
const sockets: WebSocket[] = [];

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** The stream sets registered by the instances: Redis key, `holder:connection` and TTL (s). */
async function claims(): Promise<Array<{ key: string; value: string; ttl: number }>> {
  const keys = await inspector.client.keys('cp:*:stream:*');
  const out = [];
  for (const key of keys) {
    const [value, ttl] = await Promise.all([inspector.client.get(key), inspector.client.ttl(key)]);
    if (value !== null) out.push({ key, value, ttl });
  }
  return out;
}
const claimsOf = async (holder: string) => (await claims()).filter((x) => x.value.startsWith(`${holder}:`));

interface Conn {
  ws: WebSocket;
  messages: Msg[];
  /** The first message not taken yet that matches, waiting for it if need be. */
  take(match: (m: Msg) => boolean, timeoutMs?: number): Promise<Msg>;
  closed: Promise<{ code: number; reason: string }>;
  close(): Promise<void>;
}

async function connect(p: TestPlatform, token = tenant.token): Promise<Conn> {
  const ws = new WebSocket(`wss://127.0.0.1:${p.port}/v1/operator/stream`, {
    ca: p.ca,
    headers: { authorization: `Bearer ${token}` },
  });
  sockets.push(ws);
  const messages: Msg[] = [];
  const taken = new Set<number>();
  ws.on('message', (raw) => messages.push(JSON.parse(raw.toString())));
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })),
  );
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  ws.on('error', () => undefined);
  return {
    ws,
    messages,
    async take(match, timeoutMs = 5_000) {
      let found = -1;
      await waitUntil(() => {
        found = messages.findIndex((m, i) => !taken.has(i) && match(m));
        return found >= 0;
      }, timeoutMs).catch(() => {
        throw new Error(`no matching stream message; got ${JSON.stringify(messages.slice(-5))}`);
      });
      taken.add(found);
      return messages[found];
    },
    closed,
    async close() {
      if (ws.readyState === WebSocket.CLOSED) return;
      ws.close();
      await closed;
    },
  };
}

async function subscribe(conn: Conn, message: { device_ids?: string[]; site_ids?: string[] }): Promise<Msg> {
  conn.ws.send(JSON.stringify({ type: 'subscribe', ...message }));
  return conn.take((m) => m.type === 'subscribed' || m.type === 'error');
}

/** Sends the subscription and expects the connection to be closed as a duplicate. */
async function refusedAsDuplicate(conn: Conn, message: { device_ids?: string[]; site_ids?: string[] }) {
  conn.ws.send(JSON.stringify({ type: 'subscribe', ...message }));
  const closed = await Promise.race([conn.closed, sleep(5_000).then(() => undefined)]);
  expect(closed, `not closed; got ${JSON.stringify(conn.messages)}`).toEqual({
    code: 4429,
    reason: DUPLICATE_REASON,
  });
  expect(conn.messages.filter((m) => m.type === 'subscribed')).toEqual([]);
}

let tsMs = Date.now() - 3_600_000;
async function postTelemetry(p: TestPlatform, d: RegisteredDevice): Promise<string> {
  tsMs += 1_000;
  const timestamp = new Date(tsMs).toISOString();
  const res = await p.http.post('/v1/device/telemetry', {
    token: d.token,
    json: { timestamp, connector_id: 1, state: 'charging', power: 11 },
  });
  if (res.status !== 200) throw new Error(`telemetry: ${res.status} ${res.text}`);
  return timestamp;
}

beforeAll(async () => {
  redis = await cluster.start();
  inspector = link('inspector');
  a = await instance('inst-a');
  b = await instance('inst-b');
  c = await instance('inst-c');
  tenant = await createTenant(a, 'Stream Instances');
  dev1 = await registerDevice(a, 'SI-SN-1', tenant.siteId);
  dev2 = await registerDevice(a, 'SI-SN-2', tenant.siteId);
  // Every instance's directory knows the devices in their site before anyone subscribes.
  for (const p of [a, b, c])
    for (const d of [dev1, dev2]) {
      await waitUntil(async () => {
        await p.platform.context.directory.refreshDevice(d.deviceId);
        return p.platform.context.directory.device(d.deviceId)?.site_id === tenant.siteId;
      });
    }
});

afterEach(async () => {
  // A failed test leaves no connection holding a set for the next one.
  if (sockets.every((ws) => ws.readyState === WebSocket.CLOSED)) return;
  for (const ws of sockets) ws.terminate();
  await sleep(300);
});

afterAll(async () => {
  for (const ws of sockets) ws.terminate();
  for (const p of [a, b, c]) await p?.stop();
  await cluster.stop();
});

describe('stream tickets across instances', () => {
  it('a ticket asked for on A opens the stream on B, once: A and C then refuse it', async () => {
    const asked = await a.http.post('/v1/operator/stream/tickets', { token: tenant.token });
    expect(asked.status, asked.text).toBe(200);
    const ticket = asked.body.data.ticket as string;
    const ws = new WebSocket(`wss://127.0.0.1:${b.port}/v1/operator/stream?ticket=${ticket}`, { ca: b.ca });
    sockets.push(ws);
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    for (const p of [a, c])
      expect(await streamUpgrade(p, {}, `?ticket=${ticket}`)).toMatchObject({
        status: 401,
        body: { code: 2001 },
      });
    ws.close();
  });
});

describe('one connection per client and subscription set, across instances', () => {
  it('refuses with 4429 on B the set a connection on A holds, while A keeps receiving; other sets pass', async () => {
    const set = { device_ids: [dev1.deviceId, dev2.deviceId] };
    const onA = await connect(a);
    expect(await subscribe(onA, set)).toEqual({ type: 'subscribed', device_ids: [...set.device_ids].sort() });
    // Registered under a hash: neither the client nor the devices are named.
    const held = await claimsOf('inst-a');
    expect(held).toHaveLength(1);
    expect(held[0]!.key).toMatch(/^cp:[0-9a-f]{12}:stream:[0-9a-f]{64}$/);
    expect(held[0]!.value).toMatch(/^inst-a:[0-9a-f-]{36}$/);

    // The same set, in another order, on B: closed as a duplicate, exactly as on one instance.
    const onB = await connect(b);
    await refusedAsDuplicate(onB, { device_ids: [dev2.deviceId, dev1.deviceId, dev2.deviceId] });
    // ... and on C.
    await refusedAsDuplicate(await connect(c), set);

    // Other sets of the same client are fine on B: a narrower one, and the site.
    const narrower = await connect(b);
    expect((await subscribe(narrower, { device_ids: [dev1.deviceId] })).type).toBe('subscribed');
    const bySite = await connect(b);
    expect((await subscribe(bySite, { site_ids: [tenant.siteId] })).type).toBe('subscribed');

    // A's connection was not disturbed: it hears telemetry accepted by C.
    const at = await postTelemetry(c, dev2);
    expect(await onA.take((m) => m.type === 'telemetry')).toMatchObject({
      device_id: dev2.deviceId,
      timestamp: at,
    });
    expect(onA.ws.readyState).toBe(WebSocket.OPEN);
    for (const conn of [onA, narrower, bySite]) await conn.close();
    await waitUntil(async () => (await claims()).length === 0);
  });

  it("frees a set when its connection closes or moves to another set: then another instance's connection takes it", async () => {
    const set = { device_ids: [dev1.deviceId] };
    const onA = await connect(a);
    expect((await subscribe(onA, set)).type).toBe('subscribed');
    await refusedAsDuplicate(await connect(b), set);

    // A's connection moves to the site: its device set is given up, the site held instead.
    expect((await subscribe(onA, { site_ids: [tenant.siteId] })).type).toBe('subscribed');
    await waitUntil(async () => (await claimsOf('inst-a')).length === 1);
    const onB = await connect(b);
    expect((await subscribe(onB, set)).type).toBe('subscribed');
    await refusedAsDuplicate(await connect(c), { site_ids: [tenant.siteId] });

    // A's connection closes: the site is free for C at once (released, not left to lapse).
    await onA.close();
    await waitUntil(async () => (await claimsOf('inst-a')).length === 0);
    const onC = await connect(c);
    expect((await subscribe(onC, { site_ids: [tenant.siteId] })).type).toBe('subscribed');
    // Subscribing again to the set it holds keeps it (no release of what it still holds).
    expect((await subscribe(onC, { site_ids: [tenant.siteId] })).type).toBe('subscribed');
    await sleep(200);
    expect(await claimsOf('inst-c')).toHaveLength(1);
    await refusedAsDuplicate(await connect(a), { site_ids: [tenant.siteId] });

    // The holders keep their sets past a few refreshes (the ping timer), and hear telemetry.
    await sleep(3 * PING_MS);
    expect(await claimsOf('inst-b')).toHaveLength(1);
    const at = await postTelemetry(a, dev1);
    for (const conn of [onB, onC])
      expect(await conn.take((m) => m.type === 'telemetry')).toMatchObject({ timestamp: at });
    for (const conn of [onB, onC]) await conn.close();
    await waitUntil(async () => (await claims()).length === 0);
  });

  it('keeps nothing for a connection closed, or subscribed elsewhere, while its claim was on its way', async () => {
    // Closed while Redis holds the claim back: once it is answered the set is given up again.
    const closing = await connect(a);
    redis.freeze();
    try {
      closing.ws.send(JSON.stringify({ type: 'subscribe', device_ids: [dev1.deviceId] }));
      await sleep(100);
      await closing.close();
    } finally {
      redis.thaw();
    }
    expect(closing.messages).toEqual([]);
    await sleep(3 * PING_MS);
    expect(await claims()).toEqual([]);
    const other = await connect(b);
    expect((await subscribe(other, { device_ids: [dev1.deviceId] })).type).toBe('subscribed');
    await other.close();
    await waitUntil(async () => (await claims()).length === 0);

    // Two subscriptions in a row, the first looked up in storage first: whichever claim is answered first,
    // the later message's set is the one in place and the only one held.
    const moving = await connect(a);
    moving.ws.send(JSON.stringify({ type: 'subscribe', site_ids: [tenant.siteId] }));
    moving.ws.send(JSON.stringify({ type: 'subscribe', device_ids: [dev2.deviceId] }));
    await moving.take((m) => m.type === 'subscribed' && m.device_ids);
    await sleep(3 * PING_MS);
    expect(moving.messages.at(-1)).toEqual({ type: 'subscribed', device_ids: [dev2.deviceId] });
    expect(await claimsOf('inst-a')).toHaveLength(1);
    const bySite = await connect(c);
    expect((await subscribe(bySite, { site_ids: [tenant.siteId] })).type).toBe('subscribed');
    await refusedAsDuplicate(await connect(b), { device_ids: [dev2.deviceId] });
    await moving.close();
    await bySite.close();
    await waitUntil(async () => (await claims()).length === 0);
  });

  it('frees the sets of an instance killed without releasing them once their TTL lapses', async () => {
    const deadLink = link('inst-d');
    const d = await instance('inst-d', deadLink);
    const set = { device_ids: [dev2.deviceId] };
    await waitUntil(async () => {
      await d.platform.context.directory.refreshDevice(dev2.deviceId);
      return d.platform.context.directory.device(dev2.deviceId)?.site_id === tenant.siteId;
    });
    const onD = await connect(d);
    expect((await subscribe(onD, set)).type).toBe('subscribed');
    const [claim] = await claimsOf('inst-d');
    expect(claim?.ttl).toBeGreaterThan(0);
    expect(claim?.ttl).toBeLessThanOrEqual(90);

    // Killed: its Redis connections cut first, so nothing it does on the way down reaches Redis.
    links.splice(links.indexOf(deadLink), 1);
    await deadLink.close();
    await d.stop();
    await onD.closed;
    await sleep(3 * PING_MS);
    expect(await claimsOf('inst-d')).toEqual([expect.objectContaining({ key: claim!.key })]);
    // Until the claim lapses the set stays taken.
    await refusedAsDuplicate(await connect(b), set);
    // No instance refreshes it: 90 s on, it is gone. Shortened here rather than waited for.
    const ttl = await inspector.client.ttl(claim!.key);
    expect(ttl).toBeGreaterThan(0);
    await inspector.client.pexpire(claim!.key, 100);
    await waitUntil(async () => (await claimsOf('inst-d')).length === 0);
    const onB = await connect(b);
    expect((await subscribe(onB, set)).type).toBe('subscribed');
    await onB.close();
    await waitUntil(async () => (await claims()).length === 0);
  });

  it('keeps the stream open while Redis is away, each instance refusing duplicates to itself, and shares again after', async () => {
    const set = { device_ids: [dev1.deviceId, dev2.deviceId] };
    let away = true;
    await redis.stop();
    try {
      await waitUntil(() => links.every((l) => !l.available()));
      // Subscribing works (fail-open), and the local rule still holds on each instance.
      const onA = await connect(a);
      expect((await subscribe(onA, set)).type).toBe('subscribed');
      await refusedAsDuplicate(await connect(a), set);
      // Another instance cannot know: it lets the set through (each counts on its own meanwhile).
      const onB = await connect(b);
      expect((await subscribe(onB, set)).type).toBe('subscribed');
      await refusedAsDuplicate(await connect(b), set);
      const at = await postTelemetry(a, dev1);
      expect(await onA.take((m) => m.type === 'telemetry')).toMatchObject({ timestamp: at });

      // Redis back, empty: the next refresh registers the sets held, so a third instance refuses the set again.
      await redis.restart();
      away = false;
      await waitUntil(() => links.every((l) => l.available()));
      await waitUntil(async () => (await claims()).length === 1);
      const [claim] = await claims();
      expect(claim?.value).toMatch(/^inst-[ab]:/);
      await refusedAsDuplicate(await connect(c), set);
      await onA.close();
      await onB.close();
      await waitUntil(async () => (await claims()).length === 0);
      const onC = await connect(c);
      expect((await subscribe(onC, set)).type).toBe('subscribed');
      await onC.close();
    } finally {
      // An instance closing while Redis is away would wait for it (its relay unsubscribes): back in any case.
      if (away) await redis.restart();
    }
  });
});
