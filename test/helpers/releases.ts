import { type ChildProcess, spawn } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import * as tar from 'tar';
// @ts-expect-error a build script in plain JavaScript (checked with // @ts-check), without a declaration file
import { buildLauncher } from '../../scripts/agent-launcher.mjs';
import { REPO_ROOT, runCli } from './cli.js';

/**
 * A/B releases in tests (agent/updates/releases.ts): the real launcher, built as build:agent builds it; small
 * stand-in releases whose entry logs its start and waits (or exits 1); `charger-agent install` from dist/;
 * a process that stages or commits (test/helpers/release-harness.mjs, over dist/) so a test can SIGKILL it.
 */

export const AGENT_CLI = path.join(REPO_ROOT, 'dist', 'agent', 'cli.js');
const HARNESS = path.join(REPO_ROOT, 'test', 'helpers', 'release-harness.mjs');
/** The test's own Node first on PATH: the launcher runs "the first node on PATH". */
export const PATH_WITH_THIS_NODE = `${path.dirname(process.execPath)}${path.delimiter}${process.env.PATH ?? ''}`;

/** This machine as build:agent names it (glibc assumed, as on the test machines). */
export const HOST_TARGET = {
  name: `${process.platform}-${process.arch}`,
  platform: process.platform,
  arch: process.arch,
  libc: 'glibc',
};

export async function buildLauncherFile(dir: string): Promise<string> {
  const file = path.join(dir, 'charger-agent-launcher.cjs');
  await buildLauncher(REPO_ROOT, file);
  return file;
}

export type StandInBehaviour = 'waits' | 'exits-1';

/**
 * The entry of a stand-in release: appends {version, pid, prefix, args} to FAKE_AGENT_LOG; `run` then waits
 * (SIGTERM → exit 0, SIGUSR2 → exit with the restart code, as the update runner does) or exits 1 at once.
 */
function standInEntry(version: string, behaviour: StandInBehaviour): string {
  return `import { appendFileSync } from 'node:fs';
const line = { version: ${JSON.stringify(version)}, pid: process.pid, prefix: process.env.CHARGER_AGENT_PREFIX ?? null, args: process.argv.slice(2) };
if (process.env.FAKE_AGENT_LOG) appendFileSync(process.env.FAKE_AGENT_LOG, JSON.stringify(line) + '\\n');
if (process.argv[2] !== 'run') { process.stdout.write('stand-in ' + line.version + ' ' + line.args.join(' ') + '\\n'); process.exit(0); }
if (${JSON.stringify(behaviour)} === 'exits-1') process.exit(1);
process.on('SIGTERM', () => process.exit(0));
process.on('SIGUSR2', () => process.exit(75));
setInterval(() => {}, 60_000);
`;
}

/** A stand-in release archive (a gzip'd tar laid out as build:agent's, with a dozen padding files). */
export async function standInArchive(options: {
  dir: string;
  version: string;
  launcher: string;
  behaviour?: StandInBehaviour;
  packageJson?: Record<string, unknown>;
  extraEntries?: string[];
}): Promise<string> {
  const tree = path.join(options.dir, `tree-${options.version}-${options.behaviour ?? 'waits'}`);
  mkdirSync(path.join(tree, 'agent'), { recursive: true });
  writeFileSync(
    path.join(tree, 'package.json'),
    JSON.stringify(
      options.packageJson ?? {
        name: 'charger-agent',
        version: options.version,
        type: 'module',
        chargerAgent: { nodeLines: [22, 24], target: HOST_TARGET },
      },
    ),
  );
  writeFileSync(
    path.join(tree, 'charger-agent.mjs'),
    standInEntry(options.version, options.behaviour ?? 'waits'),
  );
  cpSync(options.launcher, path.join(tree, 'charger-agent-launcher.cjs'));
  for (let i = 0; i < 12; i += 1) writeFileSync(path.join(tree, 'agent', `part-${i}.txt`), `part ${i}\n`);
  const archive = path.join(
    options.dir,
    `stand-in-${options.version}-${options.behaviour ?? 'waits'}.tar.gz`,
  );
  const entries = ['package.json', 'charger-agent.mjs', 'charger-agent-launcher.cjs', 'agent'];
  // preservePaths: an extra entry may be a hostile `../x`, which tar would otherwise strip.
  const hostile = (options.extraEntries ?? []).length > 0;
  await tar.c({ file: archive, cwd: tree, gzip: true, portable: true, preservePaths: hostile }, [
    ...entries,
    ...(options.extraEntries ?? []),
  ]);
  return archive;
}

/** Re-tars an unpacked bundle with its entry replaced and its version changed (a bad or slow real release). */
export async function rebuildArchive(options: {
  from: string;
  into: string;
  archive: string;
  version: string;
  entry?: string;
}): Promise<void> {
  cpSync(options.from, options.into, { recursive: true });
  const pkgFile = path.join(options.into, 'package.json');
  const pkg = JSON.parse(readFileSync(pkgFile, 'utf8')) as Record<string, unknown>;
  writeFileSync(pkgFile, JSON.stringify({ ...pkg, version: options.version }, null, 2));
  if (options.entry !== undefined) writeFileSync(path.join(options.into, 'charger-agent.mjs'), options.entry);
  await tar.c({ file: options.archive, cwd: options.into, gzip: true, portable: true }, ['.']);
}

export function installRelease(archive: string, prefix: string, script = AGENT_CLI) {
  return runCli(['install', '--bundle', archive, '--prefix', prefix], {
    script,
    env: { PATH: PATH_WITH_THIS_NODE },
  });
}

/**
 * `installRelease` into every prefix, `atOnce` at a time: twenty at once on a loaded 2-core machine took some past
 * the CLI's 20 s each.
 */
export async function installReleases(
  archive: string,
  prefixes: readonly string[],
  atOnce = 4,
): Promise<void> {
  const queue = [...prefixes];
  const worker = async () => {
    for (let prefix = queue.shift(); prefix !== undefined; prefix = queue.shift()) {
      const installed = await installRelease(archive, prefix);
      if (installed.code !== 0) throw new Error(`install into ${prefix}: ${installed.stderr}`);
    }
  };
  await Promise.all(Array.from({ length: atOnce }, worker));
}

export interface LauncherProcess {
  child: ChildProcess;
  output(): string;
  /** The launcher's own JSON log lines. */
  launcherLines(): Array<Record<string, unknown>>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /**
   * Signals the launcher and every agent it started (its process group): killing the launcher alone leaves its
   * agent running on, an orphan, for the rest of the suite.
   */
  killAll(signal: NodeJS.Signals): void;
}

/** PREFIX/bin/charger-agent ARGS, with this Node first on PATH; in a process group of its own (`killAll`). */
export function startLauncher(prefix: string, args: string[], env: NodeJS.ProcessEnv = {}): LauncherProcess {
  const child = spawn(process.execPath, [path.join(prefix, 'bin', 'charger-agent'), ...args], {
    cwd: prefix,
    env: { ...process.env, NO_COLOR: '1', PATH: PATH_WITH_THIS_NODE, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let output = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    output += chunk;
  });
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    output += chunk;
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on('close', (code, signal) => resolve({ code, signal }));
  });
  return {
    child,
    output: () => output,
    launcherLines: () =>
      output
        .split('\n')
        .filter((l) => l.includes('"name":"charger-agent-launcher"'))
        .map((l) => JSON.parse(l) as Record<string, unknown>),
    exited,
    killAll(signal) {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, signal);
      } catch {
        // The group is gone already.
      }
    },
  };
}

/** The stand-ins' start lines (FAKE_AGENT_LOG). */
export function standInStarts(
  log: string,
): Array<{ version: string; pid: number; prefix: string | null; args: string[] }> {
  if (!existsSync(log)) return [];
  return readFileSync(log, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l));
}

/** A store stand-in: DATA/agent.sqlite in WAL mode with a table of markers (what the store held when). */
export function createMarkedStore(dataDir: string, marker: string): void {
  mkdirSync(dataDir, { recursive: true });
  const db = new Database(path.join(dataDir, 'agent.sqlite'));
  db.pragma('journal_mode = WAL');
  db.exec('CREATE TABLE IF NOT EXISTS markers (marker TEXT NOT NULL)');
  db.prepare('INSERT INTO markers VALUES (?)').run(marker);
  db.close();
}

/** Adds a marker: what the store holds after the snapshot (gone again after a rollback). */
export function addMarker(dataDir: string, marker: string): void {
  const db = new Database(path.join(dataDir, 'agent.sqlite'));
  db.prepare('INSERT INTO markers VALUES (?)').run(marker);
  db.close();
}

export function markers(dataDir: string): string[] {
  const db = new Database(path.join(dataDir, 'agent.sqlite'), { readonly: true });
  try {
    return (db.prepare('SELECT marker FROM markers').all() as Array<{ marker: string }>).map((r) => r.marker);
  } finally {
    db.close();
  }
}

export interface HarnessResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** `node release-harness.mjs ARGS` (stage or commit from its own process), optionally SIGKILLed at a step. */
export function runHarness(args: string[], killAt?: string): Promise<HarnessResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [HARNESS, ...args], {
      env: { ...process.env, ...(killAt !== undefined ? { CHARGER_AGENT_TEST_KILL_AT: killAt } : {}) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => {
      stdout += c;
    });
    child.stderr.setEncoding('utf8').on('data', (c: string) => {
      stderr += c;
    });
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}
