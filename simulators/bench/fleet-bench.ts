#!/usr/bin/env node
import { setTimeout as sleep } from 'node:timers/promises';
import { runFleet } from '../fleet/fleet-runner.js';
import { type BenchPlatform, call, startBenchPlatform } from './bench-platform.js';
import { type ProcessSample, sampleProcess } from './process-sampler.js';

/**
 * Fleet benchmarks against a real platform process (sandbox: open registration, chargers join its default site).
 *   fleet:   N chargers, every connector charging (telemetry every 5 s, heartbeats every 30 s), for `minutes`;
 *            errors, steady-state p99, requests per second, RSS of platform and simulator, memory per charger.
 *   command: 1,000 chargers connected; an operator stops connectors one after another; operator POST → the
 *            agent's `succeeded` report acknowledged, p50/p99 (measured by the fleet from each command's expiry).
 * Usage: node dist/simulators/bench/fleet-bench.js fleet --count 2000 --minutes 5
 *        node dist/simulators/bench/fleet-bench.js command --count 1000 --commands 300
 */
function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
}

async function sandboxPlatform(): Promise<BenchPlatform> {
  return startBenchPlatform(['--env', 'sandbox']);
}

/** A read/write client of the sandbox operator (the default site's owner), through the admin CLI. */
async function sandboxOperatorToken(p: BenchPlatform): Promise<string> {
  const ops = (await p.admin(['operators', 'list'])) as Array<{ operator_id: string; name: string }>;
  const sandbox = ops.find((o) => o.name === 'Sandbox Energy');
  if (!sandbox) throw new Error('no sandbox operator');
  const c = (await p.admin([
    'clients',
    'create',
    '--operator',
    sandbox.operator_id,
    '--scopes',
    'read,write',
  ])) as {
    client_id: string;
    client_secret: string;
  };
  const res = await call(p, 'POST', '/v1/operator/oauth/token', {
    json: { client_id: c.client_id, client_secret: c.client_secret, grant_type: 'client_credentials' },
  });
  return res.body.access_token as string;
}

const mib = (bytes: number) => Math.round((bytes / 1048576) * 10) / 10;

export async function measureFleet(count: number, minutes: number) {
  const platform = await sandboxPlatform();
  try {
    const rampMs = Math.max(10_000, count * 20);
    const fleet = await runFleet({
      platformUrl: platform.url,
      ca: platform.ca,
      count,
      allCharging: true,
      outageShare: 0,
      rampMs,
      durationMs: rampMs + minutes * 60_000,
      seed: 7,
    });
    const platformSamples: ProcessSample[] = [];
    let stopped = false;
    const sampler = (async () => {
      while (!stopped) {
        platformSamples.push(sampleProcess(platform.pid));
        await sleep(5_000);
      }
    })();
    const summary = await fleet.done;
    stopped = true;
    await sampler;
    const first = platformSamples[Math.min(platformSamples.length - 1, Math.ceil(rampMs / 5_000))]!;
    const last = platformSamples[platformSamples.length - 1]!;
    return {
      count,
      minutes,
      registered: summary.registered,
      errors: summary.errors,
      error_kinds: summary.error_kinds,
      requests_per_s: summary.requests.per_second,
      steady_latency_ms: summary.requests.steady_latency_ms,
      telemetry: summary.telemetry,
      platform_rss_mib: { after_ramp: Math.round(first.rssMiB), end: Math.round(last.rssMiB) },
      platform_cpu_cores:
        Math.round(((last.cpuSeconds - first.cpuSeconds) / ((last.atMs - first.atMs) / 1000)) * 100) / 100,
      simulator_rss_mib: {
        peak: mib(summary.memory.rss_peak_bytes),
        at_stop: mib(summary.memory.rss_at_stop_bytes),
      },
      simulator_cpu_cores: summary.cpu.cores_used,
      memory_per_charger_kib: Math.round(summary.memory.per_charger_bytes / 1024),
    };
  } finally {
    await platform.stop();
  }
}

export async function measureCommandLatency(count: number, commands: number) {
  const platform = await sandboxPlatform();
  try {
    const fleet = await runFleet({
      platformUrl: platform.url,
      ca: platform.ca,
      count,
      outageShare: 0,
      seed: 11,
    });
    // Wait until every charger registered and the ramp settled.
    for (let i = 0; i < 600 && fleet.live().registered < count; i++) await sleep(1_000);
    await sleep(15_000);
    // Single-connector commands share a 60/min budget per client: enough clients for one command per 100 ms.
    const tokens = await Promise.all(
      Array.from({ length: Math.ceil(commands / 50) }, () => sandboxOperatorToken(platform)),
    );
    const chargers = fleet.chargers().filter((c) => c.deviceId);
    let refused = 0;
    for (let i = 0; i < commands; i++) {
      const c = chargers[(i * 7919) % chargers.length]!;
      const res = await call(platform, 'POST', `/v1/operator/devices/${c.deviceId}/connectors/1/stop`, {
        token: tokens[Math.floor(i / 50)]!,
        json: { reason: 'bench' },
      });
      if (res.status !== 200) refused++;
      await sleep(100);
    }
    await sleep(10_000);
    const summary = await fleet.stop();
    return {
      chargers: count,
      commands_sent: commands,
      refused,
      outcomes: summary.commands.outcomes,
      latency_ms: summary.commands.latency_ms,
      errors: summary.errors,
    };
  } finally {
    await platform.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const mode = process.argv[2];
  const result =
    mode === 'command'
      ? await measureCommandLatency(arg('count', 1000), arg('commands', 300))
      : await measureFleet(arg('count', 2000), arg('minutes', 5));
  process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
}
