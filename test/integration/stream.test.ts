import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import {
  createTenant,
  operatorToken,
  type RegisteredDevice,
  registerDevice,
  startTestPlatform,
  type TestPlatform,
} from '../helpers/platform.js';
import { createClientOf } from '../helpers/sealed-writes.js';

/**
 * The live telemetry stream `/v1/operator/stream` (DESIGN.md §8) over real WSS: handshake and refusals,
 * subscriptions, every message kind, tenancy, the per-subscription-set connection limit, malformed input and
 * the slow-consumer cut-off.
 */

// biome-ignore lint/suspicious/noExplicitAny: stream messages are inspected field by field
type Msg = any;

interface Received {
  data: Msg;
  at: number;
}

interface StreamConn {
  ws: WebSocket;
  received: Received[];
  /** The first message not taken yet that matches, waiting for it if need be. */
  take(match: (m: Msg) => boolean, timeoutMs?: number): Promise<Msg>;
  send(message: unknown): void;
  /** ping → pong: everything the server queued for this socket before the ping has arrived. */
  fence(): Promise<void>;
  closed: Promise<{ code: number; reason: string }>;
  close(): Promise<void>;
}

let tp: TestPlatform;
let tenant: Awaited<ReturnType<typeof createTenant>>;
let other: Awaited<ReturnType<typeof createTenant>>;
let dev: RegisteredDevice;
let dev2: RegisteredDevice;
let otherDev: RegisteredDevice;
let statusDev: RegisteredDevice;
let mover: RegisteredDevice;
let floodDev: RegisteredDevice;
const open: WebSocket[] = [];

const STREAM = '/v1/operator/stream';
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function socket(opts: { token?: string; queryToken?: string; authorization?: string }): WebSocket {
  const query = opts.queryToken !== undefined ? `?access_token=${encodeURIComponent(opts.queryToken)}` : '';
  const headers: Record<string, string> = {};
  if (opts.token !== undefined) headers.authorization = `Bearer ${opts.token}`;
  if (opts.authorization !== undefined) headers.authorization = opts.authorization;
  const ws = new WebSocket(`wss://127.0.0.1:${tp.port}${STREAM}${query}`, { ca: tp.ca, headers });
  ws.on('error', () => undefined); // failures surface as refusals, close codes or missing messages
  open.push(ws);
  return ws;
}

async function connect(opts: { token?: string; queryToken?: string }): Promise<StreamConn> {
  const ws = socket(opts);
  const received: Received[] = [];
  const taken = new Set<number>();
  const waiters: Array<{ match: (m: Msg) => boolean; resolve: (m: Msg) => void }> = [];
  const offer = (i: number) => {
    const w = waiters.findIndex((x) => x.match(received[i]!.data));
    if (w < 0) return;
    taken.add(i);
    const [waiter] = waiters.splice(w, 1);
    waiter!.resolve(received[i]!.data);
  };
  ws.on('message', (raw, isBinary) => {
    const at = performance.now();
    expect(isBinary).toBe(false);
    received.push({ data: JSON.parse(raw.toString()), at });
    offer(received.length - 1);
  });
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })),
  );
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
    ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
  });
  const conn: StreamConn = {
    ws,
    received,
    take(match, timeoutMs = 3_000) {
      for (let i = 0; i < received.length; i++) {
        if (!taken.has(i) && match(received[i]!.data)) {
          taken.add(i);
          return Promise.resolve(received[i]!.data);
        }
      }
      return new Promise((resolve, reject) => {
        const waiter = {
          match,
          resolve: (m: Msg) => {
            clearTimeout(timer);
            resolve(m);
          },
        };
        const timer = setTimeout(() => {
          waiters.splice(waiters.indexOf(waiter), 1);
          reject(
            new Error(
              `no matching stream message within ${timeoutMs} ms; got ${JSON.stringify(received.slice(-5).map((r) => r.data))}`,
            ),
          );
        }, timeoutMs);
        waiters.push(waiter);
      });
    },
    send(message) {
      ws.send(typeof message === 'string' ? message : JSON.stringify(message));
    },
    async fence() {
      conn.send({ type: 'ping' });
      await conn.take((m) => m.type === 'pong');
    },
    closed,
    async close() {
      if (ws.readyState === WebSocket.CLOSED) return;
      ws.close();
      await closed;
    },
  };
  return conn;
}

/** The refused upgrade's HTTP answer. */
function refused(opts: {
  token?: string;
  queryToken?: string;
  authorization?: string;
}): Promise<{ status: number; headers: Record<string, unknown>; body: Msg }> {
  const ws = socket(opts);
  return new Promise((resolve, reject) => {
    ws.on('open', () => {
      ws.terminate();
      reject(new Error('the upgrade was accepted'));
    });
    ws.on('error', () => undefined);
    ws.on('unexpected-response', (req, res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        text += chunk;
      });
      res.on('end', () => {
        req.destroy();
        try {
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: JSON.parse(text) });
        } catch {
          reject(new Error(`refusal is not JSON: ${res.statusCode} ${text}`));
        }
      });
    });
  });
}

async function subscribe(conn: StreamConn, message: { device_ids?: string[]; site_ids?: string[] }) {
  conn.send({ type: 'subscribe', ...message });
  return conn.take((m) => m.type === 'subscribed' || m.type === 'error');
}

// Heartbeat and telemetry are limited to 10 per second per device: move the fake clock on instead of waiting.
const realtimeUsed = new Map<string, number>();
function spendRealtime(deviceId: string, n = 1) {
  const used = (realtimeUsed.get(deviceId) ?? 0) + n;
  if (used > 10) {
    tp.advance(1_000); // every one-second window has ended
    realtimeUsed.clear();
    realtimeUsed.set(deviceId, n);
  } else {
    realtimeUsed.set(deviceId, used);
  }
}

let tsMs = Date.UTC(2025, 0, 1);
function record(connectorId = 1, extra: Record<string, unknown> = {}) {
  tsMs += 1_000;
  return {
    timestamp: new Date(tsMs).toISOString(),
    connector_id: connectorId,
    state: 'charging',
    voltage: 230.1,
    current: 16,
    power: 11.2,
    energy_delivered: 4.5,
    soc: 55,
    temperature: 30.5,
    ...extra,
  };
}

async function postTelemetry(d: RegisteredDevice, body: ReturnType<typeof record> = record()) {
  spendRealtime(d.deviceId);
  const res = await tp.http.post('/v1/device/telemetry', { token: d.token, json: body });
  if (res.status !== 200) throw new Error(`telemetry: ${res.status} ${res.text}`);
  return body;
}

async function heartbeat(d: RegisteredDevice, status: 'online' | 'offline' | 'fault' = 'online') {
  spendRealtime(d.deviceId);
  const res = await tp.http.post('/v1/device/heartbeat', {
    token: d.token,
    json: { timestamp: new Date().toISOString(), status, fault_code: 0 },
  });
  if (res.status !== 200) throw new Error(`heartbeat: ${res.status} ${res.text}`);
  return res.body.data;
}

/** Devices are put in sites through the store; the stream's directory picks that up within about a second. */
async function waitForSite(deviceId: string, siteId: string) {
  const deadline = Date.now() + 3_000;
  while (tp.platform.context.directory.device(deviceId)?.site_id !== siteId) {
    if (Date.now() > deadline) throw new Error(`device ${deviceId} never showed up in ${siteId}`);
    await sleep(50);
  }
}

beforeAll(async () => {
  tp = await startTestPlatform();
  tenant = await createTenant(tp, 'Stream Alpha');
  other = await createTenant(tp, 'Stream Beta');
  dev = await registerDevice(tp, 'ST-SN-1', tenant.siteId);
  dev2 = await registerDevice(tp, 'ST-SN-2', tenant.siteId);
  otherDev = await registerDevice(tp, 'ST-SN-3', other.siteId);
  statusDev = await registerDevice(tp, 'ST-SN-STATUS', tenant.siteId);
  mover = await registerDevice(tp, 'ST-SN-MOVER', tenant.siteId);
  floodDev = await registerDevice(tp, 'ST-SN-FLOOD', tenant.siteId);
  for (const d of [dev, dev2, statusDev, mover, floodDev]) await waitForSite(d.deviceId, tenant.siteId);
  await waitForSite(otherDev.deviceId, other.siteId);
});
afterAll(async () => {
  for (const ws of open) ws.terminate();
  await tp.stop();
});

describe('handshake', () => {
  it('accepts the bearer token in the Authorization header and as ?access_token=', async () => {
    const viaHeader = await connect({ token: tenant.token });
    expect(await subscribe(viaHeader, { device_ids: [dev.deviceId] })).toEqual({
      type: 'subscribed',
      device_ids: [dev.deviceId],
    });
    const viaQuery = await connect({ queryToken: tenant.token });
    expect(await subscribe(viaQuery, { site_ids: [tenant.siteId] })).toEqual({
      type: 'subscribed',
      site_ids: [tenant.siteId],
    });
    await viaHeader.close();
    await viaQuery.close();
  });

  it('refuses the upgrade itself with an HTTP ErrorResponse', async () => {
    const cases: Array<[Parameters<typeof refused>[0], number, number]> = [
      [{}, 401, 2001],
      [{ token: 'not-a-token' }, 401, 2001],
      [{ queryToken: 'not-a-token' }, 401, 2001],
      [{ authorization: `Basic ${Buffer.from('a:b').toString('base64')}` }, 401, 2001],
      [{ token: `${tenant.token.slice(0, -4)}AAAA` }, 401, 2001],
    ];
    for (const [opts, status, code] of cases) {
      const res = await refused(opts);
      expect({ opts, status: res.status, code: res.body.code }).toEqual({ opts, status, code });
      expect(typeof res.body.message).toBe('string');
      expect(res.headers['x-api-version']).toBe('1.3.0');
    }
    // A plain GET without the Upgrade is answered with an ErrorResponse too.
    const plain = await tp.http.get(STREAM, { token: tenant.token });
    expect(plain.status).toBe(426);
    expect(plain.body).toMatchObject({ code: 1001, message: expect.any(String) });
    expect(plain.headers.upgrade).toBe('websocket');
    expect((await tp.http.get(STREAM)).body).toMatchObject({ code: 2001 });

    const writeOnly = await createTenant(tp, 'Stream Write Only', ['write']);
    const forbidden = await refused({ token: writeOnly.token });
    expect(forbidden.status).toBe(403);
    expect(forbidden.body.code).toBe(2003);
  });
});

describe('subscriptions and messages', () => {
  it('streams every telemetry POST to the subscriber, in order, with the record as posted', async () => {
    const byDevice = await connect({ token: tenant.token });
    expect(await subscribe(byDevice, { device_ids: [dev.deviceId] })).toEqual({
      type: 'subscribed',
      device_ids: [dev.deviceId],
    });
    const bySite = await connect({ token: tenant.token });
    expect(await subscribe(bySite, { site_ids: [tenant.siteId] })).toEqual({
      type: 'subscribed',
      site_ids: [tenant.siteId],
    });

    const N = 200;
    const sent: Array<Record<string, unknown>> = [];
    const postedAt: number[] = [];
    const ackedAt: number[] = [];
    for (let i = 0; i < N; i++) {
      const body = record(1 + (i % 2), { soc: i % 101, phase_details: { l1: { voltage: 230, current: i } } });
      postedAt.push(performance.now());
      await postTelemetry(dev, body);
      ackedAt.push(performance.now());
      sent.push(body);
    }
    await byDevice.fence();
    await bySite.fence();
    const tel = (c: StreamConn) => c.received.filter((r) => r.data.type === 'telemetry');
    const expected = sent.map((b) => ({
      type: 'telemetry',
      device_id: dev.deviceId,
      site_id: tenant.siteId,
      ...b,
    }));
    expect(tel(byDevice).map((r) => r.data)).toEqual(expected);
    expect(tel(bySite).map((r) => r.data)).toEqual(expected);

    const ackToReceive = tel(byDevice).map((r, i) => r.at - ackedAt[i]!);
    const postToReceive = tel(byDevice).map((r, i) => r.at - postedAt[i]!);
    const pct = (xs: number[], p: number) => {
      const s = [...xs].sort((a, b) => a - b);
      return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
    };
    const ms = (x: number) => `${x.toFixed(2)} ms`;
    console.log(
      `stream latency over ${N} telemetry messages: POST acknowledged → received p50 ${ms(pct(ackToReceive, 50))}, ` +
        `p99 ${ms(pct(ackToReceive, 99))} (negative: the message arrived before the HTTP acknowledgement); ` +
        `POST sent → received p50 ${ms(pct(postToReceive, 50))}, p99 ${ms(pct(postToReceive, 99))}`,
    );
    await byDevice.close();
    await bySite.close();
  });

  it('pushes device_status: online on the first request, offline on a heartbeat saying offline', async () => {
    const fresh = statusDev; // has made no authenticated request yet
    const conn = await connect({ token: tenant.token });
    expect((await subscribe(conn, { device_ids: [fresh.deviceId] })).type).toBe('subscribed');

    await heartbeat(fresh, 'online');
    expect(await conn.take((m) => m.type === 'device_status')).toEqual({
      type: 'device_status',
      device_id: fresh.deviceId,
      status: 'online',
      at: expect.any(String),
    });
    await heartbeat(fresh, 'online'); // already online: no message
    await heartbeat(fresh, 'offline');
    expect(await conn.take((m) => m.type === 'device_status')).toMatchObject({
      device_id: fresh.deviceId,
      status: 'offline',
    });
    await postTelemetry(fresh);
    expect(await conn.take((m) => m.type === 'device_status')).toMatchObject({
      device_id: fresh.deviceId,
      status: 'online',
    });
    await conn.fence();
    expect(conn.received.filter((r) => r.data.type === 'device_status')).toHaveLength(3);
    await conn.close();
  });

  it('pushes command_status as a stop is queued, delivered, accepted and succeeded', async () => {
    const conn = await connect({ token: tenant.token });
    expect((await subscribe(conn, { device_ids: [dev2.deviceId] })).type).toBe('subscribed');
    await heartbeat(dev2); // online now, so no device_status interleaves below

    const stop = await tp.http.post(`/v1/operator/devices/${dev2.deviceId}/connectors/1/stop`, {
      token: tenant.token,
      json: { reason: 'user_request' },
    });
    expect(stop.status).toBe(200);
    const commandId = stop.body.data.command_id as string;
    const base = { type: 'command_status', command_id: commandId, device_id: dev2.deviceId, command: 'stop' };
    const next = () => conn.take((m) => m.type === 'command_status');
    expect(await next()).toEqual({ ...base, status: 'queued', at: expect.any(String) });

    const hb = await heartbeat(dev2);
    expect(hb.commands.map((c: { command_id: string }) => c.command_id)).toEqual([commandId]);
    expect(await next()).toEqual({ ...base, status: 'delivered', at: expect.any(String) });

    for (const status of ['accepted', 'succeeded'] as const) {
      const res = await tp.http.post(`/v1/device/commands/${commandId}/status`, {
        token: dev2.token,
        json: { status },
      });
      expect(res.status).toBe(200);
      expect(await next()).toEqual({ ...base, status, at: expect.any(String) });
    }
    // A repeated report changes nothing and is not streamed again.
    await tp.http.post(`/v1/device/commands/${commandId}/status`, {
      token: dev2.token,
      json: { status: 'succeeded' },
    });
    await conn.fence();
    expect(conn.received.filter((r) => r.data.type === 'command_status')).toHaveLength(4);
    await conn.close();
  });
  it('pushes a control’s reversal as queued when the control is cancelled, and wakes the charger’s long poll', async () => {
    const conn = await connect({ token: tenant.token });
    expect((await subscribe(conn, { device_ids: [dev2.deviceId] })).type).toBe('subscribed');
    await heartbeat(dev2);
    const flex = await tp.http.post('/v1/operator/control/flexibility', {
      token: tenant.token,
      json: {
        target_type: 'site',
        target_ids: [tenant.siteId],
        command: 'set_power_limit',
        params: { power_limit_percent: 50, duration: 3600 },
      },
    });
    expect(flex.status).toBe(200);
    const controlId = flex.body.data.control_id as string;
    const next = () => conn.take((m) => m.type === 'command_status');
    const limit = await next();
    expect(limit).toMatchObject({ device_id: dev2.deviceId, command: 'set_power_limit', status: 'queued' });
    // The charger has the limit: cancelling the control must lift it with a reversal command.
    const hb = await heartbeat(dev2);
    expect(hb.commands.map((c: { command_id: string }) => c.command_id)).toContain(limit.command_id);
    expect(await next()).toMatchObject({ command_id: limit.command_id, status: 'delivered' });
    const applied = await tp.http.post(`/v1/device/commands/${limit.command_id}/status`, {
      token: dev2.token,
      json: { status: 'succeeded' },
    });
    expect(applied.status).toBe(200);
    expect(await next()).toMatchObject({ command_id: limit.command_id, status: 'succeeded' });

    spendRealtime(dev2.deviceId);
    const parked = tp.http.get('/v1/device/commands?wait=20', { token: dev2.token });
    await sleep(200);
    const del = await tp.http.delete(`/v1/operator/control/${controlId}`, { token: tenant.token });
    expect(del.status).toBe(200);
    const reversal = await next();
    expect(reversal).toMatchObject({
      device_id: dev2.deviceId,
      command: 'set_power_limit',
      status: 'queued',
    });
    expect(reversal.command_id).not.toBe(limit.command_id);
    // A poll that timed out instead of being woken would answer with no commands (it read none before it waited).
    const woken = await parked;
    expect(woken.status).toBe(200);
    expect(woken.body.data.commands.map((c: { command_id: string }) => c.command_id)).toEqual([
      reversal.command_id,
    ]);
    await conn.close();
  });
});

describe('tenancy', () => {
  it('refuses another tenant’s device or site with 3001 and never streams it', async () => {
    const conn = await connect({ token: tenant.token });
    const unknown = await subscribe(conn, { device_ids: ['dev_doesnotexist'] });
    expect(unknown).toMatchObject({ type: 'error', code: 3001 });
    const foreign = await subscribe(conn, { device_ids: [otherDev.deviceId] });
    expect(foreign).toMatchObject({ type: 'error', code: 3001 });
    expect(foreign.message.replace(otherDev.deviceId, 'X')).toBe(
      unknown.message.replace('dev_doesnotexist', 'X'),
    );
    expect(await subscribe(conn, { device_ids: [dev.deviceId, otherDev.deviceId] })).toMatchObject({
      type: 'error',
      code: 3001,
    });
    expect(await subscribe(conn, { site_ids: [other.siteId] })).toMatchObject({ type: 'error', code: 3001 });
    expect(await subscribe(conn, { site_ids: [tenant.siteId, other.siteId] })).toMatchObject({
      type: 'error',
      code: 3001,
    });

    // The owner sees the telemetry; the refused subscriber sees nothing of it, nor of the mixed list's own device.
    const owner = await connect({ token: other.token });
    expect((await subscribe(owner, { device_ids: [otherDev.deviceId] })).type).toBe('subscribed');
    const posted = await postTelemetry(otherDev);
    await postTelemetry(dev);
    await heartbeat(otherDev, 'offline');
    expect(await owner.take((m) => m.type === 'telemetry')).toMatchObject({
      device_id: otherDev.deviceId,
      timestamp: posted.timestamp,
    });
    await conn.fence();
    expect(conn.received.map((r) => r.data).filter((m) => m.type !== 'error' && m.type !== 'pong')).toEqual(
      [],
    );
    expect(JSON.stringify(conn.received.map((r) => r.data))).not.toContain(
      `"device_id":"${otherDev.deviceId}"`,
    );
    await conn.close();
    await owner.close();
  });

  it('stops streaming a device to the old tenant once it moves to another tenant’s site', async () => {
    const byDevice = await connect({ token: tenant.token });
    expect((await subscribe(byDevice, { device_ids: [mover.deviceId] })).type).toBe('subscribed');
    const bySite = await connect({ token: tenant.token });
    expect((await subscribe(bySite, { site_ids: [tenant.siteId] })).type).toBe('subscribed');
    const newOwner = await connect({ token: other.token });
    expect((await subscribe(newOwner, { site_ids: [other.siteId] })).type).toBe('subscribed');

    const before = await postTelemetry(mover);
    for (const c of [byDevice, bySite]) {
      expect(await c.take((m) => m.type === 'telemetry')).toMatchObject({ timestamp: before.timestamp });
    }

    expect(await tp.store.assignDevice(mover.deviceId, other.siteId)).toBe(true);
    // Keep publishing until the new owner's site subscription starts receiving the charger.
    let firstSeenByNewOwner: string | undefined;
    const deadline = Date.now() + 5_000;
    while (!firstSeenByNewOwner && Date.now() < deadline) {
      await postTelemetry(mover);
      await newOwner.fence();
      firstSeenByNewOwner = newOwner.received.find(
        (r) => r.data.type === 'telemetry' && r.data.device_id === mover.deviceId,
      )?.data.timestamp;
      if (!firstSeenByNewOwner) await sleep(100);
    }
    expect(firstSeenByNewOwner).toBeDefined();
    const after: string[] = [];
    for (let i = 0; i < 3; i++) after.push((await postTelemetry(mover)).timestamp);
    expect((await newOwner.take((m) => m.type === 'telemetry' && m.timestamp === after[2])).site_id).toBe(
      other.siteId,
    );

    for (const c of [byDevice, bySite]) {
      await c.fence();
      const seen = c.received
        .filter((r) => r.data.type === 'telemetry' && r.data.device_id === mover.deviceId)
        .map((r) => r.data.timestamp as string);
      expect(seen.every((ts) => ts < firstSeenByNewOwner!)).toBe(true);
      for (const ts of after) expect(seen).not.toContain(ts);
    }
    const rest = await tp.http.get(`/v1/operator/devices/${mover.deviceId}`, { token: tenant.token });
    expect(rest.status).toBe(404);
    for (const c of [byDevice, bySite, newOwner]) await c.close();
  });
});

describe('connection limit: one per client per subscription set', () => {
  it('closes a second connection with the same set with 4429 and lets a different set through', async () => {
    const first = await connect({ token: tenant.token });
    expect(await subscribe(first, { device_ids: [dev.deviceId, dev2.deviceId] })).toEqual({
      type: 'subscribed',
      device_ids: [dev.deviceId, dev2.deviceId].sort(),
    });

    // Same set, other order and a repeat: still the same set, and a second token of the same client.
    const secondToken = await operatorToken(tp.http, tenant.clientId, tenant.clientSecret);
    const dup = await connect({ token: secondToken });
    dup.send({ type: 'subscribe', device_ids: [dev2.deviceId, dev.deviceId, dev2.deviceId] });
    expect((await dup.closed).code).toBe(4429);

    const narrower = await connect({ token: tenant.token });
    expect((await subscribe(narrower, { device_ids: [dev.deviceId] })).type).toBe('subscribed');
    const sameIdsBySite = await connect({ token: tenant.token });
    expect((await subscribe(sameIdsBySite, { site_ids: [tenant.siteId] })).type).toBe('subscribed');

    // Another client of the same operator has its own budget.
    const { client, secret } = await createClientOf(tp, {
      operator_ids: [tenant.operatorId],
      scopes: ['read'],
    });
    const otherClient = await connect({ token: await operatorToken(tp.http, client.client_id, secret) });
    expect((await subscribe(otherClient, { device_ids: [dev.deviceId, dev2.deviceId] })).type).toBe(
      'subscribed',
    );

    // The first connection was not disturbed.
    const posted = await postTelemetry(dev2);
    expect(await first.take((m) => m.type === 'telemetry')).toMatchObject({ timestamp: posted.timestamp });

    // Once the holder is gone, the set may be opened again.
    await first.close();
    const again = await connect({ token: tenant.token });
    expect((await subscribe(again, { device_ids: [dev.deviceId, dev2.deviceId] })).type).toBe('subscribed');
    for (const c of [narrower, sameIdsBySite, otherClient, again]) await c.close();
  });
});

describe('malformed messages', () => {
  it('answers error messages and keeps the connection open', async () => {
    const conn = await connect({ token: tenant.token });
    const nextError = () => conn.take((m) => m.type === 'error');

    conn.send('this is not json');
    expect(await nextError()).toMatchObject({ code: 1002 });
    conn.send({ type: 'unsubscribe-everything' });
    expect(await nextError()).toMatchObject({ code: 1001 });
    conn.send({ type: 'subscribe', device_ids: [] });
    expect(await nextError()).toMatchObject({ code: 1001, details: { field: 'device_ids' } });
    conn.send({ type: 'subscribe' });
    expect(await nextError()).toMatchObject({ code: 1001 });
    conn.send({ type: 'subscribe', device_ids: [dev.deviceId], site_ids: [tenant.siteId] });
    expect(await nextError()).toMatchObject({ code: 1001 });
    conn.send({ type: 'subscribe', device_ids: ['../etc/passwd'] });
    expect(await nextError()).toMatchObject({ code: 1001 });
    conn.send('[1,2,3]');
    expect(await nextError()).toMatchObject({ code: 1001 });
    conn.ws.send(Buffer.from([1, 2, 3, 4]), { binary: true });
    expect(await nextError()).toMatchObject({ code: 1002 });
    for (const r of conn.received) expect(typeof r.data.message).toBe('string');

    expect(conn.ws.readyState).toBe(WebSocket.OPEN);
    await conn.fence();
    expect((await subscribe(conn, { device_ids: [dev.deviceId] })).type).toBe('subscribed');
    const posted = await postTelemetry(dev);
    expect(await conn.take((m) => m.type === 'telemetry')).toMatchObject({ timestamp: posted.timestamp });
    await conn.close();
  });
});

describe('slow consumer', () => {
  it('cuts a subscriber that stops reading with 4008 while a healthy one keeps receiving everything', async () => {
    const slowDev = floodDev;
    const healthy = await connect({ token: tenant.token });
    expect((await subscribe(healthy, { device_ids: [slowDev.deviceId] })).type).toBe('subscribed');
    const slow = await connect({ token: tenant.token });
    expect((await subscribe(slow, { device_ids: [slowDev.deviceId, dev.deviceId] })).type).toBe('subscribed');
    await heartbeat(slowDev);
    await healthy.take((m) => m.type === 'device_status');
    await slow.take((m) => m.type === 'device_status');

    slow.ws.pause(); // stops reading the socket: the server's buffer for it grows

    // ~500-byte messages, 500 per batch POST: far more than the 1 MiB allowance plus the kernel's buffers.
    const phase = { voltage: 230.123456789, current: 31.987654321, power: 7.3612345678 };
    const batches = 40;
    const expectedTimestamps: string[] = [];
    const started = performance.now();
    for (let b = 0; b < batches; b++) {
      const records = Array.from({ length: 500 }, (_, i) =>
        record(1 + (i % 4), { phase_details: { l1: phase, l2: phase, l3: phase } }),
      );
      spendRealtime(slowDev.deviceId);
      const res = await tp.http.post('/v1/device/telemetry/batch', {
        token: slowDev.token,
        json: { records },
      });
      expect(res.status).toBe(200);
      expect(res.body.data.accepted).toBe(500);
      expectedTimestamps.push(...records.map((r) => r.timestamp));
    }
    const publishedMs = performance.now() - started;

    // The healthy subscriber got every record, in order, while the slow one was being dealt with.
    await healthy.fence();
    const got = healthy.received.filter((r) => r.data.type === 'telemetry').map((r) => r.data.timestamp);
    expect(got).toEqual(expectedTimestamps);

    // When the slow subscriber reads again, what reaches it ends with the 4008 close, promptly.
    const resumedAt = performance.now();
    slow.ws.resume();
    const closed = await Promise.race([slow.closed, sleep(5_000).then(() => undefined)]);
    expect(closed?.code).toBe(4008);
    const drainMs = performance.now() - resumedAt;
    const slowGot = slow.received.filter((r) => r.data.type === 'telemetry');
    expect(slowGot.length).toBeLessThan(expectedTimestamps.length);
    // What it did get is a gap-free prefix: nothing is skipped before the cut.
    expect(slowGot.map((r) => r.data.timestamp)).toEqual(expectedTimestamps.slice(0, slowGot.length));
    console.log(
      `slow consumer: ${expectedTimestamps.length} messages published in ${publishedMs.toFixed(0)} ms; the paused ` +
        `subscriber got ${slowGot.length} of them and its 4008 close ${drainMs.toFixed(0)} ms after it resumed reading`,
    );

    // Its subscription set is free again: reconnecting with it is not refused as a duplicate.
    const back = await connect({ token: tenant.token });
    expect(await subscribe(back, { device_ids: [slowDev.deviceId, dev.deviceId] })).toMatchObject({
      type: 'subscribed',
    });
    await back.close();

    // The stream still works for the healthy subscriber afterwards.
    const posted = await postTelemetry(slowDev);
    expect(
      await healthy.take((m) => m.type === 'telemetry' && m.timestamp === posted.timestamp),
    ).toBeDefined();
    await healthy.close();
  });
});

describe('expired token', () => {
  it('refuses the upgrade with 401/2002 once the access token has expired', async () => {
    const token = await operatorToken(tp.http, tenant.clientId, tenant.clientSecret);
    tp.advance(86_400_000 + 1_000);
    const res = await refused({ token });
    expect(res.status).toBe(401);
    expect(res.body.code).toBe(2002);
    const viaQuery = await refused({ queryToken: token });
    expect(viaQuery.status).toBe(401);
    expect(viaQuery.body.code).toBe(2002);
    // A fresh token works again.
    const fresh = await connect({
      token: await operatorToken(tp.http, tenant.clientId, tenant.clientSecret),
    });
    expect((await subscribe(fresh, { device_ids: [dev.deviceId] })).type).toBe('subscribed');
    await fresh.close();
  });
});
