#!/usr/bin/env node
import '../supported-node.js';
import { execFile } from 'node:child_process';
import { createReadStream, readFileSync, statSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { request } from 'undici';
import { AGENT_VERSION } from '../../agent/version.js';
import { runFleetInWorkers } from '../fleet/fleet-workers.js';
import { benchArgsOrExit } from './bench-args.js';
import {
  type BenchPlatform,
  benchClient,
  call,
  sandboxOperatorId,
  startBenchPlatform,
} from './bench-platform.js';
import { sampleProcess } from './process-sampler.js';

/**
 * How long a fleet takes to move from one agent release to the next (DESIGN.md §19, issue 35): `--chargers`
 * simulated chargers with agent releases (`charger-sim fleet --agent-releases`: each downloads the real signed
 * bundle, checks it, unpacks it into its own A/B layout, runs its start check, restarts into it and commits once
 * healthy) against one sandbox platform, an update to all of them in batches of `--batch`, each batch held for
 * `--health-seconds` before the next starts. The baseline beside it is the floor the rollout rules set: batches ×
 * health time (nothing can be faster); the rest is what downloads, installs, restarts and the gate's 5-s turns
 * add, per batch.
 * Usage: npm run bench:agent-rollout [-- --chargers 1000 --batch 100 --health-seconds 60 --workers 2]
 */
const exec = promisify(execFile);
const BUILD_AGENT = fileURLToPath(new URL('../../../scripts/build-agent.mjs', import.meta.url));
const NEXT_VERSION = '0.2.0';

interface Options {
  chargers: number;
  batch: number;
  healthSeconds: number;
  workers: number;
}

interface BatchTimes {
  startedS?: number;
  doneS?: number;
}

interface DeviceRow {
  device_id: string;
  batch: number;
  state: string;
  reason?: string;
}

/** First-batch chargers whose report times are read at the end. */
const PHASE_SAMPLE = 20;

/** An operator read's data; a 429 waits its Retry-After and asks again. */
// biome-ignore lint/suspicious/noExplicitAny: the API's JSON, read field by field
async function read(platform: BenchPlatform, token: string, path: string): Promise<any> {
  for (;;) {
    const res = await call(platform, 'GET', path, { token });
    if (res.status === 200) return res.body.data;
    if (res.status !== 429) throw new Error(`GET ${path}: ${res.status} ${JSON.stringify(res.body)}`);
    await sleep(1000 * Number(res.body?.details?.retry_after_seconds ?? 5));
  }
}

const FINAL = new Set(['succeeded', 'skipped', 'failed', 'rolled_back', 'cancelled']);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function measureAgentRollout(opts: Options) {
  const dir = await mkdtemp(join(tmpdir(), 'cp-bench-rollout-'));
  const platform = await startBenchPlatform(['--env', 'sandbox']);
  try {
    return await measureOn(platform, dir, opts);
  } finally {
    await platform.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

/** The next release, built as an OEM builds it and signed with the sandbox's key (which its fleet trusts). */
async function buildRelease(platform: BenchPlatform, dir: string) {
  const archive = join(dir, `charger-agent-${NEXT_VERSION}.tar.gz`);
  const key = join(platform.dataDir, 'keys', 'update-ed25519.pem');
  const args = ['--out', join(dir, 'bundle'), '--version', NEXT_VERSION, '--archive', archive];
  await exec(process.execPath, [BUILD_AGENT, ...args, '--sign-key', key, '--quiet']);
  const manifest = JSON.parse(readFileSync(`${archive}.sig`, 'utf8')) as {
    version: string;
    target: string;
    signature: string;
  };
  return { archive, manifest, publicKey: join(platform.dataDir, 'keys', 'update-ed25519.pub.pem') };
}

async function uploadRelease(
  platform: BenchPlatform,
  token: string,
  release: Awaited<ReturnType<typeof buildRelease>>,
) {
  const { archive, manifest } = release;
  const query = new URLSearchParams({ kind: 'agent', version: manifest.version, target: manifest.target });
  const res = await request(`${platform.url}/v1/operator/artifacts?${query}`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/octet-stream',
      'content-length': String(statSync(archive).size),
      'x-artifact-signature': manifest.signature,
    },
    body: createReadStream(archive),
    dispatcher: platform.dispatcher,
  });
  const body = JSON.parse(await res.body.text());
  if (res.statusCode !== 200) throw new Error(`upload: ${res.statusCode} ${JSON.stringify(body)}`);
  return body.data.artifact_id as string;
}

async function measureOn(platform: BenchPlatform, dir: string, opts: Options) {
  const release = await buildRelease(platform, dir);
  const operatorId = await sandboxOperatorId(platform);
  const token = await benchClient(platform, operatorId);
  const sites = await call(platform, 'GET', '/v1/operator/sites', { token });
  const depot = (sites.body.data.items as Array<{ site_id: string; name: string }>).find(
    (s) => s.name === 'Sandbox Depot',
  );
  if (!depot) throw new Error('no Sandbox Depot');

  const fleet = await runFleetInWorkers(
    {
      platformUrl: platform.url,
      ca: platform.ca,
      count: opts.chargers,
      seed: 35,
      outageShare: 0,
      rampMs: Math.max(10_000, opts.chargers * 40),
      dataDir: join(dir, 'fleet'),
      agentReleases: true,
      updateKeyFiles: [release.publicKey],
    },
    opts.workers,
  );
  try {
    while (fleet.live().registered < opts.chargers) await sleep(1_000);
    const artifactId = await uploadRelease(platform, token, release);
    const cpuBefore = sampleProcess(platform.pid).cpuSeconds;
    const started = Date.now();
    const created = await call(platform, 'POST', '/v1/operator/updates', {
      token,
      json: {
        artifact_id: artifactId,
        target_type: 'site',
        target_ids: [depot.site_id],
        install: 'immediate',
        rollout: { batch_size: opts.batch, health_seconds: opts.healthSeconds },
      },
    });
    if (created.status !== 200) throw new Error(`update: ${created.status} ${JSON.stringify(created.body)}`);
    const updateId = created.body.data.update_id as string;
    const batches = new Map<number, BatchTimes>();
    let rssMax = 0;
    let view: { status: string; reason?: string; progress: Record<string, number>; devices: DeviceRow[] };
    for (;;) {
      rssMax = Math.max(rssMax, sampleProcess(platform.pid).rssMiB);
      view = await read(platform, token, `/v1/operator/updates/${updateId}`);
      noteBatches(batches, view.devices, (Date.now() - started) / 1000);
      if (view.status !== 'running') break;
      // Within the operator read budget (60 a minute), with room for the history reads at the end.
      await sleep(2_000);
    }
    const totalS = (Date.now() - started) / 1000;
    const phases = await firstBatchPhases(
      platform,
      await benchClient(platform, operatorId),
      updateId,
      view.devices,
      started,
    );
    const platformCpuS = sampleProcess(platform.pid).cpuSeconds - cpuBefore;
    const summary = await fleet.stop();
    const count = Math.max(0, ...batches.keys());
    const floorS = count * opts.healthSeconds;
    return {
      chargers: opts.chargers,
      batch_size: opts.batch,
      health_seconds: opts.healthSeconds,
      bundle_bytes: statSync(release.archive).size,
      from_version: AGENT_VERSION,
      to_version: NEXT_VERSION,
      status: view.status,
      reason: view.reason,
      progress: view.progress,
      failure_reasons: reasonsOf(view.devices),
      first_batch_seconds_to: phases,
      total_seconds: Math.round(totalS),
      baseline_floor_seconds: floorS,
      ratio_to_floor: Math.round((totalS / floorS) * 100) / 100,
      overhead_seconds_per_batch: Math.round(((totalS - floorS) / count) * 10) / 10,
      batches: [...batches.entries()]
        .sort(([a], [b]) => a - b)
        .map(([index, t]) => ({ index, started_s: t.startedS, done_s: t.doneS })),
      platform_cpu_seconds: Math.round(platformCpuS * 10) / 10,
      platform_rss_max_mib: Math.round(rssMax),
      fleet_errors: summary.errors,
      fleet_error_kinds: summary.error_kinds,
    };
  } finally {
    await fleet.stop();
  }
}

/**
 * When the first batch's chargers reported each step, seconds since the update was created (median and slowest):
 * where a batch's time goes before its health time.
 */
async function firstBatchPhases(
  platform: BenchPlatform,
  token: string,
  updateId: string,
  devices: readonly DeviceRow[],
  startedMs: number,
) {
  const at: Record<string, number[]> = {};
  // A sample of the batch: the operator read budget is 60 a minute.
  for (const d of devices.filter((x) => x.batch === 1).slice(0, PHASE_SAMPLE)) {
    const history = await read(platform, token, `/v1/operator/devices/${d.device_id}/firmware?size=50`);
    // The first time each status was reported (progress repeats `downloading`).
    const first = new Map<string, number>();
    const items = history.items as Array<{ status: string; update_id?: string; received_at: string }>;
    for (const r of items) {
      if (r.update_id !== updateId) continue;
      const seconds = (Date.parse(r.received_at) - startedMs) / 1000;
      first.set(r.status, Math.min(first.get(r.status) ?? seconds, seconds));
    }
    for (const [status, seconds] of first) at[status] = [...(at[status] ?? []), seconds];
  }
  const out: Record<string, { median: number; max: number }> = {};
  for (const [status, list] of Object.entries(at)) {
    const sorted = list.sort((a, b) => a - b);
    out[status] = {
      median: Math.round(sorted[Math.floor(sorted.length / 2)]! * 10) / 10,
      max: Math.round(sorted[sorted.length - 1]! * 10) / 10,
    };
  }
  return out;
}

/** How many chargers failed or rolled back for each reason. */
function reasonsOf(devices: readonly DeviceRow[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const d of devices) {
    if (d.state !== 'failed' && d.state !== 'rolled_back') continue;
    const reason = d.reason ?? d.state;
    counts[reason] = (counts[reason] ?? 0) + 1;
  }
  return counts;
}

/** When each batch's first charger left `pending`, and when its last one reached a final state. */
function noteBatches(batches: Map<number, BatchTimes>, devices: readonly DeviceRow[], atS: number): void {
  const byBatch = new Map<number, DeviceRow[]>();
  for (const d of devices) if (d.batch > 0) byBatch.set(d.batch, [...(byBatch.get(d.batch) ?? []), d]);
  for (const [index, rows] of byBatch) {
    const t = batches.get(index) ?? {};
    if (t.startedS === undefined && rows.some((d) => d.state !== 'pending')) t.startedS = Math.round(atS);
    if (t.doneS === undefined && rows.every((d) => FINAL.has(d.state))) t.doneS = Math.round(atS);
    batches.set(index, t);
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = benchArgsOrExit({
    usage: `Usage: npm run bench:agent-rollout [-- --chargers 1000 --batch 100 --health-seconds 60 --workers 2]
  a fleet with agent releases moved to the next release in batches, beside the floor its rollout rules set`,
    options: {
      chargers: { default: 1000, integer: true, help: 'simulated chargers, each with its own A/B layout' },
      batch: { default: 100, integer: true, help: 'chargers per batch' },
      'health-seconds': {
        default: 60,
        integer: true,
        help: 'how long each batch stays healthy before the next',
      },
      workers: { default: 2, integer: true, help: 'worker threads the fleet runs on' },
    },
  });
  const figures = await measureAgentRollout({
    chargers: values.chargers,
    batch: values.batch,
    healthSeconds: values['health-seconds'],
    workers: values.workers,
  });
  process.stdout.write(`${JSON.stringify(figures, null, 2)}\n`);
}
