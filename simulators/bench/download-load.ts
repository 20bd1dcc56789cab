import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { Agent, request } from 'undici';

/**
 * The downloaders of bench:updates: `jobs` downloads of one file, `concurrency` at a time, each body read to the
 * end and dropped, on a worker thread of their own so that the latency probe on the main thread keeps an event
 * loop of its own. A 429 (the platform's per-instance download limit) waits its Retry-After and tries again.
 */
export interface DownloadJob {
  path: string;
  headers: Record<string, string>;
}

export interface DownloadRun {
  origin: string;
  ca: string;
  jobs: DownloadJob[];
  concurrency: number;
  /** Every download must deliver this many bytes. */
  expectBytes: number;
}

export interface DownloadResult {
  seconds: number;
  bytes: number;
  /** Answers by status, retries included. */
  statuses: Record<string, number>;
  /** Downloads that ended with fewer bytes than expected. */
  short: number;
  /** CPU the downloaders spent (user + system, this thread's process share is not separable: the process's). */
  clientCpuSeconds: number;
}

async function runDownloads(run: DownloadRun): Promise<DownloadResult> {
  const dispatcher = new Agent({ connect: { ca: run.ca }, connections: run.concurrency, pipelining: 1 });
  const statuses: Record<string, number> = {};
  let bytes = 0;
  let short = 0;
  let next = 0;
  const cpuStart = process.cpuUsage();
  const started = performance.now();
  async function one(job: DownloadJob): Promise<void> {
    for (;;) {
      const res = await request(`${run.origin}${job.path}`, { headers: job.headers, dispatcher });
      statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1;
      if (res.statusCode === 429) {
        await res.body.dump();
        await new Promise((r) => setTimeout(r, Number(res.headers['retry-after'] ?? 1) * 1000));
        continue;
      }
      let got = 0;
      for await (const chunk of res.body) got += (chunk as Buffer).length;
      bytes += got;
      if (res.statusCode !== 200 || got !== run.expectBytes) short += 1;
      return;
    }
  }
  async function lane(): Promise<void> {
    while (next < run.jobs.length) await one(run.jobs[next++]!);
  }
  await Promise.all(Array.from({ length: Math.min(run.concurrency, run.jobs.length) }, lane));
  const seconds = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpuStart);
  await dispatcher.close();
  return { seconds, bytes, statuses, short, clientCpuSeconds: (cpu.user + cpu.system) / 1e6 };
}

/** Runs the downloads on a worker thread; resolves with what it measured. */
export function downloadOnWorker(run: DownloadRun): Promise<DownloadResult> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(new URL(import.meta.url), { workerData: run });
    worker.once('message', (result: DownloadResult) => resolve(result));
    worker.once('error', reject);
    worker.once('exit', (code) => {
      if (code !== 0) reject(new Error(`download worker exited with ${code}`));
    });
  });
}

if (!isMainThread && parentPort) {
  const port = parentPort;
  runDownloads(workerData as DownloadRun).then(
    (result) => port.postMessage(result),
    (error: unknown) => {
      throw error;
    },
  );
}
