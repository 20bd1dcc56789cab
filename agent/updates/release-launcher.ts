/**
 * The launcher of an A/B install: PREFIX/bin/charger-agent (DESIGN.md §19), what the systemd unit runs. Updates
 * never replace it, so it is small and uses Node built-ins only (build-agent.mjs bundles it, with the modules it
 * imports, into one CommonJS file: charger-agent-launcher.cjs).
 *
 * `bin/charger-agent run ARGS`: runs PREFIX/current/charger-agent.mjs with the first `node` on PATH (the
 * launcher's own Node options, args passed through, stdio inherited, SIGTERM/SIGINT forwarded, env
 * CHARGER_AGENT_PREFIX=PREFIX), and:
 * - starts it again when it exits with RESTART_EXIT_CODE (an update was staged) — or after any exit once a
 *   trial has been recorded by the release that ran;
 * - during a trial, counts the new release's exits; the third, or the trial's deadline (the launcher kills the
 *   agent if it still runs then), rolls back: `current` to the old release, the store snapshot over the data
 *   directory's store, the outcome recorded for the old release to report;
 * - before every start, repairs what a power cut left half done (release-trial-files.ts);
 * - otherwise exits with the agent's exit code (systemd decides about restarting).
 * Any other subcommand (status, diag, ...) runs once, passed through.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { realpathSync } from 'node:fs';
import { constants } from 'node:os';
import path from 'node:path';
import { afterExit, msUntilDeadline, type TrialFile } from '../core/release-trial.js';
import {
  currentVersion,
  killPoint,
  PREFIX_ENV,
  type ReleaseLayout,
  trialFile,
  writeJsonAtomic,
} from './release-files.js';
import { dataDirFromArgs, readTrialFile, repairLayout, rollBack } from './release-trial-files.js';

/** How long the agent may take to stop after SIGTERM at a trial's deadline before it is killed. */
const STOP_GRACE_MS = 30_000;
/** Pause before starting a trial's release again after it failed, so a crash at start does not spin. */
const FAILED_START_PAUSE_MS = 1_000;
/** Node timers cannot wait longer (about 24.8 days). */
const MAX_TIMER_MS = 2_147_483_647;

function log(level: 'info' | 'warn' | 'error', msg: string, fields: Record<string, unknown> = {}): void {
  const levels = { info: 30, warn: 40, error: 50 };
  // The agent's log format (pino's JSON lines), so the journal reads as one stream.
  process.stderr.write(
    `${JSON.stringify({ level: levels[level], time: Date.now(), name: 'charger-agent-launcher', msg, ...fields })}\n`,
  );
}

interface Launcher {
  layout: ReleaseLayout;
  child: ChildProcess | undefined;
  stopping: boolean;
}

const exitCodeOf = (code: number | null, signal: NodeJS.Signals | null) =>
  code ?? (signal ? 128 + (constants.signals[signal] ?? 0) : 1);

/** Runs the current release once; resolves with its exit code and whether the deadline ended it. */
function runAgent(
  state: Launcher,
  args: readonly string[],
  trial: TrialFile | undefined,
  logged?: { version: string; trial: boolean },
): Promise<{ code: number; killedAtDeadline: boolean }> {
  const entry = path.join(state.layout.prefix, 'current', 'charger-agent.mjs');
  const child = spawn('node', [...process.execArgv, entry, ...args], {
    stdio: 'inherit',
    env: { ...process.env, [PREFIX_ENV]: state.layout.prefix },
  });
  state.child = child;
  if (logged !== undefined) log('info', 'started the agent', { ...logged, pid: child.pid });
  let killedAtDeadline = false;
  let timer: NodeJS.Timeout | undefined;
  const arm = () => {
    if (trial === undefined) return;
    const wait = msUntilDeadline(trial, Date.now());
    if (wait > 0) {
      timer = setTimeout(arm, Math.min(wait, MAX_TIMER_MS));
      return;
    }
    killedAtDeadline = true;
    log('warn', 'the release in trial did not commit by its deadline: stopping it', { pid: child.pid });
    child.kill('SIGTERM');
    timer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
  };
  arm();
  return new Promise((resolve) => {
    const done = (code: number) => {
      clearTimeout(timer);
      state.child = undefined;
      resolve({ code, killedAtDeadline });
    };
    child.on('error', (error) => {
      log('error', `cannot start the agent: ${error.message}`, { entry });
      done(1);
    });
    child.on('exit', (code, signal) => done(exitCodeOf(code, signal)));
  });
}

function forwardSignals(state: Launcher): void {
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.on(signal, () => {
      state.stopping = true;
      if (state.child === undefined) process.exit(0);
      state.child.kill(signal);
    });
  }
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function supervise(state: Launcher, args: readonly string[]): Promise<number> {
  const { layout } = state;
  const dataDir = dataDirFromArgs(args, process.cwd());
  const warn = (message: string) => log('warn', message);
  for (;;) {
    const repair = repairLayout(layout, dataDir, Date.now(), warn);
    if (repair.kind === 'rolled_forward') log('info', 'resumed the trial a cut interrupted', repair);
    if (repair.kind === 'rolled_back') log('warn', 'rolled back', { ...repair.result.outcome });
    if (state.stopping) return 0;
    const trial = readTrialFile(layout, warn);
    const ranVersion = currentVersion(layout) ?? '';
    const inTrial = trial?.to_version === ranVersion;
    const ran = await runAgent(state, args, inTrial ? trial : undefined, {
      version: ranVersion,
      trial: inTrial,
    });
    const now = Date.now();
    const after = readTrialFile(layout, warn);
    const next = afterExit({
      trial: after,
      ranVersion,
      exitCode: ran.code,
      stopping: state.stopping,
      killedAtDeadline: ran.killedAtDeadline,
      now,
    });
    if (next.action === 'exit') return next.code;
    if (next.action === 'count_failure') {
      writeJsonAtomic(trialFile(layout), next.trial);
      killPoint('launcher-failure-counted');
      log('warn', 'the release in trial exited', {
        version: ranVersion,
        code: ran.code,
        failed_starts: next.trial.failed_starts,
      });
      await pause(FAILED_START_PAUSE_MS);
    } else if (next.action === 'roll_back' && after !== undefined) {
      const result = rollBack(layout, after, next.reason, dataDir, now);
      log('warn', 'rolled back', { ...result.outcome, store_restored: result.storeRestored });
    }
  }
}

async function main(): Promise<void> {
  const script = process.argv[1] ?? '';
  const layout = { prefix: path.resolve(path.dirname(realpathSync(script)), '..') };
  const args = process.argv.slice(2);
  const state: Launcher = { layout, child: undefined, stopping: false };
  forwardSignals(state);
  if (args[0] !== 'run') {
    // status, diag, ...: once, and never any repair (they run beside a running agent).
    const ran = await runAgent(state, args, undefined);
    process.exit(ran.code);
  }
  process.exit(await supervise(state, args));
}

main().catch((error: unknown) => {
  log('error', `launcher failed: ${error instanceof Error ? error.stack : String(error)}`);
  process.exit(1);
});
