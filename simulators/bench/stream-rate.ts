#!/usr/bin/env node
import '../supported-node.js';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import WebSocket from 'ws';
import { benchArgsOrExit, DATABASE_OPTION, REDIS_OPTION } from './bench-args.js';
import { withBenchDatabase } from './bench-database.js';
import {
  type BenchPlatform,
  benchTenant,
  call,
  chargingTelemetry,
  startBenchPlatform,
  summarize,
} from './bench-platform.js';

/**
 * Stream latency under load: telemetry POSTs at a fixed total rate (default 2,000 per second) spread over enough
 * chargers that none exceeds its own 10/s limit, one WebSocket subscriber on their site; time from sending each
 * POST to its message arriving on the stream. Open loop: the send schedule does not wait for answers.
 * With `--redis URL` (and `--database URL`), across instances (issue 16): two instances over one PostgreSQL
 * database and that Redis, the POSTs to the first, the subscriber on the second.
 * Usage: node dist/simulators/bench/stream-rate.js [--rate 2000] [--seconds 20] [--warmup 5] [--devices RATE/4]
 *          [--database URL --redis URL]  (--help lists them)
 */
export interface StreamRateOptions {
  /** POSTs per second in all. */
  rate?: number;
  seconds?: number;
  /** Default: 4 POSTs a second each, so a catch-up burst after a stall stays within a charger's 10/s limit. */
  devices?: number;
  /**
   * The first seconds at full rate open the load generator's connections (TLS handshakes on both sides) and warm
   * the JIT: their messages are reported apart (`warmup_latency_ms`), not in the steady figures.
   */
  warmupSeconds?: number;
  /** Across two instances sharing this Redis, on a throw-away database of the `database` server. */
  redis?: string;
  database?: string;
}

export async function measureStreamRate(options: StreamRateOptions = {}) {
  const { redis } = options;
  if (!redis) return onPlatforms(options, () => startBenchPlatform().then((p) => [p]));
  const dataDir = await mkdtemp(join(tmpdir(), 'cp-bench-stream-'));
  try {
    return await withBenchDatabase({ database: options.database ?? DEFAULT_POSTGRES }, (database) =>
      onPlatforms(options, async () => {
        const started: BenchPlatform[] = [];
        for (const name of ['stream-1', 'stream-2'])
          started.push(
            await startBenchPlatform(['--redis', redis, '--instance-id', name], {
              database: database.choice,
              dataDir,
              keep: true,
            }),
          );
        return started;
      }),
    );
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
}

const DEFAULT_POSTGRES = 'postgres://postgres@127.0.0.1:5432/postgres';

type StreamDevice = { id: string; token: string; n: number };

/** Chargers register over the API, then an operator puts them in the site with the admin CLI. */
async function registerStreamDevices(platform: BenchPlatform, siteId: string, count: number) {
  const devices: StreamDevice[] = [];
  for (let i = 0; i < count; i++) {
    const reg = await call(platform, 'POST', '/v1/device/register', {
      json: { sn: `STREAM-${i}`, model: 'Bench', manufacturer: 'Bench', firmware_version: '1' },
    });
    const { device_id, device_secret } = reg.body.data;
    const tok = await call(platform, 'POST', '/v1/device/token', {
      json: { device_id, device_secret, grant_type: 'client_credentials' },
    });
    devices.push({ id: device_id, token: tok.body.data.access_token, n: 0 });
  }
  // An operator puts them in the site with the admin CLI, a few processes at a time.
  const queue = [...devices];
  await Promise.all(
    Array.from({ length: 6 }, async () => {
      for (let d = queue.shift(); d; d = queue.shift()) await platform.assign(d.id, siteId);
    }),
  );
  // The running platform picks admin changes up within a second.
  await sleep(1500);
  return devices;
}

/** The subscriber: times each telemetry message from the moment its POST was sent (`sentAt`). */
async function subscribeStream(
  subscribed: BenchPlatform,
  token: string,
  siteId: string,
  warmupSeconds: number,
) {
  const recorder = {
    sentAt: new Map<string, number>(),
    /** When the load began (reset once it does). */
    startedAt: performance.now(),
    bySecond: [] as number[][],
    latencies: [] as number[],
    warmupLatencies: [] as number[],
    received: 0,
    telemetryMessages: 0,
    others: [] as string[],
    closeCode: undefined as number | undefined,
    ws: new WebSocket(`${subscribed.url.replace('https', 'wss')}/v1/operator/stream`, {
      ca: subscribed.ca,
      headers: { authorization: `Bearer ${token}` },
    }),
  };
  const { ws } = recorder;
  await new Promise<void>((resolve, reject) => {
    ws.once('error', reject);
    ws.once('close', (code) => {
      recorder.closeCode = code;
    });
    ws.once('open', () => ws.send(JSON.stringify({ type: 'subscribe', site_ids: [siteId] })));
    ws.on('message', (data) => {
      const m = JSON.parse(data.toString()) as { type: string; device_id?: string; timestamp?: string };
      if (m.type === 'subscribed') resolve();
      else if (m.type !== 'telemetry') recorder.others.push(m.type);
      if (m.type === 'telemetry') {
        recorder.telemetryMessages++;
        const t0 = recorder.sentAt.get(`${m.device_id}|${m.timestamp}`);
        if (t0 !== undefined) {
          const { startedAt } = recorder;
          if (t0 - startedAt < warmupSeconds * 1000) recorder.warmupLatencies.push(performance.now() - t0);
          else recorder.latencies.push(performance.now() - t0);
          const second = Math.floor((t0 - startedAt) / 1000);
          const inSecond = recorder.bySecond[second] ?? [];
          recorder.bySecond[second] = inSecond;
          inSecond.push(performance.now() - t0);
          recorder.received++;
        }
      }
    });
  });
  return recorder;
}

/** Open loop: `rate` POSTs a second for `seconds`, spread round robin over the devices; answers are not awaited. */
async function sendOpenLoop(
  platform: BenchPlatform,
  devices: StreamDevice[],
  rate: number,
  seconds: number,
  recorder: { sentAt: Map<string, number>; startedAt: number },
) {
  const load = { sent: 0, errors: 0, errorKinds: {} as Record<string, number>, start: 0 };
  const failed = (why: string) => {
    load.errors++;
    load.errorKinds[why] = (load.errorKinds[why] ?? 0) + 1;
  };
  const base = Date.now() - 3_600_000;
  const tickMs = 10;
  const perTick = (rate * tickMs) / 1000;
  const start = performance.now();
  load.start = start;
  recorder.startedAt = start;
  let next = 0;
  let carry = 0;
  const inflight: Array<Promise<void>> = [];
  for (let tick = 0; performance.now() - start < seconds * 1000; tick++) {
    carry += perTick;
    while (carry >= 1) {
      carry--;
      const d = devices[next++ % devices.length]!;
      const timestamp = new Date(base + d.n++ * 100).toISOString();
      recorder.sentAt.set(`${d.id}|${timestamp}`, performance.now());
      load.sent++;
      inflight.push(
        call(platform, 'POST', '/v1/device/telemetry', {
          token: d.token,
          json: chargingTelemetry(timestamp),
        }).then(
          (r) => {
            if (r.status !== 200) failed(`${r.status} ${r.body?.error?.code ?? ''}`.trim());
          },
          (e: Error) => failed(e.message),
        ),
      );
    }
    const wait = start + (tick + 1) * tickMs - performance.now();
    if (wait > 0) await sleep(wait);
    if (inflight.length > 5000) await Promise.all(inflight.splice(0));
  }
  await Promise.all(inflight);
  return load;
}

/** POSTs to the first platform, the subscriber on the last (the same one without Redis). */
async function onPlatforms(options: StreamRateOptions, start: () => Promise<BenchPlatform[]>) {
  const RATE = options.rate ?? 2000;
  const SECONDS = options.seconds ?? 20;
  const DEVICES = options.devices ?? Math.max(1, Math.ceil(RATE / 4));
  const WARMUP_SECONDS = options.warmupSeconds ?? 5;
  const platforms = await start();
  const platform = platforms[0]!;
  const subscribed = platforms[platforms.length - 1]!;
  try {
    const tenant = await benchTenant(platform, 'Stream Bench');
    const token = await tenant.client();
    const devices = await registerStreamDevices(platform, tenant.site_id, DEVICES);
    const recorder = await subscribeStream(subscribed, token, tenant.site_id, WARMUP_SECONDS);
    // Open the load generator's connections before the clock starts (one TLS handshake each).
    await Promise.all(Array.from({ length: 256 }, () => call(platform, 'GET', '/healthz')));
    const load = await sendOpenLoop(platform, devices, RATE, WARMUP_SECONDS + SECONDS, recorder);
    await sleep(500);
    recorder.ws.close();
    const elapsed = (performance.now() - load.start) / 1000;
    // received counts steady and warm-up messages alike: every message sent must arrive.
    return {
      instances: platforms.length,
      target_rate: RATE,
      achieved_rate: Math.round(load.sent / elapsed),
      devices: DEVICES,
      sent: load.sent,
      received: recorder.received,
      telemetry_messages: recorder.telemetryMessages,
      other_messages: [...new Set(recorder.others)],
      stream_close_code: recorder.closeCode ?? null,
      errors: load.errors,
      error_kinds: load.errorKinds,
      warmup_seconds: WARMUP_SECONDS,
      warmup_latency_ms: summarize(recorder.warmupLatencies),
      latency_ms: summarize(recorder.latencies),
      // p99 of the messages sent in each second: shows whether the tail is spread or a few stalls.
      p99_by_second_ms: recorder.bySecond.map((l) => summarize(l ?? []).p99),
    };
  } finally {
    for (const p of platforms) await p.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values, given, texts } = benchArgsOrExit({
    usage: `Usage: node dist/simulators/bench/stream-rate.js [options]
  telemetry POSTs at --rate per second to a WebSocket subscriber of their site: latency p50/p99
  (with --redis: POSTs to one instance, the subscriber on another)`,
    options: {
      rate: { default: 2000, help: 'POSTs per second in all' },
      seconds: { default: 20, help: 'seconds measured after the warm-up' },
      warmup: { default: 5, zero: true, help: 'seconds at full rate reported apart' },
      devices: { default: 500, defaultText: 'rate / 4', integer: true, help: 'chargers sending' },
    },
    texts: {
      database: DATABASE_OPTION,
      redis: REDIS_OPTION,
    },
  });
  const result = await measureStreamRate({
    rate: values.rate,
    seconds: values.seconds,
    warmupSeconds: values.warmup,
    ...(given.has('devices') ? { devices: values.devices } : {}),
    ...(texts.redis ? { redis: texts.redis } : {}),
    ...(texts.database ? { database: texts.database } : {}),
  });
  process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
}
