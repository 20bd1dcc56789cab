import { existsSync, readdirSync, readlinkSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readRollback, readTrial } from '../../agent/updates/releases.js';
import { tempDir, waitFor } from '../helpers/agent.js';
import {
  addMarker,
  buildLauncherFile,
  createMarkedStore,
  installRelease,
  type LauncherProcess,
  markers,
  runHarness,
  standInArchive,
  standInStarts,
  startLauncher,
} from '../helpers/releases.js';

/**
 * Power cuts during A/B releases (DESIGN.md §19): the process doing each step is SIGKILLed there
 * (CHARGER_AGENT_TEST_KILL_AT, agent/updates/release-files.ts) — the staging process (test/helpers/
 * release-harness.mjs over dist/, as the update runner would stage), the launcher while it counts a failure or
 * rolls back, the new release while it commits. Then the launcher starts as after a reboot, and the result is
 * one of two, never anything between: the old release with its store (the marker written after the snapshot
 * gone only when a rollback restored it), or the new release in trial. No half-installed release, no lost store.
 *
 * Stand-in releases (helpers/releases.ts) keep each case near a second; `npx tsc -p tsconfig.build.json` first.
 */

let tmp: ReturnType<typeof tempDir>;
const archives: Record<'v100' | 'v101' | 'bad', string> = { v100: '', v101: '', bad: '' };
const running: LauncherProcess[] = [];
let seq = 0;

beforeAll(async () => {
  tmp = tempDir('agent-releases-kill-');
  const launcher = await buildLauncherFile(tmp.dir);
  archives.v100 = await standInArchive({ dir: tmp.dir, version: '1.0.0', launcher });
  archives.v101 = await standInArchive({ dir: tmp.dir, version: '1.0.1', launcher });
  archives.bad = await standInArchive({ dir: tmp.dir, version: '1.0.1', launcher, behaviour: 'exits-1' });
}, 60_000);

afterAll(() => {
  for (const l of running) l.killAll('SIGKILL');
  tmp?.remove();
});

interface Install {
  prefix: string;
  data: string;
  log: string;
}

async function installed(): Promise<Install> {
  seq += 1;
  const prefix = path.join(tmp.dir, `prefix-${seq}`);
  const data = path.join(tmp.dir, `data-${seq}`);
  const result = await installRelease(archives.v100, prefix);
  expect(result.code, result.stderr).toBe(0);
  createMarkedStore(data, 'before');
  return { prefix, data, log: path.join(tmp.dir, `starts-${seq}.log`) };
}

function launch(i: Install, env: NodeJS.ProcessEnv = {}): LauncherProcess {
  const l = startLauncher(i.prefix, ['run', '--data-dir', i.data], { FAKE_AGENT_LOG: i.log, ...env });
  running.push(l);
  return l;
}

const startsOf = (i: Install, n: number) =>
  waitFor(
    () => standInStarts(i.log),
    (s) => s.length >= n,
    15_000,
  );

/** Starts the launcher as after a reboot, waits for the agent it starts, then stops it; returns that version. */
async function rebootedVersion(i: Install): Promise<string | undefined> {
  const before = standInStarts(i.log).length;
  const l = launch(i);
  const starts = await startsOf(i, before + 1);
  const version = starts[before]?.version;
  l.child.kill('SIGTERM');
  await l.exited;
  return version;
}

/** No half-done work anywhere: no staging or trash directory, no temporary file, no stray snapshot. */
function expectTidy(i: Install): void {
  expect(readdirSync(path.join(i.prefix, 'releases')).filter((e) => e.startsWith('.'))).toEqual([]);
  expect(readdirSync(i.prefix).filter((e) => e.includes('.tmp-'))).toEqual([]);
  expect(readdirSync(i.data).filter((e) => e.includes('.tmp-'))).toEqual([]);
  if (readTrial({ prefix: i.prefix }) === undefined)
    expect(existsSync(path.join(i.prefix, 'store-snapshot.sqlite'))).toBe(false);
}

const currentOf = (i: Install) => path.basename(readlinkSync(path.join(i.prefix, 'current')));

describe('a cut while staging', () => {
  it.each([
    ['stage-unpacking', 'old'],
    ['stage-unpacked', 'old'],
    ['stage-snapshotting', 'old'],
    ['stage-snapshotted', 'old'],
    ['stage-release-placed', 'old'],
    ['stage-trial-recorded', 'new'],
    ['stage-swapped', 'new'],
  ] as const)('at %s: the %s release', async (step, expected) => {
    const i = await installed();
    const stage = await runHarness(['stage', i.prefix, archives.v101, '1.0.1', i.data, '60'], step);
    expect(stage.signal, stage.stderr).toBe('SIGKILL');
    addMarker(i.data, 'after the snapshot');

    const version = await rebootedVersion(i);
    expectTidy(i);
    expect(markers(i.data)).toEqual(['before', 'after the snapshot']);
    if (expected === 'old') {
      expect(version).toBe('1.0.0');
      expect(currentOf(i)).toBe('1.0.0');
      expect(readTrial({ prefix: i.prefix })).toBeUndefined();
      // At most a complete, unused release beside the current one (replaced by the next staging).
      const releases = readdirSync(path.join(i.prefix, 'releases')).sort();
      expect(releases[0]).toBe('1.0.0');
      if (releases.length > 1)
        expect(existsSync(path.join(i.prefix, 'releases', '1.0.1', 'package.json'))).toBe(true);
    } else {
      expect(version).toBe('1.0.1');
      expect(currentOf(i)).toBe('1.0.1');
      expect(readTrial({ prefix: i.prefix })).toMatchObject({ from_version: '1.0.0', to_version: '1.0.1' });
      expect(existsSync(path.join(i.prefix, 'store-snapshot.sqlite'))).toBe(true);
    }
  });
});

describe('a cut while the launcher counts a failure or rolls back', () => {
  it.each([
    'launcher-failure-counted',
    'rollback-decided',
    'rollback-store-half-restored',
    'rollback-store-restored',
    'rollback-swapped',
    'rollback-recorded',
    'rollback-trial-removed',
  ])('at %s: the old release with the store as it was before the trial', async (step) => {
    const i = await installed();
    const stage = await runHarness(['stage', i.prefix, archives.bad, '1.0.1', i.data, '60']);
    expect(stage.code, stage.stderr).toBe(0);
    addMarker(i.data, 'after the snapshot');

    const cut = launch(i, { CHARGER_AGENT_TEST_KILL_AT: step });
    expect((await cut.exited).signal).toBe('SIGKILL');
    const cutStarts = standInStarts(i.log).length;
    const rebooted = launch(i);
    // After the reboot the launcher finishes what the cut interrupted (a counted failure: the remaining starts).
    const starts = await waitFor(
      () => standInStarts(i.log).slice(cutStarts),
      (s) => s.some((start) => start.version === '1.0.0'),
      15_000,
    );
    rebooted.child.kill('SIGTERM');
    await rebooted.exited;
    expect(starts.map((start) => start.version)).toEqual(
      step === 'launcher-failure-counted' ? ['1.0.1', '1.0.1', '1.0.0'] : ['1.0.0'],
    );
    expect(currentOf(i)).toBe('1.0.0');
    expect(readTrial({ prefix: i.prefix })).toBeUndefined();
    expect(markers(i.data)).toEqual(['before']);
    expect(readRollback({ prefix: i.prefix })).toMatchObject({
      from_version: '1.0.0',
      to_version: '1.0.1',
      reason: 'exited 3 times before it committed (last exit code 1)',
    });
    expectTidy(i);
    // The failed release is deleted once the rollback is done; a cut just after leaves it, whole and unused
    // (the next staging of that version replaces it, the next commit deletes it).
    expect(readdirSync(path.join(i.prefix, 'releases')).sort()).toEqual(
      step === 'rollback-trial-removed' ? ['1.0.0', '1.0.1'] : ['1.0.0'],
    );
  });
});

describe('a cut while the new release commits', () => {
  it('after the trial record is removed: the new release, committed; the snapshot tidied at the next start', async () => {
    const i = await installed();
    const stage = await runHarness(['stage', i.prefix, archives.v101, '1.0.1', i.data, '60']);
    expect(stage.code, stage.stderr).toBe(0);
    const commit = await runHarness(['commit', i.prefix], 'commit-trial-removed');
    expect(commit.signal).toBe('SIGKILL');
    expect(existsSync(path.join(i.prefix, 'store-snapshot.sqlite'))).toBe(true);
    addMarker(i.data, 'after the commit');

    expect(await rebootedVersion(i)).toBe('1.0.1');
    expect(readTrial({ prefix: i.prefix })).toBeUndefined();
    expect(markers(i.data)).toEqual(['before', 'after the commit']);
    expectTidy(i);
  });
});

describe('a cut while the new release runs in trial', () => {
  it('the reboot resumes the trial: its deadline still holds, its failed starts still count', async () => {
    const i = await installed();
    const stage = await runHarness(['stage', i.prefix, archives.v101, '1.0.1', i.data, '60']);
    expect(stage.code, stage.stderr).toBe(0);
    const l = launch(i);
    await startsOf(i, 1);
    // The power cut takes launcher and agent at once.
    const agentPid = standInStarts(i.log)[0]?.pid ?? 0;
    l.child.kill('SIGKILL');
    process.kill(agentPid, 'SIGKILL');
    expect(await rebootedVersion(i)).toBe('1.0.1');
    expect(readTrial({ prefix: i.prefix })).toMatchObject({ to_version: '1.0.1', failed_starts: 0 });
  });
});
