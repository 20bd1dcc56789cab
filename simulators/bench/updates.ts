#!/usr/bin/env node
import '../supported-node.js';
import { spawn } from 'node:child_process';
import { createHash, generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { createReadStream, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Agent, request } from 'undici';
import { artifactSigningText } from '../../shared/artifact-manifest.js';
import { registerLoadChargers } from './bare-baseline.js';
import { benchArgsOrExit, DATABASE_OPTION } from './bench-args.js';
import { type BenchStorage, withBenchDatabase } from './bench-database.js';
import {
  type BenchPlatform,
  benchClient,
  call,
  sandboxOperatorId,
  startBenchPlatform,
  summarize,
} from './bench-platform.js';
import { type DownloadJob, type DownloadResult, downloadOnWorker } from './download-load.js';
import { sampleProcess } from './process-sampler.js';

/**
 * Update downloads (DESIGN.md §19): one artifact of `--size-mib` to `--chargers` chargers through one platform
 * process (`GET /v1/device/artifacts/{id}`, each charger with its own token, `--concurrency` at a time, within the
 * platform's 64), side by side in the same run with the same file from a bare node:https static server
 * (static-file-server.ts) to the same downloaders, in alternating rounds. Meanwhile a probe sends `--probe-rate`
 * heartbeats a second to the platform: the charger API's latency while it serves the downloads, beside its
 * latency while the bare server serves them (the same machine, as busy). The platform's RSS is sampled throughout.
 * Usage: npm run bench:updates [-- --chargers 500 --size-mib 50 --concurrency 64 --rounds 2]
 */
export interface UpdateDownloadOptions {
  chargers: number;
  sizeMib: number;
  concurrency: number;
  rounds: number;
  probeRate: number;
}

export function measureUpdateDownloads(opts: UpdateDownloadOptions, storage: BenchStorage = {}) {
  return withBenchDatabase(storage, async (database) => {
    const platform = await startBenchPlatform(['--env', 'sandbox'], { database: database.choice });
    const dir = await mkdtemp(join(tmpdir(), 'cp-bench-updates-'));
    try {
      return await measureOn(platform, dir, opts, database.backend);
    } finally {
      await platform.stop();
      await rm(dir, { recursive: true, force: true });
    }
  });
}

/** Uploads `file` as a firmware of the sandbox operator and starts an update of it to every charger. */
async function artifactForAll(platform: BenchPlatform, file: string, size: number, sha256: string) {
  const operatorId = await sandboxOperatorId(platform);
  const token = await benchClient(platform, operatorId);
  const manifest = { kind: 'firmware' as const, version: 'bench-1', target: '', sha256, size };
  const { privateKey } = generateKeyPairSync('ed25519');
  const upload = await request(`${platform.url}/v1/operator/artifacts?kind=firmware&version=bench-1`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/octet-stream',
      'content-length': String(size),
      'x-artifact-signature': sign(null, Buffer.from(artifactSigningText(manifest)), privateKey).toString(
        'base64',
      ),
    },
    body: createReadStream(file),
    dispatcher: platform.dispatcher,
  });
  const uploaded = JSON.parse(await upload.body.text());
  if (upload.statusCode !== 200) throw new Error(`upload: ${upload.statusCode} ${JSON.stringify(uploaded)}`);
  const artifactId = uploaded.data.artifact_id as string;
  const update = await call(platform, 'POST', '/v1/operator/updates', {
    token,
    json: { artifact_id: artifactId, target_type: 'all' },
  });
  if (update.status !== 200) throw new Error(`update: ${update.status} ${JSON.stringify(update.body)}`);
  return artifactId;
}

function startStaticServer(platform: BenchPlatform, file: string) {
  const child = spawn(
    process.execPath,
    [
      fileURLToPath(new URL('./static-file-server.js', import.meta.url)),
      join(platform.dataDir, 'tls', 'cert.pem'),
      join(platform.dataDir, 'tls', 'key.pem'),
      file,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const port = new Promise<number>((resolve, reject) => {
    child.stdout!.once('data', (b: Buffer) => resolve(Number(String(b).trim())));
    child.once('exit', (code) => reject(new Error(`static file server exited (${code})`)));
  });
  return { port, pid: () => child.pid!, stop: () => child.kill('SIGTERM') };
}

/** Heartbeats to the platform at `rate` a second from the probe chargers, until stopped; their latencies in ms. */
function startProbe(platform: BenchPlatform, headers: Array<Record<string, string>>, rate: number) {
  const dispatcher = new Agent({ connect: { ca: platform.ca }, connections: 8 });
  const latencies: number[] = [];
  let failures = 0;
  let i = 0;
  const timer = setInterval(() => {
    const h = headers[i++ % headers.length]!;
    const started = performance.now();
    const body = JSON.stringify({ timestamp: new Date().toISOString(), status: 'online', fault_code: 0 });
    request(`${platform.url}/v1/device/heartbeat`, { method: 'POST', headers: h, body, dispatcher })
      .then(async (res) => {
        await res.body.dump();
        if (res.statusCode === 200) latencies.push(performance.now() - started);
        else failures += 1;
      })
      .catch(() => {
        failures += 1;
      });
  }, 1000 / rate);
  return {
    async stop() {
      clearInterval(timer);
      await dispatcher.close();
      return { ...summarize(latencies), failures };
    },
  };
}

const mibPerSecond = (r: DownloadResult) => Math.round((r.bytes / 1024 / 1024 / r.seconds) * 10) / 10;

async function measureOn(platform: BenchPlatform, dir: string, opts: UpdateDownloadOptions, backend: string) {
  const size = opts.sizeMib * 1024 * 1024;
  const content = randomBytes(size);
  const file = join(dir, 'artifact.bin');
  writeFileSync(file, content);
  const sha256 = createHash('sha256').update(content).digest('hex');
  const downloaders = await registerLoadChargers(platform, `SN-UPD-DL-${process.pid}`, opts.chargers);
  const probes = await registerLoadChargers(platform, `SN-UPD-HB-${process.pid}`, 20);
  const artifactId = await artifactForAll(platform, file, size, sha256);
  const bare = startStaticServer(platform, file);
  const bareOrigin = `https://127.0.0.1:${await bare.port}`;
  const sides = {
    bare: { results: [] as DownloadResult[], probe: [] as Array<ReturnType<typeof summarize>> },
    platform: { results: [] as DownloadResult[], probe: [] as Array<ReturnType<typeof summarize>> },
  };
  const rssBefore = sampleProcess(platform.pid).rssMiB;
  let rssMax = rssBefore;
  // The bare server's own growth beside it: what serving these bytes over node:https costs any Node process.
  const bareRssBefore = sampleProcess(bare.pid()).rssMiB;
  let bareRssMax = bareRssBefore;
  const sampler = setInterval(() => {
    rssMax = Math.max(rssMax, sampleProcess(platform.pid).rssMiB);
    bareRssMax = Math.max(bareRssMax, sampleProcess(bare.pid()).rssMiB);
  }, 200);
  try {
    for (let round = 0; round < opts.rounds; round++) {
      const order = round % 2 === 0 ? (['bare', 'platform'] as const) : (['platform', 'bare'] as const);
      for (const side of order) {
        const probe = startProbe(platform, probes, opts.probeRate);
        const jobs = downloaders.map(
          (headers): DownloadJob =>
            side === 'bare'
              ? { path: '/artifact', headers: {} }
              : {
                  path: `/v1/device/artifacts/${artifactId}`,
                  headers: { authorization: headers.authorization! },
                },
        );
        const result = await downloadOnWorker({
          origin: side === 'bare' ? bareOrigin : platform.url,
          ca: platform.ca,
          jobs,
          concurrency: opts.concurrency,
          expectBytes: size,
        });
        sides[side].results.push(result);
        sides[side].probe.push(await probe.stop());
        if (result.short > 0) throw new Error(`${side}: ${result.short} downloads ended short`);
      }
    }
  } finally {
    clearInterval(sampler);
    bare.stop();
  }
  const total = (rs: DownloadResult[]) => ({
    bytes: rs.reduce((a, r) => a + r.bytes, 0),
    seconds: rs.reduce((a, r) => a + r.seconds, 0),
  });
  const bareTotal = total(sides.bare.results);
  const platformTotal = total(sides.platform.results);
  const rate = (t: { bytes: number; seconds: number }) => t.bytes / 1024 / 1024 / t.seconds;
  return {
    backend,
    chargers: opts.chargers,
    size_mib: opts.sizeMib,
    concurrency: opts.concurrency,
    rounds: opts.rounds,
    bare_mib_per_s: sides.bare.results.map(mibPerSecond),
    platform_mib_per_s: sides.platform.results.map(mibPerSecond),
    platform_statuses: sides.platform.results.map((r) => r.statuses),
    ratio: Math.round((rate(platformTotal) / rate(bareTotal)) * 100) / 100,
    platform_rss_before_mib: Math.round(rssBefore),
    platform_rss_growth_mib: Math.round(rssMax - rssBefore),
    bare_rss_growth_mib: Math.round(bareRssMax - bareRssBefore),
    heartbeat_ms_while_bare_serves: sides.bare.probe,
    heartbeat_ms_while_platform_serves: sides.platform.probe,
    bench_process_cpu_percent: sides.platform.results.map((r) =>
      Math.round((100 * r.clientCpuSeconds) / r.seconds),
    ),
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values, texts } = benchArgsOrExit({
    usage: `Usage: npm run bench:updates [-- --chargers 500 --size-mib 50 --concurrency 64 --rounds 2]
  one artifact downloaded by every charger from the platform, beside the same file from a bare node:https server`,
    options: {
      chargers: {
        default: 500,
        integer: true,
        help: 'chargers, each downloading the artifact once per round',
      },
      'size-mib': { default: 50, integer: true, help: 'the artifact size, MiB' },
      concurrency: {
        default: 64,
        integer: true,
        help: 'downloads at once (the platform serves 64 per instance)',
      },
      rounds: { default: 2, integer: true, help: 'rounds, alternating which side goes first' },
      'probe-rate': { default: 20, integer: true, help: 'heartbeats a second to the platform meanwhile' },
    },
    texts: { database: DATABASE_OPTION },
  });
  const figures = await measureUpdateDownloads(
    {
      chargers: values.chargers,
      sizeMib: values['size-mib'],
      concurrency: values.concurrency,
      rounds: values.rounds,
      probeRate: values['probe-rate'],
    },
    { database: texts.database },
  );
  process.stdout.write(`${JSON.stringify(figures, null, 2)}\n`);
}
