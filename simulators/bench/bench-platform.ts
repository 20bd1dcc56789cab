import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { appendFileSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Agent, request } from 'undici';

/**
 * A real platform process for benchmarks: `charger-platform serve` on a temporary data directory, driven
 * through its admin CLI and its HTTPS API exactly as an operator would. Benchmarks never import the platform.
 */
const run = promisify(execFile);
const PLATFORM_CLI = fileURLToPath(new URL('../../platform/cli.js', import.meta.url));

export interface BenchPlatform {
  url: string;
  ca: string;
  dataDir: string;
  pid: number;
  dispatcher: Agent;
  /** The platform's Prometheus listener (plain HTTP, on a free loopback port of its own). */
  metricsUrl: string;
  admin(args: string[]): Promise<unknown>;
  /** `charger-platform devices assign` (it prints no JSON). */
  assign(deviceId: string, siteId: string): Promise<void>;
  stop(): Promise<void>;
}

export interface BenchPlatformOptions {
  /** Serve this data directory (created when missing) instead of a new temporary one. */
  dataDir?: string;
  /** Leave the data directory in place when stopping (to serve it again later). */
  keep?: boolean;
  /**
   * The platform's `--database` for `serve` and every admin command: `sqlite` (the default) or a PostgreSQL
   * URL (`bench-database.ts` makes one for the run).
   */
  database?: string;
}

/** `charger-platform serve` on `dataDir` for a benchmark: self-signed, open registration, quiet. */
function serveArgs(dataDir: string, metricsPort: number, extraArgs: readonly string[]): string[] {
  // A sandbox would run its simulated fleet too (DESIGN.md §16): a benchmark measures its own load alone.
  const sandbox = extraArgs.some((a, i) => a === '--env' && extraArgs[i + 1] === 'sandbox');
  const noFleet = sandbox && !extraArgs.includes('--sim-chargers') ? ['--sim-chargers', '0'] : [];
  return [
    PLATFORM_CLI,
    'serve',
    '--data-dir',
    dataDir,
    '--port',
    '0',
    '--self-signed',
    '--registration',
    'open',
    '--log-level',
    'warn',
    '--metrics-port',
    String(metricsPort),
    // A whole fleet registers from this one host: the per-address guard (DESIGN.md §18) is not what is measured.
    '--address-limit',
    '1000000000',
    ...extraArgs,
    ...noFleet,
  ];
}

/** The platform's URL once it says it listens; rejects if it exits first (with its log). */
function listeningUrl(child: ChildProcess): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    let err = '';
    let listening = false;
    // BENCH_PLATFORM_LOG=FILE keeps the platform's whole log there (its warnings and errors), for a failed run.
    const logFile = process.env.BENCH_PLATFORM_LOG;
    if (logFile) child.stdout!.on('data', (chunk: Buffer) => appendFileSync(logFile, chunk));
    child.stderr!.on('data', (chunk: Buffer) => {
      if (logFile) appendFileSync(logFile, chunk);
      err += chunk.toString();
      // Once it listens, only a tail is kept (for an exit message): a long run (the soak) must not grow the
      // benchmark's own memory with the platform's log, nor search all of it again on every chunk.
      if (listening) {
        if (err.length > 65_536) err = err.slice(-32_768);
        return;
      }
      const m = /listening on (https:\/\/\S+)/.exec(err);
      if (m) {
        listening = true;
        resolve(m[1]!);
      }
    });
    child.once('exit', (code) => reject(new Error(`platform exited (${code}): ${err}`)));
  });
}

export async function startBenchPlatform(
  extraArgs: string[] = [],
  options: BenchPlatformOptions = {},
): Promise<BenchPlatform> {
  const dataDir = options.dataDir ?? (await mkdtemp(join(tmpdir(), 'cp-bench-')));
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  // In the environment rather than on the command line: a URL's password stays out of the process list. Set
  // even for SQLite, so that a CHARGER_PLATFORM_DATABASE inherited from the shell never switches a bench over.
  const env = { ...process.env, CHARGER_PLATFORM_DATABASE: options.database ?? 'sqlite' };
  // BENCH_PROFILE_DIR=DIR writes a V8 CPU profile of the platform process there (open it in Chrome DevTools).
  const profile = process.env.BENCH_PROFILE_DIR
    ? ['--cpu-prof', '--cpu-prof-dir', process.env.BENCH_PROFILE_DIR]
    : [];
  // BENCH_PLATFORM_NODE_FLAGS="--flag …" adds Node/V8 flags to the platform process alone (experiments such as
  // the young generation's size), leaving the load generator's process as it is.
  const nodeFlags = process.env.BENCH_PLATFORM_NODE_FLAGS?.split(/\s+/).filter(Boolean) ?? [];
  // Several bench platforms run at once (bench:instances): each gets a metrics port of its own.
  const metricsPort = await freeLoopbackPort();
  const child: ChildProcess = spawn(
    process.execPath,
    [...nodeFlags, ...profile, ...serveArgs(dataDir, metricsPort, extraArgs)],
    {
      stdio: ['ignore', process.env.BENCH_PLATFORM_LOG ? 'pipe' : 'ignore', 'pipe'],
      env,
    },
  );
  const url = await listeningUrl(child);
  const ca = await readFile(join(dataDir, 'tls', 'cert.pem'), 'utf8');
  const dispatcher = new Agent({ connect: { ca }, connections: 256, pipelining: 1 });
  return {
    url,
    ca,
    dataDir,
    pid: child.pid!,
    dispatcher,
    metricsUrl: `http://127.0.0.1:${metricsPort}/metrics`,
    async admin(args) {
      const { stdout } = await run(
        process.execPath,
        [PLATFORM_CLI, ...args, '--data-dir', dataDir, '--json'],
        { env },
      );
      return JSON.parse(stdout) as unknown;
    },
    async assign(deviceId, siteId) {
      await run(
        process.execPath,
        [PLATFORM_CLI, 'devices', 'assign', '--data-dir', dataDir, '--device', deviceId, '--site', siteId],
        { env },
      );
    },
    async stop() {
      await dispatcher.close();
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      const force = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(force);
      if (!options.keep) await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/** One telemetry record of a charger charging at 11 kW: the body the latency benchmarks POST. */
export function chargingTelemetry(timestamp: string) {
  return { timestamp, connector_id: 1, state: 'charging', power: 11, voltage: 230, current: 16, soc: 50 };
}

/** A loopback port nothing listens on right now. */
async function freeLoopbackPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (address === null || typeof address === 'string') throw new Error('no free port');
  return address.port;
}

// biome-ignore lint/suspicious/noExplicitAny: benchmark responses are read field by field
export type Json = any;

export async function call(
  p: BenchPlatform,
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
  path: string,
  opts: { token?: string; json?: unknown } = {},
): Promise<{ status: number; body: Json }> {
  const headers: Record<string, string> = {};
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  if (opts.json !== undefined) headers['content-type'] = 'application/json';
  const res = await request(`${p.url}${path}`, {
    method,
    headers,
    body: opts.json === undefined ? undefined : JSON.stringify(opts.json),
    dispatcher: p.dispatcher,
  });
  const text = await res.body.text();
  return { status: res.statusCode, body: text ? JSON.parse(text) : undefined };
}

/** An operator with a site and a read/write client, through the admin CLI; returns an access token. */
export async function benchTenant(p: BenchPlatform, name: string) {
  const { operator_id } = (await p.admin(['operators', 'create', '--name', name])) as { operator_id: string };
  const { site_id } = (await p.admin([
    'sites',
    'create',
    '--operator',
    operator_id,
    '--name',
    `${name} site`,
  ])) as {
    site_id: string;
  };
  return { operator_id, site_id, client: () => benchClient(p, operator_id) };
}

/** The sandbox operator's id (a platform started with `--env sandbox`). */
export async function sandboxOperatorId(p: BenchPlatform): Promise<string> {
  const operators = (await p.admin(['operators', 'list'])) as Array<{ operator_id: string; name: string }>;
  const sandbox = operators.find((o) => o.name === 'Sandbox Energy');
  if (!sandbox) throw new Error('no sandbox operator');
  return sandbox.operator_id;
}

export async function benchClient(p: BenchPlatform, operatorId: string): Promise<string> {
  const c = (await p.admin(['clients', 'create', '--operator', operatorId, '--scopes', 'read,write'])) as {
    client_id: string;
    client_secret: string;
  };
  const res = await call(p, 'POST', '/v1/operator/oauth/token', {
    json: { client_id: c.client_id, client_secret: c.client_secret, grant_type: 'client_credentials' },
  });
  return res.body.access_token as string;
}

/** Registers a charger, assigns it to `siteId` and returns its device id and token. */
export async function benchDevice(p: BenchPlatform, sn: string, siteId: string) {
  const reg = await call(p, 'POST', '/v1/device/register', {
    json: {
      sn,
      model: 'Bench',
      manufacturer: 'Bench',
      firmware_version: '1',
      connectors: [{ connector_id: 1, max_power_kw: 22, v2g_capable: false }],
    },
  });
  if (reg.status !== 200) throw new Error(`register ${sn}: ${reg.status} ${JSON.stringify(reg.body)}`);
  const { device_id, device_secret } = reg.body.data;
  await p.assign(device_id, siteId);
  const tok = await call(p, 'POST', '/v1/device/token', {
    json: { device_id, device_secret, grant_type: 'client_credentials' },
  });
  return { deviceId: device_id as string, token: tok.body.data.access_token as string };
}

export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i]!;
}

export function summarize(samples: number[]) {
  const s = [...samples].sort((a, b) => a - b);
  const r = (x: number) => Math.round(x * 100) / 100;
  return {
    n: s.length,
    p50: r(percentile(s, 50)),
    p99: r(percentile(s, 99)),
    max: r(s[s.length - 1] ?? Number.NaN),
  };
}
