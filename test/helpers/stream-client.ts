import { performance } from 'node:perf_hooks';
import { expect } from 'vitest';
import WebSocket from 'ws';
import type { RegisteredDevice, TestPlatform } from './platform.js';

/**
 * A client of the live telemetry stream `/v1/operator/stream` (DESIGN.md §8) over real WSS, and the charger
 * calls the stream tests make (stream, stream-messages, stream-tenancy), on the platform that `platform()`
 * returns: each file starts its own in beforeAll and ends the sockets opened here with `closeAll()`.
 */

// biome-ignore lint/suspicious/noExplicitAny: stream messages are inspected field by field
export type Msg = any;

export interface Received {
  data: Msg;
  at: number;
}

export interface StreamConn {
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

export const STREAM = '/v1/operator/stream';
export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** What the calls share: the platform, the sockets opened, the realtime budget spent, the last record's time. */
interface Side {
  platform: () => TestPlatform;
  open: WebSocket[];
  realtimeUsed: Map<string, number>;
  tsMs: number;
}
type UpgradeOptions = { token?: string; queryToken?: string; authorization?: string };

export function streamCalls(platform: () => TestPlatform) {
  const side: Side = { platform, open: [], realtimeUsed: new Map(), tsMs: Date.UTC(2025, 0, 1) };
  return {
    connect: (opts: { token?: string; queryToken?: string }) => connect(side, opts),
    refused: (opts: UpgradeOptions) => refused(side, opts),
    subscribe,
    spendRealtime: (deviceId: string, n = 1) => spendRealtime(side, deviceId, n),
    record: (connectorId = 1, extra: Record<string, unknown> = {}) => record(side, connectorId, extra),
    postTelemetry: (d: RegisteredDevice, body?: StreamRecord) => postTelemetry(side, d, body),
    heartbeat: (d: RegisteredDevice, status: 'online' | 'offline' | 'fault' = 'online') =>
      heartbeat(side, d, status),
    waitForSite: (deviceId: string, siteId: string) => waitForSite(side, deviceId, siteId),
    closeAll: () => {
      for (const ws of side.open) ws.terminate();
    },
  };
}

function socket(side: Side, opts: UpgradeOptions): WebSocket {
  const query = opts.queryToken !== undefined ? `?access_token=${encodeURIComponent(opts.queryToken)}` : '';
  const headers: Record<string, string> = {};
  if (opts.token !== undefined) headers.authorization = `Bearer ${opts.token}`;
  if (opts.authorization !== undefined) headers.authorization = opts.authorization;
  const ws = new WebSocket(`wss://127.0.0.1:${side.platform().port}${STREAM}${query}`, {
    ca: side.platform().ca,
    headers,
  });
  ws.on('error', () => undefined); // failures surface as refusals, close codes or missing messages
  side.open.push(ws);
  return ws;
}

async function connect(side: Side, opts: { token?: string; queryToken?: string }): Promise<StreamConn> {
  const ws = socket(side, opts);
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
function refused(
  side: Side,
  opts: UpgradeOptions,
): Promise<{ status: number; headers: Record<string, unknown>; body: Msg }> {
  const ws = socket(side, opts);
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
function spendRealtime(side: Side, deviceId: string, n: number) {
  const { realtimeUsed } = side;
  const used = (realtimeUsed.get(deviceId) ?? 0) + n;
  if (used > 10) {
    side.platform().advance(1_000); // every one-second window has ended
    realtimeUsed.clear();
    realtimeUsed.set(deviceId, n);
  } else {
    realtimeUsed.set(deviceId, used);
  }
}

function record(side: Side, connectorId: number, extra: Record<string, unknown>) {
  side.tsMs += 1_000;
  return {
    timestamp: new Date(side.tsMs).toISOString(),
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

type StreamRecord = ReturnType<typeof record>;
async function postTelemetry(side: Side, d: RegisteredDevice, body: StreamRecord = record(side, 1, {})) {
  spendRealtime(side, d.deviceId, 1);
  const res = await side.platform().http.post('/v1/device/telemetry', { token: d.token, json: body });
  if (res.status !== 200) throw new Error(`telemetry: ${res.status} ${res.text}`);
  return body;
}

async function heartbeat(side: Side, d: RegisteredDevice, status: 'online' | 'offline' | 'fault') {
  spendRealtime(side, d.deviceId, 1);
  const res = await side.platform().http.post('/v1/device/heartbeat', {
    token: d.token,
    json: { timestamp: new Date().toISOString(), status, fault_code: 0 },
  });
  if (res.status !== 200) throw new Error(`heartbeat: ${res.status} ${res.text}`);
  return res.body.data;
}

/** Devices are put in sites through the store; the stream's directory picks that up within about a second. */
async function waitForSite(side: Side, deviceId: string, siteId: string) {
  const deadline = Date.now() + 3_000;
  while (side.platform().platform.context.directory.device(deviceId)?.site_id !== siteId) {
    if (Date.now() > deadline) throw new Error(`device ${deviceId} never showed up in ${siteId}`);
    await sleep(50);
  }
}
