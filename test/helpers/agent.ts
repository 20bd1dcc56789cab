import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pino, { type Logger } from 'pino';
import type { Clock } from '../../agent/clock.js';
import type { IncomingCommand } from '../../agent/link/platform-answers.js';
import { REPO_ROOT } from './cli.js';

/** Helpers for the agent's tests: temporary data directories, a quiet logger, commands, a TCP proxy. */

export function tempDir(prefix = 'agent-test-'): { dir: string; remove(): void } {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Logs go nowhere unless AGENT_TEST_LOGS=1 (then to stderr, for debugging a failing test). */
export function quietLogger(): Logger {
  return process.env.AGENT_TEST_LOGS === '1'
    ? pino({ level: 'debug' }, pino.destination(2))
    : pino({ level: 'silent' });
}

/** The real timers, with a wall clock that runs `offset()` ms ahead of the system's. */
export function offsetClock(offset: () => number): Clock {
  return {
    now: () => Date.now() + offset(),
    setTimeout: (callback, ms) => setTimeout(callback, ms),
    clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
  };
}

let commandSeq = 0;
export function command(
  name: string,
  params: Record<string, unknown>,
  expiry: string = new Date(Date.now() + 15 * 60_000).toISOString(),
): IncomingCommand {
  commandSeq += 1;
  return { command_id: `cmd_test_${process.pid}_${commandSeq}`, command: name, params, expiry };
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Polls `probe` until `done` accepts its value or `timeoutMs` passes; returns the last value either way. */
export async function waitFor<T>(
  probe: () => T | Promise<T>,
  done: (value: T) => boolean,
  timeoutMs = 5_000,
  intervalMs = 50,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (done(value) || Date.now() > deadline) return value;
    await sleep(intervalMs);
  }
}

/**
 * A TCP proxy on a fixed loopback port in front of a platform whose port changes when it restarts; `cut()`
 * drops every connection (what the agent sees when the link dies), and with no target the proxy refuses.
 */
export interface TcpProxy {
  port: number;
  setTarget(port: number | undefined): void;
  cut(): void;
  /** Cuts every connection once `bytes` more have gone from the clients to the target (once); resolves then. */
  cutAfter(bytes: number): Promise<void>;
  close(): Promise<void>;
}

export async function startTcpProxy(targetPort: number | undefined): Promise<TcpProxy> {
  let target = targetPort;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    client.on('error', () => client.destroy());
    if (target === undefined) {
      client.destroy();
      return;
    }
    const upstream = net.connect(target, '127.0.0.1');
    sockets.add(upstream);
    upstream.on('close', () => {
      sockets.delete(upstream);
      client.destroy();
    });
    upstream.on('error', () => upstream.destroy());
    client.on('close', () => upstream.destroy());
    client.on('data', (chunk: Buffer) => countUp(chunk.length));
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  const cut = () => {
    for (const s of sockets) s.destroy();
    sockets.clear();
  };
  let armed: { left: number; fired: () => void } | undefined;
  function countUp(n: number): void {
    if (!armed) return;
    armed.left -= n;
    if (armed.left > 0) return;
    const { fired } = armed;
    armed = undefined;
    cut();
    fired();
  }
  return {
    port,
    setTarget(p) {
      target = p;
    },
    cut,
    cutAfter: (bytes) =>
      new Promise<void>((resolve) => {
        armed = { left: bytes, fired: resolve };
      }),
    close() {
      cut();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

export interface AgentRunProcess {
  child: ChildProcess;
  spawnedAt: number;
  stderr(): string;
  /** The JSON log lines the agent wrote to stderr so far. */
  lines(): Array<Record<string, unknown>>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** `charger-agent run ARGS` as a real process of the built CLI; keeps at most `maxStderrChars` of its stderr. */
export function spawnAgentRun(args: string[], opts: { maxStderrChars?: number } = {}): AgentRunProcess {
  const child = spawn(process.execPath, [path.join(REPO_ROOT, 'dist', 'agent', 'cli.js'), 'run', ...args], {
    cwd: REPO_ROOT,
    env: { ...process.env, NO_COLOR: '1' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
    if (opts.maxStderrChars !== undefined && stderr.length > opts.maxStderrChars) {
      stderr = stderr.slice(-opts.maxStderrChars);
    }
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on('close', (code, signal) => resolve({ code, signal }));
  });
  return {
    child,
    spawnedAt: Date.now(),
    stderr: () => stderr,
    lines: () =>
      stderr
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Record<string, unknown>),
    exited,
  };
}
