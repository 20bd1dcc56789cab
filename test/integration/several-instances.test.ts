import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { createRedisLink } from '../../platform/coordination/redis-link.js';
import { createRelay, type Relay } from '../../platform/coordination/relay.js';
import { createCommandNotifier } from '../../platform/services/command-notifier.js';
import { noEvents } from '../../platform/services/platform-events.js';
import { instancesOverRedis, quiet, waitUntil } from '../helpers/instances.js';
import { createTenant, registerDevice, type TestPlatform } from '../helpers/platform.js';
import type { TestRedis } from '../helpers/redis.js';

/**
 * Three platform instances over one PostgreSQL database and one Redis (DESIGN.md §13), each with its own
 * connections, in-memory waiters and stream, as three machines behind a load balancer would run them: what one
 * accepts, the others act on (wake-ups, the stream, liveness, the relay, readiness, Redis going away, draining).
 * Limits and credentials shared across instances are in several-instances-limits-and-credentials.test.ts.
 * A private redis-server (test/helpers/redis.ts) so that Redis can be stopped. PostgreSQL only
 * (`npm run test:postgres`): several instances share a database server, never a SQLite file.
 */

const cluster = instancesOverRedis('cp-instances-');
const { links } = cluster;
const instance = (name: string) => cluster.instance(name);
const relays: Relay[] = [];
let redis: TestRedis;
let a: TestPlatform;
let b: TestPlatform;
let c: TestPlatform;
let tenant: Awaited<ReturnType<typeof createTenant>>;

beforeAll(async () => {
  redis = await cluster.start();
  a = await instance('inst-a');
  b = await instance('inst-b');
  c = await instance('inst-c');
  tenant = await createTenant(a, 'Instances Alpha');
});

afterAll(async () => {
  for (const p of [a, b, c]) await p?.stop();
  for (const r of relays) await r.close();
  await cluster.stop();
});

/** The tenant's stop of a charger's connector 1, through `p`. */
const sendStop = (p: TestPlatform, deviceId: string) =>
  p.http.post(`/v1/operator/devices/${deviceId}/connectors/1/stop`, {
    token: tenant.token,
    json: { reason: 'user_request' },
  });

/** A new charger's long poll parked on `holder`, then a stop sent through `sender`: both answers. */
async function stopAcross(holder: TestPlatform, sender: TestPlatform, sn: string) {
  const dev = await registerDevice(a, sn, tenant.siteId);
  // Parked for up to 25 s: only a wake-up from the other instance answers it with the command.
  const poll = holder.http.get('/v1/device/commands?wait=25', { token: dev.token });
  await waitUntil(() => holder.platform.context.notifier.connectedDevices() === 1);
  const sent = await sendStop(sender, dev.deviceId);
  expect(sent.status).toBe(200);
  return { dev, sent, answered: await poll };
}

/** The tenant's stream on `p`, subscribed to `deviceIds`: every message it receives, in order. */
async function subscribeOn(p: TestPlatform, deviceIds: string[]) {
  // A charger registered through another instance reaches this one's directory when its reload runs (a NOTIFY
  // away, longer on a loaded machine); until then a subscription answers 3001 like an unknown device.
  await waitUntil(() =>
    deviceIds.every((id) => p.platform.context.directory.device(id)?.site_id === tenant.siteId),
  );
  const ws = new WebSocket(`wss://127.0.0.1:${p.port}/v1/operator/stream`, {
    ca: p.ca,
    headers: { authorization: `Bearer ${tenant.token}` },
  });
  const messages: Array<Record<string, unknown>> = [];
  ws.on('message', (raw) => messages.push(JSON.parse(raw.toString())));
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  ws.send(JSON.stringify({ type: 'subscribe', device_ids: deviceIds }));
  await waitUntil(() => messages.some((m) => m.type === 'subscribed')).catch((err) => {
    throw new Error(`subscribe: ${err.message}: ${JSON.stringify(messages)}`);
  });
  return { messages, close: () => ws.close() };
}

describe('several instances, one database, one Redis', () => {
  it('a command accepted by one instance wakes the long poll parked on another', async () => {
    const { dev, sent, answered } = await stopAcross(b, a, 'MI-WAKE-1');
    expect(answered.status).toBe(200);
    expect(answered.body.data.commands.map((x: { command_id: string }) => x.command_id)).toEqual([
      sent.body.data.command_id,
    ]);
    // ... and its status, reported through C, is what A reads.
    const report = await c.http.post(`/v1/device/commands/${sent.body.data.command_id}/status`, {
      token: dev.token,
      json: { status: 'accepted' },
    });
    expect(report.status).toBe(200);
    const read = await a.http.get(`/v1/operator/commands/${sent.body.data.command_id}`, {
      token: tenant.token,
    });
    expect(read.body.data.status).toBe('accepted');
  });

  it('a stream subscriber on one instance hears telemetry and command changes accepted by the others', async () => {
    const dev = await registerDevice(a, 'MI-STREAM-1', tenant.siteId);
    const { messages, close } = await subscribeOn(c, [dev.deviceId]);

    const at = new Date(Date.now() - 1_000).toISOString();
    const posted = await a.http.post('/v1/device/telemetry', {
      token: dev.token,
      json: { timestamp: at, connector_id: 1, state: 'charging', power: 11.5 },
    });
    expect(posted.status).toBe(200);
    const sent = await sendStop(b, dev.deviceId);
    expect(sent.status).toBe(200);
    await waitUntil(() => messages.some((m) => m.type === 'command_status')).catch((err) => {
      throw new Error(`${err.message}: ${JSON.stringify(messages)}`);
    });
    close();
    const telemetry = messages.filter((m) => m.type === 'telemetry');
    expect(telemetry).toEqual([
      expect.objectContaining({
        device_id: dev.deviceId,
        timestamp: at,
        power: 11.5,
        site_id: tenant.siteId,
      }),
    ]);
    expect(messages.filter((m) => m.type === 'command_status')).toEqual([
      expect.objectContaining({
        command_id: sent.body.data.command_id,
        device_id: dev.deviceId,
        status: 'queued',
      }),
    ]);
  });

  it('online and offline are the same on every instance, and each transition is streamed once', async () => {
    const dev = await registerDevice(a, 'MI-LIVE-1', tenant.siteId);
    const { messages, close } = await subscribeOn(c, [dev.deviceId]);
    const statuses = () => messages.filter((m) => m.type === 'device_status').map((m) => m.status);
    const advanceAll = (ms: number) => {
      for (const p of [a, b, c]) p.advance(ms);
    };
    const heartbeat = (p: TestPlatform) =>
      p.http.post('/v1/device/heartbeat', {
        token: dev.token,
        json: { timestamp: new Date(p.now()).toISOString(), status: 'online', fault_code: 0 },
      });
    const onlineOn = async (p: TestPlatform) =>
      (await p.http.get(`/v1/operator/devices/${dev.deviceId}`, { token: tenant.token })).body.data.status;

    // Seen by A, then by B: online once.
    expect((await heartbeat(a)).status).toBe(200);
    expect((await heartbeat(b)).status).toBe(200);
    await waitUntil(() => statuses().includes('online'));
    // The charger stays with B; A last saw it 100 s ago, beyond the 90-s window. B's sight reaches the database
    // first (its periodic write), then A's tick finds it there and does not call the charger offline.
    advanceAll(60_000);
    const seenByB = b.now();
    expect((await heartbeat(b)).status).toBe(200);
    await waitUntil(
      async () => ((await a.store.getDevice(dev.deviceId))?.last_seen_ms ?? 0) >= seenByB,
      15_000,
    );
    advanceAll(40_000);
    await new Promise((r) => setTimeout(r, 6_000)); // one liveness tick of every instance
    for (const p of [a, b, c]) expect(await onlineOn(p)).toBe('online');
    expect(statuses()).toEqual(['online']);

    // Now it stops altogether: offline on every instance, streamed once.
    advanceAll(100_000);
    await waitUntil(() => statuses().includes('offline'), 15_000);
    await new Promise((r) => setTimeout(r, 6_000)); // every instance has ticked again
    close();
    for (const p of [a, b, c]) expect(await onlineOn(p)).toBe('offline');
    expect(statuses()).toEqual(['online', 'offline']);
  });

  it('relays telemetry only while another instance has stream subscribers', async () => {
    // Two relays of their own (a namespace nobody else uses), as two instances' would be.
    const namespace = `cp:test-${randomUUID()}`;
    const relay = async (name: string) => {
      const link = createRedisLink(redis.url, name, quiet);
      links.push(link);
      await waitUntil(() => link.available());
      const r = await createRelay(link, { namespace, instanceId: name, notifier: createCommandNotifier() });
      relays.push(r);
      return r;
    };
    const x = await relay('relay-x');
    const y = await relay('relay-y');
    const heardByY: string[] = [];
    let yHasSubscribers = false;
    const fromX = x.events(noEvents, () => false);
    y.events({ ...noEvents, telemetry: (deviceId) => heardByY.push(deviceId) }, () => yHasSubscribers);
    const record = { timestamp: new Date().toISOString(), connector_id: 1, state: 'charging' as const };

    await new Promise((r) => setTimeout(r, 300)); // both subscribed
    fromX.telemetry('dev-unheard', [record]);
    await new Promise((r) => setTimeout(r, 300));
    expect(heardByY).toEqual([]);
    expect(x.stats().published).toBe(0);

    // A subscription starts on Y: X sends its telemetry from then on.
    yHasSubscribers = true;
    y.announceInterest();
    await waitUntil(() => {
      fromX.telemetry('dev-heard', [record]);
      return heardByY.includes('dev-heard');
    });
    expect(heardByY).not.toContain('dev-unheard');
    expect(x.stats().published).toBeGreaterThan(0);
  });

  it('reports readiness with storage and Redis, and names the instance', async () => {
    const ready = await b.http.get('/readyz');
    expect(ready.status).toBe(200);
    expect(ready.body).toMatchObject({
      status: 'ready',
      instance: 'inst-b',
      checks: { storage: 'ok', redis: 'ok' },
    });
    const metrics = await b.metrics();
    expect(metrics.text).toMatch(/charger_platform_redis_up\{instance="inst-b"\} 1/);
    expect(metrics.text).toMatch(
      /charger_platform_relay_messages_total\{direction="received",instance="inst-b"\} [1-9]/,
    );
  });

  it('keeps serving while Redis is away, on local state, and shares again once it is back', async () => {
    const own = await createTenant(a, 'Instances Outage');
    await redis.stop();
    await waitUntil(() => links.every((l) => !l.available()));
    // Nothing fails because Redis is gone: reads, writes, signatures; readiness says what is missing.
    for (const p of [a, b, c]) {
      const res = await p.http.get('/v1/operator/devices', { token: own.token });
      expect(res.status).toBe(200);
    }
    const notReady = await a.http.get('/readyz');
    expect(notReady.status).toBe(503);
    expect(notReady.body).toMatchObject({
      status: 'not_ready',
      checks: { storage: 'ok', redis: 'unreachable' },
    });
    const metrics = await a.metrics();
    expect(metrics.text).toMatch(/charger_platform_redis_up\{instance="inst-a"\} 0/);
    expect(metrics.text).toMatch(
      /charger_platform_redis_fallbacks_total\{kind="rate_limit",instance="inst-a"\} [1-9]/,
    );

    await redis.restart();
    await waitUntil(() => links.every((l) => l.available()));
    expect((await a.http.get('/readyz')).status).toBe(200);
    // Wake-ups cross instances again (the subscriber re-subscribed on its own).
    const { answered } = await stopAcross(c, b, 'MI-AFTER-1');
    expect(answered.body.data.commands).toHaveLength(1);
  });

  it('answers parked long polls at once when an instance shuts down, and says it is draining', async () => {
    // Each step says which one stalled (CI once reported only the test's timeout): starting an instance on a
    // loaded machine can take seconds, the poll's answer must not wait for its 25 s.
    const dev = await step('registering', registerDevice(a, 'MI-DRAIN-1', tenant.siteId), 15_000);
    const d = await step('starting inst-d', instance('inst-d'), 30_000);
    const poll = d.http.get('/v1/device/commands?wait=25', { token: dev.token });
    await waitUntil(() => d.platform.context.notifier.connectedDevices() === 1);
    const closing = d.platform.close();
    const answered = await step('the parked poll answered', poll, 10_000);
    expect(answered.status).toBe(200);
    expect(answered.body.data.commands).toEqual([]);
    // Its connection goes with the answer: closing waits for no keep-alive socket.
    expect(answered.headers.connection).toBe('close');
    await step('closing inst-d', closing, 20_000);
    await d.http.close();
    await d.store.close();
  }, 90_000);
});

/** `p`, or an error naming `what` once `ms` pass first. */
async function step<T>(what: string, p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not done in ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}
