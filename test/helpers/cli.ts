import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { databaseForDataDir, TEST_BACKEND } from './backends.js';

/**
 * Drives the BUILT command-line programs (DESIGN.md §11) as separate processes, the way operators, CI and
 * outside suites use them. Run `npm run build` first: these helpers execute `dist/platform/cli.js`.
 */

export const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const PLATFORM_CLI = join(REPO_ROOT, 'dist', 'platform', 'cli.js');

export interface CliResult {
  /** Exit code; null when the process was ended by a signal. */
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface RunOptions {
  /** Kill the process and fail after this long (default 20 s). */
  timeoutMs?: number;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Defaults to the platform CLI. */
  script?: string;
}

function childEnv(extra?: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  // No colours or pretty printers leaking into captured output.
  return { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0', ...extra };
}

/**
 * In PostgreSQL runs (`TEST_DATABASE=postgres`), a platform command with a data directory also gets
 * `--database` with that directory's own database (`backends.ts`), unless it names one itself.
 */
async function withTestDatabase(args: string[], script: string): Promise<string[]> {
  if (TEST_BACKEND !== 'postgres' || script !== PLATFORM_CLI || args.includes('--database')) return args;
  const i = args.indexOf('--data-dir');
  const dataDir = i >= 0 ? args[i + 1] : undefined;
  if (dataDir === undefined) return args;
  return [...args, '--database', await databaseForDataDir(resolve(REPO_ROOT, dataDir))];
}

/** Runs `node dist/platform/cli.js ...args` to completion and captures everything it printed. */
export async function runCli(args: string[], opts: RunOptions = {}): Promise<CliResult> {
  const timeoutMs = opts.timeoutMs ?? 20_000;
  const script = opts.script ?? PLATFORM_CLI;
  const fullArgs = await withTestDatabase(args, script);
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script, ...fullArgs], {
      cwd: opts.cwd ?? REPO_ROOT,
      env: childEnv(opts.env),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`timed out after ${timeoutMs} ms: cli ${args.join(' ')}\nstderr: ${stderr}`));
    }, timeoutMs);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/** Runs a `--json` command that must succeed and returns its parsed stdout. */
// biome-ignore lint/suspicious/noExplicitAny: callers assert the exact shape
export async function runCliJson(args: string[], opts?: RunOptions): Promise<any> {
  const res = await runCli(args, opts);
  if (res.code !== 0) {
    throw new Error(`cli ${args.join(' ')} exited ${res.code}\nstdout: ${res.stdout}\nstderr: ${res.stderr}`);
  }
  try {
    return JSON.parse(res.stdout);
  } catch {
    throw new Error(`cli ${args.join(' ')} printed no JSON: ${JSON.stringify(res.stdout)}`);
  }
}

export interface ServeProcess {
  env: string;
  url: string;
  port: number;
  certPath: string;
  /** The banner said the certificate was created on this start. */
  certCreated: boolean;
  /** Sandbox only: the printed API client and example device. */
  clientId?: string;
  clientSecret?: string;
  exampleDeviceId?: string;
  /** `http://HOST:PORT/metrics`, when started with a `--metrics-port` other than 0. */
  metricsUrl?: string;
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Settles when the process has exited (by itself or not). */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGTERM, then wait for the exit (SIGKILL after `graceMs`). */
  stop(graceMs?: number): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGKILL without waiting. */
  kill(): void;
}

const BANNER = /charger-platform (\S+) listening on (https:\/\/127\.0\.0\.1:(\d+))/;
const CERT_LINE = /TLS certificate: (.+?)( \(created, self-signed\))?\n/;
const SANDBOX_CLIENT = /client_id:\s+(\S+)\n\s*client_secret:\s+(\S+)\n/;
const SANDBOX_DEVICE = /\/v1\/operator\/devices\/(dev_[A-Za-z0-9_-]+)/;
const METRICS_LINE = /Prometheus metrics on (http:\/\/\S+)\n/;

/**
 * Starts `serve` and resolves once its banner is printed. `--port 0 --log-level warn --metrics-port 0` are added
 * unless `args` name a port, a log level or a metrics port (so that parallel tests do not compete for the metrics
 * listener's default port); in the sandbox `--sim-chargers 0` too, unless `args` name it (a test sees the seeded
 * data alone unless it asks for the simulated fleet). Rejects (with the captured stderr) if the process exits
 * first.
 */
export async function spawnServe(
  args: string[],
  opts: { timeoutMs?: number; env?: NodeJS.ProcessEnv } = {},
): Promise<ServeProcess> {
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const full = await withTestDatabase(['serve', ...args], PLATFORM_CLI);
  if (!args.includes('--port')) full.push('--port', '0');
  if (!args.includes('--log-level')) full.push('--log-level', 'warn');
  if (!args.includes('--metrics-port')) full.push('--metrics-port', '0');
  const sandbox = args.some((a, i) => a === '--env' && args[i + 1] === 'sandbox');
  if (sandbox && !args.includes('--sim-chargers')) full.push('--sim-chargers', '0');
  const metricsPort = full[full.indexOf('--metrics-port') + 1];
  const child = spawn(process.execPath, [PLATFORM_CLI, ...full], {
    cwd: REPO_ROOT,
    env: childEnv(opts.env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
  });
  child.stderr.setEncoding('utf8');

  let exitResult: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on('close', (code, signal) => {
      exitResult = { code, signal };
      resolve(exitResult);
    });
  });

  const stop = async (graceMs = 10_000) => {
    if (exitResult) return exitResult;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    try {
      return await exited;
    } finally {
      clearTimeout(timer);
    }
  };

  return new Promise<ServeProcess>((resolve, reject) => {
    let settled = false;
    const fail = (why: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      child.kill('SIGKILL');
      reject(new Error(`serve ${full.join(' ')}: ${why}\nstderr:\n${stderr}\nstdout:\n${stdout}`));
    };
    const timer = setTimeout(() => fail(`no banner within ${timeoutMs} ms`), timeoutMs);
    const check = () => {
      if (settled) return;
      const banner = BANNER.exec(stderr);
      const cert = CERT_LINE.exec(stderr);
      if (!banner || !cert) return;
      const metrics = METRICS_LINE.exec(stderr);
      if (metricsPort !== '0' && !metrics) return; // the rest of the banner has not arrived yet
      const env = banner[1]!;
      let sandbox: { clientId: string; clientSecret: string; exampleDeviceId: string } | undefined;
      if (env === 'sandbox') {
        const client = SANDBOX_CLIENT.exec(stderr);
        const device = SANDBOX_DEVICE.exec(stderr);
        if (!client || !device) return; // the rest of the banner has not arrived yet
        sandbox = { clientId: client[1]!, clientSecret: client[2]!, exampleDeviceId: device[1]! };
      }
      settled = true;
      clearTimeout(timer);
      resolve({
        env,
        url: banner[2]!,
        port: Number(banner[3]),
        certPath: cert[1]!,
        certCreated: cert[2] !== undefined,
        ...sandbox,
        ...(metrics ? { metricsUrl: metrics[1]! } : {}),
        child,
        stdout: () => stdout,
        stderr: () => stderr,
        exited,
        stop,
        kill: () => {
          if (!exitResult) child.kill('SIGKILL');
        },
      });
    };
    child.stderr.on('data', (chunk: string) => {
      stderr += chunk;
      check();
    });
    child.on('error', (err) => fail(String(err)));
    void exited.then(({ code, signal }) => fail(`exited (code ${code}, signal ${signal}) before its banner`));
  });
}

/** Temporary directories under os.tmpdir(), removed together at the end of a suite. */
export function tempDirs(prefix = 'cp-cli-') {
  const made: string[] = [];
  return {
    async make(): Promise<string> {
      const dir = await mkdtemp(join(tmpdir(), prefix));
      made.push(dir);
      return dir;
    },
    async removeAll(): Promise<void> {
      await Promise.all(made.splice(0).map((d) => rm(d, { recursive: true, force: true })));
    },
  };
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * Calls `probe` until `done` accepts its result or `timeoutMs` passes, and returns the last result either way
 * (so that the caller's assertion shows what was last seen). For changes made by another process, which a
 * running server picks up within about a second.
 */
export async function pollUntil<T>(
  probe: () => Promise<T>,
  done: (value: T) => boolean,
  timeoutMs = 3_000,
  intervalMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (done(value) || Date.now() > deadline) return value;
    await sleep(intervalMs);
  }
}
