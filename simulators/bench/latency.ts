#!/usr/bin/env node
import '../supported-node.js';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import WebSocket from 'ws';
import { benchArgsOrExit } from './bench-args.js';
import {
  type BenchPlatform,
  benchDevice,
  benchTenant,
  call,
  chargingTelemetry,
  startBenchPlatform,
  summarize,
} from './bench-platform.js';

type Tenant = Awaited<ReturnType<typeof benchTenant>>;

/** Long-poll wake-up: from sending an operator's stop to the waiting poll's answer. */
async function measureWakeUp(platform: BenchPlatform, tenant: Tenant, tokens: string[], SAMPLES: number) {
  // Command reports share a 60/min budget per charger: one charger per 50 samples.
  const pollers = await Promise.all(
    Array.from({ length: Math.ceil(SAMPLES / 50) }, (_, i) =>
      benchDevice(platform, `LAT-POLL-${i}`, tenant.site_id),
    ),
  );
  const wake: number[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    const dev = pollers[Math.floor(i / 50)]!;
    const poll = call(platform, 'GET', '/v1/device/commands?wait=30', { token: dev.token }).then((r) => {
      if (r.body?.data?.commands?.length !== 1) throw new Error(`poll: ${JSON.stringify(r.body)}`);
      return performance.now();
    });
    await sleep(15); // let the poll park
    const queuedAt = performance.now();
    const stop = await call(platform, 'POST', `/v1/operator/devices/${dev.deviceId}/connectors/1/stop`, {
      token: tokens[Math.floor(i / 50)]!,
      json: {},
    });
    if (stop.status !== 200) throw new Error(`stop: ${stop.status} ${JSON.stringify(stop.body)}`);
    wake.push((await poll) - queuedAt);
    // Report it so the next poll does not return it again at once.
    const report = await call(platform, 'POST', `/v1/device/commands/${stop.body.data.command_id}/status`, {
      token: dev.token,
      json: { status: 'succeeded' },
    });
    if (report.status !== 200) throw new Error(`report: ${report.status}`);
    await sleep(100); // long polls share the 10/s per-charger budget with heartbeats and telemetry
  }

  return wake;
}

/** Stream latency: from sending a telemetry POST to its message on the operator's stream. */
async function measureStream(platform: BenchPlatform, tenant: Tenant, token: string, SAMPLES: number) {
  const streamers = await Promise.all(
    Array.from({ length: 8 }, (_, i) => benchDevice(platform, `LAT-STREAM-${i}`, tenant.site_id)),
  );
  // Site assignments made by the admin CLI reach the running platform within a second.
  await sleep(1500);
  const ws = new WebSocket(`${platform.url.replace('https', 'wss')}/v1/operator/stream`, {
    ca: platform.ca,
    headers: { authorization: `Bearer ${token}` },
  });
  const sentAt = new Map<string, number>();
  const streamLatency: number[] = [];
  await new Promise<void>((resolve, reject) => {
    ws.once('error', reject);
    ws.once('open', () => {
      ws.send(JSON.stringify({ type: 'subscribe', site_ids: [tenant.site_id] }));
    });
    ws.on('message', (data) => {
      const m = JSON.parse(data.toString()) as { type: string; device_id?: string; timestamp?: string };
      if (m.type === 'subscribed') resolve();
      if (m.type === 'telemetry') {
        const key = `${m.device_id}|${m.timestamp}`;
        const t0 = sentAt.get(key);
        if (t0 !== undefined) streamLatency.push(performance.now() - t0);
      }
    });
  });
  const perDevice = Math.ceil(SAMPLES / streamers.length);
  const base = Date.now();
  await Promise.all(
    streamers.map(async (d, k) => {
      for (let i = 0; i < perDevice; i++) {
        const timestamp = new Date(base + i * 1000 + k).toISOString();
        // From the moment the POST is sent: the platform publishes before it answers.
        sentAt.set(`${d.deviceId}|${timestamp}`, performance.now());
        const res = await call(platform, 'POST', '/v1/device/telemetry', {
          token: d.token,
          json: chargingTelemetry(timestamp),
        });
        if (res.status !== 200) throw new Error(`telemetry: ${res.status}`);
        await sleep(110); // within the 10/s per-device budget
      }
    }),
  );
  await sleep(200);
  ws.close();

  return { streamLatency, sent: perDevice * streamers.length };
}

/**
 * Long-poll wake-up and stream latency on loopback (issue: command lifecycle and live stream).
 *   long poll: a charger waits on GET /v1/device/commands?wait=30; the operator POSTs stop; time from sending
 *              the stop to the poll's answer (the charger hears of it before the operator's 200 arrives).
 *   stream:    telemetry POSTs from several chargers; time from sending the POST to the WebSocket message.
 * Usage: npm run bench:latency [-- --samples 200]
 */
export async function measureLongPollAndStreamLatency(SAMPLES = 200) {
  const platform = await startBenchPlatform();
  try {
    const tenant = await benchTenant(platform, 'Latency Bench');
    // Single-connector commands share a 60/min budget per client: spread the stops over enough clients.
    const tokens = await Promise.all(Array.from({ length: Math.ceil(SAMPLES / 50) }, () => tenant.client()));
    const wake = await measureWakeUp(platform, tenant, tokens, SAMPLES);
    const stream = await measureStream(platform, tenant, tokens[0]!, SAMPLES);

    const result = {
      machine: `${process.platform} ${process.arch}, node ${process.version}`,
      long_poll_wakeup_ms: summarize(wake),
      stream_latency_ms: { ...summarize(stream.streamLatency), sent: stream.sent },
    };
    return result;
  } finally {
    await platform.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = benchArgsOrExit({
    usage: `Usage: npm run bench:latency [-- --samples 200]
  long-poll wake-up (operator stop to the waiting poll's answer) and stream latency, on loopback`,
    options: { samples: { default: 200, integer: true, help: 'samples of each' } },
  });
  process.stdout.write(`${JSON.stringify(await measureLongPollAndStreamLatency(values.samples), null, 2)}\n`);
}
