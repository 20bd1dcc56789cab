/**
 * Agent releases for the simulated fleet (`charger-sim fleet --agent-releases`, DESIGN.md §19). Each charger
 * gets a real A/B layout (DATA/SN/releases/) and the agent's real release layer: an agent update is downloaded,
 * checked, unpacked, its store snapshotted and its trial recorded exactly as on a charger. What the launcher
 * (agent/updates/release-launcher.ts) does between two runs of the agent is done here, with its own rules
 * (core/release-trial.ts, release-trial-files.ts): repair before each start, failed starts counted, the rollback
 * after the third or at the trial's deadline, the store restored from its snapshot.
 *
 * The one thing simulated: the agent keeps running in this process, as the version it switched to. The release's
 * own code runs only as its start check — `node RELEASE/charger-agent.mjs --version` must exit 0 and print the
 * release's version within START_CHECK_MS — so a bundle that fails at start fails here too, and is rolled back.
 * The check's answer is kept per release (its version and the sha256 of its entry) for this thread: a batch of
 * a hundred chargers does not start a hundred Node processes on the simulator's cores for the same answer.
 * (A release that starts and then never reaches the platform cannot be told apart in-process: the fleet's agent
 * always reaches it. test/integration/ota-fleet.test.ts covers that case with real agent processes.)
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import { afterExit, msUntilDeadline, RESTART_EXIT_CODE } from '../../agent/core/release-trial.js';
import {
  currentVersion,
  PREFIX_ENV,
  pointCurrentAt,
  type ReleaseLayout,
  releaseDir,
  trialFile,
  writeFileAtomic,
  writeJsonAtomic,
} from '../../agent/updates/release-files.js';
import { hostTarget } from '../../agent/updates/release-install.js';
import { readTrialFile, repairLayout, rollBack } from '../../agent/updates/release-trial-files.js';
import { agentUpdatesFromEnv } from '../../agent/updates/release-wiring.js';
import type { AgentUpdateOptions } from '../../agent/updates/update-wiring.js';
import { SUPPORTED_NODE_LINES } from '../../shared/node-support.js';

/** How long a release's start check may take (a Node start and the bundle's load: well under a second). */
export const START_CHECK_MS = 15_000;
/** Start checks at once across the fleet: each is a Node process; a batch of 100 must not start 100 together. */
const START_CHECKS_AT_ONCE = 4;
/** The exit code a start check killed at START_CHECK_MS counts as (a SIGKILL). */
const TIMED_OUT = 137;
/** As the launcher: a pause after a failed start, so that a crash at start does not spin. */
const FAILED_START_PAUSE_MS = 1_000;

export interface ChargerReleases {
  readonly layout: ReleaseLayout;
  /** `startAgent`'s `updates`: the real release layer on this layout, `restart` the fleet's restart. */
  updates(restart: () => void): AgentUpdateOptions;
  /**
   * What the launcher does before a start: repairs, and for a release in trial its start check (failures counted,
   * the third rolls back). Resolves with the version to run and, in trial, when its deadline falls.
   */
  prepareStart(): Promise<{ version: string; deadlineAt?: number }>;
  /** Whether `version` is a release in trial that has not committed yet. */
  inTrial(version: string): boolean;
  /** What the launcher does after the agent ended: `restart` it asked to be restarted; else it was stopped at its trial's deadline. */
  afterRun(version: string, how: 'restart' | 'deadline'): void;
}

export interface ChargerReleasesOptions {
  /** The charger's A/B prefix. */
  prefix: string;
  /** The agent's data directory (its store is restored there on a rollback). */
  dataDir: string;
  /** The release a new layout starts with (what the fleet's code reports: AGENT_VERSION). */
  initialVersion: string;
  logger: Logger;
  now?: () => number;
}

export function createChargerReleases(options: ChargerReleasesOptions): ChargerReleases {
  const layout: ReleaseLayout = { prefix: path.resolve(options.prefix) };
  const { dataDir, logger } = options;
  const now = options.now ?? Date.now;
  const warn = (message: string) => logger.warn({ prefix: layout.prefix }, message);
  if (currentVersion(layout) === undefined) installInitial(layout, options.initialVersion);

  function rollBackNow(reason: string): void {
    const trial = readTrialFile(layout, warn);
    if (!trial) return;
    const result = rollBack(layout, trial, reason, dataDir, now());
    logger.warn({ ...result.outcome, store_restored: result.storeRestored }, 'rolled back');
  }

  return {
    layout,
    updates(restart) {
      const updates = agentUpdatesFromEnv(restart, { [PREFIX_ENV]: layout.prefix });
      if (!updates) throw new Error(`no A/B layout at ${layout.prefix}`);
      return updates;
    },
    async prepareStart() {
      for (;;) {
        const repair = repairLayout(layout, dataDir, now(), warn);
        if (repair.kind === 'rolled_back') logger.warn({ ...repair.result.outcome }, 'rolled back');
        const version = currentVersion(layout) ?? options.initialVersion;
        const trial = readTrialFile(layout, warn);
        if (trial?.to_version !== version) return { version };
        const check = await startCheck(releaseDir(layout, version), version);
        const deadlineAt = now() + msUntilDeadline(trial, now());
        if (check.ok) return { version, deadlineAt };
        logger.warn({ version, reason: check.reason }, 'the release in trial failed its start');
        const next = afterExit({
          trial,
          ranVersion: version,
          exitCode: check.code,
          stopping: false,
          now: now(),
        });
        if (next.action === 'count_failure') {
          writeJsonAtomic(trialFile(layout), next.trial);
          await new Promise((resolve) => setTimeout(resolve, FAILED_START_PAUSE_MS));
        } else if (next.action === 'roll_back') rollBackNow(next.reason);
      }
    },
    inTrial: (version) => readTrialFile(layout)?.to_version === version,
    afterRun(version, how) {
      const trial = readTrialFile(layout, warn);
      const next = afterExit({
        trial,
        ranVersion: version,
        exitCode: how === 'restart' ? RESTART_EXIT_CODE : 1,
        stopping: false,
        killedAtDeadline: how === 'deadline',
        now: now(),
      });
      if (next.action === 'roll_back') rollBackNow(next.reason);
      else if (next.action === 'count_failure') writeJsonAtomic(trialFile(layout), next.trial);
    },
  };
}

/**
 * The first release of a simulated charger: the package.json of a bundle built for this machine (what the real
 * release layer reads for a new bundle's target check), without code — the fleet's agent is this process's.
 */
function installInitial(layout: ReleaseLayout, version: string): void {
  const dir = releaseDir(layout, version);
  mkdirSync(dir, { recursive: true });
  const manifest = {
    name: 'charger-agent',
    version,
    type: 'module',
    chargerAgent: { nodeLines: SUPPORTED_NODE_LINES, target: hostTarget() },
  };
  writeFileAtomic(path.join(dir, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  pointCurrentAt(layout, version);
}

type StartCheck = { ok: true } | { ok: false; code: number; reason: string };

let running = 0;
const waiting: Array<() => void> = [];
/** Start checks by release (version and sha256 of its entry): one run answers every charger of the thread. */
const checked = new Map<string, Promise<StartCheck>>();

/** The release's entry run with --version, once per release for this thread, a few at a time. */
function startCheck(release: string, version: string): Promise<StartCheck> {
  const entry = path.join(release, 'charger-agent.mjs');
  let key: string;
  try {
    key = `${version}:${createHash('sha256').update(readFileSync(entry)).digest('hex')}`;
  } catch {
    return Promise.resolve({ ok: false, code: 1, reason: `no ${entry}` });
  }
  let answer = checked.get(key);
  if (!answer) {
    answer = throttled(() => runVersionCheck(release, version));
    checked.set(key, answer);
    // A check that ran out of time says more about the simulator's load than about the release: asked again.
    void answer.then((a) => {
      if (!a.ok && a.code === TIMED_OUT) checked.delete(key);
    });
  }
  return answer;
}

async function throttled(work: () => Promise<StartCheck>): Promise<StartCheck> {
  if (running >= START_CHECKS_AT_ONCE) await new Promise<void>((resolve) => waiting.push(resolve));
  running += 1;
  try {
    return await work();
  } finally {
    running -= 1;
    waiting.shift()?.();
  }
}

function runVersionCheck(release: string, version: string): Promise<StartCheck> {
  const entry = path.join(release, 'charger-agent.mjs');
  if (!existsSync(entry)) return Promise.resolve({ ok: false, code: 1, reason: `no ${entry}` });
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [entry, '--version'], {
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: START_CHECK_MS,
      killSignal: 'SIGKILL',
    });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk;
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      err += chunk;
    });
    child.on('error', (error) => resolve({ ok: false, code: 1, reason: error.message }));
    child.on('close', (code, signal) => {
      if (signal)
        return resolve({ ok: false, code: TIMED_OUT, reason: `killed by ${signal} (no answer in time)` });
      if (code !== 0)
        return resolve({ ok: false, code: code ?? 1, reason: `exit ${code}: ${err.trim().slice(0, 200)}` });
      if (out.trim() !== version)
        return resolve({ ok: false, code: 1, reason: `it says it is ${JSON.stringify(out.trim())}` });
      resolve({ ok: true });
    });
  });
}
