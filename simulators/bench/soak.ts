#!/usr/bin/env node
import '../supported-node.js';
import { readdirSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { cpus, totalmem } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { DEFAULT_RAMP_MS_PER_CHARGER } from '../fleet/fleet-options.js';
import { runFleet } from '../fleet/fleet-runner.js';
import type { FleetSummary } from '../fleet/fleet-summary.js';
import { runFleetInWorkers } from '../fleet/fleet-workers.js';
import { benchArgsOrExit } from './bench-args.js';
import { startBenchPlatform } from './bench-platform.js';
import { sampleHostCpu, sampleProcess, stealPercent } from './process-sampler.js';
import { type SoakSample, sampleTable, summarizeSoak, toMiB } from './soak-summary.js';

/**
 * Soak (issue 6, item 4): a fleet of N chargers, every connector charging (telemetry every 5 s, heartbeats
 * every 30 s, long poll open), against a real platform process (`serve --env sandbox`) on this machine, for
 * M minutes after the ramp (20 ms per charger, at least 10 s). Every interval: the platform's RSS and open
 * file descriptors, the simulator's RSS, heap and active handles, and the request latency and failures of that
 * window only. At the end: the samples, a JSON summary with a verdict per criterion (`soak-summary.ts`), and
 * docs/soak.md. Never part of `npm test`.
 * Usage: npm run soak [-- --count 2000 --minutes 30 --interval-s 60 --workers 1]
 * Exit code 0 when every verdict passes and the fleet had no errors, 1 otherwise, 2 on a usage error.
 */

const { values } = benchArgsOrExit({
  usage: `Usage: npm run soak [-- --count 2000 --minutes 30 --interval-s 60 --workers 1]
  a fleet all charging against a real platform for --minutes, sampled every --interval-s; writes docs/soak.md
  exit 0 when every verdict passes and the fleet had no errors, 1 otherwise, 2 on a usage error`,
  options: {
    count: { default: 2000, integer: true, help: 'chargers' },
    minutes: { default: 30, help: 'minutes after the ramp' },
    'interval-s': { default: 60, help: 'seconds between samples' },
    workers: { default: 1, integer: true, help: 'worker threads of the simulator' },
  },
});
const COUNT = values.count;
const MINUTES = values.minutes;
const INTERVAL_MS = values['interval-s'] * 1000;
const WORKERS = values.workers;
const SEED = 7;

/** How it was run, for the report: `npm run soak` passes its own name down. */
const argsText = process.argv.slice(2).join(' ');
const command =
  process.env.npm_lifecycle_event === 'soak'
    ? `npm run soak${argsText ? ` -- ${argsText}` : ''}`
    : `node dist/simulators/bench/soak.js${argsText ? ` ${argsText}` : ''}`;
const machine = `${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB, ${process.platform} ${process.arch}, Node ${process.version}`;

/** Sample times, ms from the fleet's start: every interval through the ramp, its end, then every interval. */
function sampleTimes(rampMs: number, steadyMs: number, intervalMs: number): number[] {
  const times: number[] = [];
  for (let t = intervalMs; t < rampMs; t += intervalMs) times.push(t);
  times.push(rampMs);
  for (let t = rampMs + intervalMs; t < rampMs + steadyMs; t += intervalMs) times.push(t);
  times.push(rampMs + steadyMs);
  return times;
}

const rampMs = Math.max(10_000, COUNT * DEFAULT_RAMP_MS_PER_CHARGER);

async function runSoak(): Promise<{
  samples: SoakSample[];
  fleetSummary: FleetSummary;
  stealPercent: number;
}> {
  const platform = await startBenchPlatform(['--env', 'sandbox']);
  try {
    const options = {
      platformUrl: platform.url,
      ca: platform.ca,
      count: COUNT,
      allCharging: true,
      outageShare: 0,
      rampMs,
      seed: SEED,
    };
    const fleet = WORKERS > 1 ? await runFleetInWorkers(options, WORKERS) : await runFleet(options);
    process.stderr.write(
      `soak: ${COUNT} chargers, ramp ${rampMs / 1000} s, then ${MINUTES} min, a sample every ${INTERVAL_MS / 1000} s\n`,
    );
    const samples: SoakSample[] = [];
    let fleetSummary: FleetSummary;
    const hostCpuAtStart = sampleHostCpu();
    let steal = 0;
    try {
      for (const t of sampleTimes(rampMs, MINUTES * 60_000, INTERVAL_MS)) {
        const wait = fleet.startedAt + t - Date.now();
        if (wait > 0) await sleep(wait);
        const proc = sampleProcess(platform.pid);
        const live = fleet.live({ resources: true });
        const window = await fleet.takeWindow();
        const seconds = Math.max(0.001, (window.until_ms - window.from_ms) / 1000);
        const { transient, rate_limited, refused, outage } = window.failures;
        const sample: SoakSample = {
          at_s: Math.round((Date.now() - fleet.startedAt) / 1000),
          phase: t <= rampMs ? 'ramp' : 'steady',
          platform_rss_mib: Math.round(proc.rssMiB * 10) / 10,
          platform_fds: readdirSync(`/proc/${platform.pid}/fd`).length,
          platform_cpu_s: proc.cpuSeconds,
          sim_rss_mib: toMiB(live.rss_bytes),
          sim_heap_used_mib: toMiB(live.heap_used_bytes ?? 0),
          sim_active_handles: live.active_handles ?? 0,
          online: live.online,
          requests: window.requests,
          requests_per_s: Math.round(window.requests / seconds),
          p50_ms: window.latency_ms.p50_ms,
          p99_ms: window.latency_ms.p99_ms,
          failed: transient + rate_limited + refused + outage,
          errors: window.errors,
        };
        samples.push(sample);
        process.stderr.write(
          `${sample.at_s} s ${sample.phase}: platform ${sample.platform_rss_mib} MiB, ${sample.platform_fds} fds; ` +
            `simulator ${sample.sim_rss_mib} MiB (heap ${sample.sim_heap_used_mib}), ${sample.sim_active_handles} handles; ` +
            `${sample.online} online, ${sample.requests_per_s} req/s, p50 ${sample.p50_ms} ms, p99 ${sample.p99_ms} ms, ` +
            `failed ${sample.failed}, errors ${sample.errors}\n`,
        );
      }
      steal = stealPercent(hostCpuAtStart, sampleHostCpu());
    } finally {
      // Also when sampling failed (the platform died): the agents' timers would keep the process alive.
      fleetSummary = await fleet.stop();
    }
    return { samples, fleetSummary, stealPercent: steal };
  } finally {
    await platform.stop();
  }
}

const { samples, fleetSummary, stealPercent: hostCpuStealPercent } = await runSoak();
const soak = summarizeSoak(samples);
const date = new Date().toISOString();
const report = {
  command,
  date,
  machine,
  node_options: process.env.NODE_OPTIONS ?? null,
  host_cpu_steal_percent: hostCpuStealPercent,
  count: COUNT,
  workers: WORKERS,
  minutes: MINUTES,
  interval_s: INTERVAL_MS / 1000,
  ramp_s: rampMs / 1000,
  ...soak,
  fleet: {
    registered: fleetSummary.registered,
    errors: fleetSummary.errors,
    error_kinds: fleetSummary.error_kinds,
    requests_total: fleetSummary.requests.total,
    steady_latency_ms: fleetSummary.requests.steady_latency_ms,
    retried: fleetSummary.retried,
    telemetry: fleetSummary.telemetry,
    per_charger_kib: Math.round(fleetSummary.memory.per_charger_bytes / 1024),
    cpu_cores: fleetSummary.cpu.cores_used,
    event_loop_delay_ms: fleetSummary.event_loop_delay_ms,
  },
};
const table = sampleTable(samples);
process.stdout.write(`\n${table}\n\n${JSON.stringify(report, null, 2)}\n`);

const verdictRows = Object.entries(soak.verdicts)
  .map(([name, v]) => `| ${name.replaceAll('_', ' ')} | ${v.pass ? 'pass' : '**FAIL**'} | ${v.detail} |`)
  .join('\n');
const doc = `# Soak

Written by \`${command}\` on ${date}.
Machine: ${machine}.${report.node_options ? ` \`NODE_OPTIONS=${report.node_options}\`.` : ''}

${COUNT} chargers${WORKERS > 1 ? ` in ${WORKERS} worker threads` : ''}, every connector charging (telemetry every 5 s, heartbeats every 30 s, long poll open),
against \`charger-platform serve --env sandbox\` on the same machine; ramp ${rampMs / 1000} s, then ${MINUTES} minutes,
a sample every ${INTERVAL_MS / 1000} s (latency and failures of each window only). The criteria are in
\`simulators/bench/soak-summary.ts\`; "start" is the first sample whose window began after the ramp, "end" the last.

| criterion | verdict | figures |
|---|---|---|
${verdictRows}

Platform RSS ${soak.platform.rss_mib.start} → ${soak.platform.rss_mib.end} MiB;
simulator RSS ${soak.simulator.rss_mib.start} → ${soak.simulator.rss_mib.end} MiB;
window p99 ${soak.window_p99_ms.min}–${soak.window_p99_ms.max} ms; fleet errors **${fleetSummary.errors}**. The hypervisor stole
${hostCpuStealPercent} % of the machine's CPU time during the run (\`/proc/stat\`).

## Samples

${table}

## Summary

\`\`\`json
${JSON.stringify(report, null, 2)}
\`\`\`
`;
await writeFile(fileURLToPath(new URL('../../../docs/soak.md', import.meta.url)), doc);
process.stderr.write('wrote docs/soak.md\n');
process.exitCode = soak.pass && fleetSummary.errors === 0 ? 0 : 1;
