import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Dispatcher, request } from 'undici';
import * as z from 'zod';
import { DeviceToken, envelopeOf, Registration } from '../../shared/index.js';

/**
 * The data-volume benchmark's HTTP: requests timed to their whole body, each charger or client within its rate
 * limit (paced, and a 429 waited out as its Retry-After says), and chargers registered through the API.
 */
export interface Http {
  origin: string;
  dispatcher: Dispatcher;
}

export interface Answer {
  status: number;
  body: unknown;
  /** performance.now() when the request was sent and when its whole body had arrived. */
  sentMs: number;
  doneMs: number;
  /** How long a 429 asks to wait: Retry-After, else the RateLimit header's `t=`, else a second. */
  retryAfterMs: number;
}

export async function send(
  http: Http,
  method: 'GET' | 'POST',
  path: string,
  opts: { token?: string; body?: string } = {},
): Promise<Answer> {
  const headers: Record<string, string> = {};
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  if (opts.body !== undefined) headers['content-type'] = 'application/json';
  const sentMs = performance.now();
  const res = await request(`${http.origin}${path}`, {
    method,
    headers,
    body: opts.body,
    dispatcher: http.dispatcher,
  });
  const text = await res.body.text();
  const doneMs = performance.now();
  const retryAfter = Number(res.headers['retry-after']);
  const reset = /;t=(\d+)/.exec(String(res.headers.ratelimit ?? ''));
  return {
    status: res.statusCode,
    sentMs,
    doneMs,
    body: text ? (JSON.parse(text) as unknown) : undefined,
    retryAfterMs: 1000 * (retryAfter > 0 ? retryAfter : reset ? Number(reset[1]) : 1),
  };
}

/** The answer's body as `schema` reads it; anything but a 200 is an error. */
export function expectOk<T extends z.core.$ZodType>(what: string, answer: Answer, schema: T): z.output<T> {
  if (answer.status !== 200)
    throw new Error(`${what}: HTTP ${answer.status} ${JSON.stringify(answer.body).slice(0, 300)}`);
  return z.parse(schema, answer.body);
}

/** One subject's budget: requests at least `gapMs` apart, and a 429's wait honoured (and counted). */
export interface Throttle {
  gapMs: number;
  nextAtMs: number;
  refused: number;
}

export const throttle = (gapMs: number): Throttle => ({ gapMs, nextAtMs: 0, refused: 0 });

export async function sendWithin(
  t: Throttle,
  http: Http,
  method: 'GET' | 'POST',
  path: string,
  opts: { token?: string; body?: string },
): Promise<Answer> {
  for (;;) {
    // Re-checked after each sleep: another request of the same subject may have taken the turn meanwhile.
    for (let wait = t.nextAtMs - performance.now(); wait > 0; wait = t.nextAtMs - performance.now())
      await sleep(wait);
    t.nextAtMs = performance.now() + t.gapMs;
    const answer = await send(http, method, path, opts);
    if (answer.status !== 429) return answer;
    t.refused++;
    t.nextAtMs = performance.now() + answer.retryAfterMs;
  }
}

/** Runs `fn` over `items` with at most `concurrency` at a time. */
export async function inPool<T>(
  items: readonly T[],
  concurrency: number,
  fn: (item: T, index: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      await fn(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
}

export interface Charger {
  deviceId: string;
  secret: string;
  token: string;
}

export async function chargerToken(http: Http, deviceId: string, secret: string): Promise<string> {
  const body = JSON.stringify({
    device_id: deviceId,
    device_secret: secret,
    grant_type: 'client_credentials',
  });
  const answer = await send(http, 'POST', '/v1/device/token', { body });
  return expectOk(`token ${deviceId}`, answer, envelopeOf(DeviceToken)).data.access_token;
}

/** Registers a two-connector 22 kW charger (registration `open`) and takes its token. */
export async function registerCharger(http: Http, sn: string): Promise<Charger> {
  const connectors = [1, 2].map((connector_id) => ({ connector_id, max_power_kw: 22, v2g_capable: false }));
  const body = JSON.stringify({
    sn,
    model: 'DV-22',
    manufacturer: 'Bench',
    firmware_version: '1',
    connectors,
  });
  const reg = expectOk(
    `register ${sn}`,
    await send(http, 'POST', '/v1/device/register', { body }),
    envelopeOf(Registration),
  );
  const { device_id, device_secret } = reg.data;
  return {
    deviceId: device_id,
    secret: device_secret,
    token: await chargerToken(http, device_id, device_secret),
  };
}
