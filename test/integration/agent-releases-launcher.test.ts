import {
  existsSync,
  lstatSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RESTART_EXIT_CODE } from '../../agent/core/release-trial.js';
import {
  clearRollback,
  commitTrial,
  listReleases,
  readRollback,
  readTrial,
  stageRelease,
} from '../../agent/updates/releases.js';
import { tempDir, waitFor } from '../helpers/agent.js';
import { runCli } from '../helpers/cli.js';
import {
  AGENT_CLI,
  addMarker,
  buildLauncherFile,
  createMarkedStore,
  HOST_TARGET,
  installRelease,
  type LauncherProcess,
  markers,
  standInArchive,
  standInStarts,
  startLauncher,
} from '../helpers/releases.js';

/**
 * The A/B launcher and the staging library with real processes, real files and a real SQLite store, on
 * stand-in releases (a few files whose entry logs its start, then waits or exits 1) so that each case takes
 * about a second: `charger-agent install` (dist/), PREFIX/bin/charger-agent run, stageRelease, commitTrial,
 * the rollback after three exits and at the deadline. agent-releases.test.ts does the same with real bundles
 * against a real platform; agent-releases-kill.test.ts cuts every step.
 */

let tmp: ReturnType<typeof tempDir>;
let launcher: string;
const archives: Record<string, string> = {};
const running: LauncherProcess[] = [];
let seq = 0;

beforeAll(async () => {
  tmp = tempDir('agent-releases-launcher-');
  launcher = await buildLauncherFile(tmp.dir);
  archives.v100 = await standInArchive({ dir: tmp.dir, version: '1.0.0', launcher });
  archives.v101 = await standInArchive({ dir: tmp.dir, version: '1.0.1', launcher });
  archives.v102 = await standInArchive({ dir: tmp.dir, version: '1.0.2', launcher });
  archives.bad = await standInArchive({ dir: tmp.dir, version: '1.0.1', launcher, behaviour: 'exits-1' });
}, 60_000);

afterAll(() => {
  for (const l of running) l.killAll('SIGKILL');
  tmp?.remove();
});

/** A fresh install of 1.0.0 with a store holding the marker `before`. */
async function installed(): Promise<{ prefix: string; data: string; log: string }> {
  seq += 1;
  const prefix = path.join(tmp.dir, `prefix-${seq}`);
  const data = path.join(tmp.dir, `data-${seq}`);
  const result = await installRelease(archives.v100 ?? '', prefix);
  expect(result.code, result.stderr).toBe(0);
  createMarkedStore(data, 'before');
  return { prefix, data, log: path.join(tmp.dir, `starts-${seq}.log`) };
}

function launch(prefix: string, data: string, log: string): LauncherProcess {
  const l = startLauncher(prefix, ['run', '--data-dir', data, '--sn', 'SN-1'], { FAKE_AGENT_LOG: log });
  running.push(l);
  return l;
}

const stage = (prefix: string, data: string, archive: string, version: string, healthSeconds = 60) => {
  const db = new Database(path.join(data, 'agent.sqlite'));
  return stageRelease(
    { prefix },
    {
      archive,
      version,
      snapshot: async (toFile) => {
        await db.backup(toFile);
      },
      trial: { update_id: 'upd_1', command_id: 'cmd_1' },
      healthSeconds,
      now: Date.now(),
    },
  ).finally(() => db.close());
};

const startsOf = async (log: string, n: number) =>
  waitFor(
    () => standInStarts(log),
    (s) => s.length >= n,
    15_000,
  );

describe('charger-agent install', () => {
  it('lays out releases/<version>, current (a symlink) and bin/charger-agent (the launcher, executable)', async () => {
    const { prefix } = await installed();
    expect(readlinkSync(path.join(prefix, 'current'))).toBe(path.join('releases', '1.0.0'));
    expect(lstatSync(path.join(prefix, 'current')).isSymbolicLink()).toBe(true);
    expect(existsSync(path.join(prefix, 'releases', '1.0.0', 'charger-agent.mjs'))).toBe(true);
    const bin = path.join(prefix, 'bin', 'charger-agent');
    expect(statSync(bin).mode & 0o111).not.toBe(0);
    expect(readFileSync(bin, 'utf8')).toMatch(/^#!\/usr\/bin\/env node\n/);
    expect(readFileSync(bin, 'utf8')).toBe(readFileSync(launcher, 'utf8'));
    // Small and dependency-free: it is never updated, so it may need nothing but Node's built-ins.
    const required = [...readFileSync(bin, 'utf8').matchAll(/require\("([^"]+)"\)/g)].map((m) => m[1]);
    expect(required.length).toBeGreaterThan(0);
    expect(required.filter((name) => !name?.startsWith('node:'))).toEqual([]);
    expect(statSync(bin).size).toBeLessThan(32 * 1024);
    expect(listReleases({ prefix })).toEqual([{ version: '1.0.0', current: true }]);
  });

  it('into a prefix with releases: adds the new one and switches; the previous stays, older ones go', async () => {
    const { prefix } = await installed();
    const second = await installRelease(archives.v101 ?? '', prefix);
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout).toContain('installed 1.0.1 as the current release (previous: 1.0.0)');
    const third = await installRelease(archives.v102 ?? '', prefix);
    expect(third.code, third.stderr).toBe(0);
    expect(listReleases({ prefix })).toEqual([
      { version: '1.0.1', current: false },
      { version: '1.0.2', current: true },
    ]);
    const wrongVersion = await runCli(
      ['install', '--bundle', archives.v100 ?? '', '--prefix', prefix, '--version', '1.0.9'],
      { script: AGENT_CLI },
    );
    expect(wrongVersion.code).toBe(1);
    expect(wrongVersion.stderr).toContain('install: the bundle is version 1.0.0, not 1.0.9');
    const again = await installRelease(archives.v102 ?? '', prefix);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('install: 1.0.2 is already installed and current');
  });

  it('refuses an archive with an entry outside the release, a bundle for another machine or Node, and leaves nothing', async () => {
    const prefix = path.join(tmp.dir, 'refusals');
    writeFileSync(path.join(tmp.dir, 'escape.txt'), 'out\n');
    const outside = await standInArchive({
      dir: tmp.dir,
      version: '6.6.6',
      launcher,
      extraEntries: ['../escape.txt'],
    });
    const escaped = await installRelease(outside, prefix);
    expect(escaped.code).toBe(1);
    expect(escaped.stderr).toContain('install: entry "../escape.txt" points outside the release');
    expect(readdirSync(path.join(prefix, 'releases'))).toEqual([]);
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [
        { version: '7.0.0', chargerAgent: { nodeLines: [22, 24], target: { ...HOST_TARGET, arch: 'mips' } } },
        /install: the bundle is built for linux-\w+, not linux-\w+/,
      ],
      [
        { version: '7.0.1', chargerAgent: { nodeLines: [18], target: HOST_TARGET } },
        /supports Node 18, not this/,
      ],
      [{ version: '7.0.2', chargerAgent: {} }, /no Node lines/],
    ];
    for (const [pkg, message] of cases) {
      const archive = await standInArchive({
        dir: tmp.dir,
        version: String(pkg.version),
        launcher,
        packageJson: { name: 'charger-agent', ...pkg },
      });
      const result = await installRelease(archive, prefix);
      expect(result.code).toBe(1);
      expect(result.stderr).toMatch(message);
      expect(readdirSync(path.join(prefix, 'releases'))).toEqual([]);
      expect(existsSync(path.join(prefix, 'current'))).toBe(false);
    }
    const notTar = await runCli(['install', '--bundle', AGENT_CLI, '--prefix', prefix], {
      script: AGENT_CLI,
    });
    expect(notTar.code).toBe(1);
    expect(notTar.stderr).toContain("not a readable gzip'd tar");
    expect(readdirSync(path.join(prefix, 'releases'))).toEqual([]);
  });
});

describe('PREFIX/bin/charger-agent', () => {
  it('passes other subcommands through once, with CHARGER_AGENT_PREFIX set', async () => {
    const { prefix, log } = await installed();
    const l = startLauncher(prefix, ['status', '--data-dir', '/nowhere'], { FAKE_AGENT_LOG: log });
    expect((await l.exited).code).toBe(0);
    expect(l.output()).toContain('stand-in 1.0.0 status --data-dir /nowhere');
    expect(standInStarts(log)).toEqual([
      { version: '1.0.0', pid: expect.any(Number), prefix, args: ['status', '--data-dir', '/nowhere'] },
    ]);
  });

  it(`run: starts the release again on exit code ${RESTART_EXIT_CODE}, forwards SIGTERM and exits with the agent's code`, async () => {
    const { prefix, data, log } = await installed();
    const l = launch(prefix, data, log);
    const [first] = await startsOf(log, 1);
    process.kill(first?.pid ?? 0, 'SIGUSR2');
    const starts = await startsOf(log, 2);
    expect(starts.map((s) => s.version)).toEqual(['1.0.0', '1.0.0']);
    expect(starts[1]?.args).toEqual(['run', '--data-dir', data, '--sn', 'SN-1']);
    l.child.kill('SIGTERM');
    expect(await l.exited).toEqual({ code: 0, signal: null });
  });

  it('run without a trial: an agent that exits 1 ends the launcher with 1 (systemd restarts)', async () => {
    const { prefix, data, log } = await installed();
    await installRelease(archives.bad ?? '', prefix);
    const l = launch(prefix, data, log);
    expect((await l.exited).code).toBe(1);
    expect(standInStarts(log)).toHaveLength(1);
  });
});

describe('a trial', () => {
  it('stages, restarts into the new release, and commits: trial and snapshot gone, the old release kept', async () => {
    const { prefix, data, log } = await installed();
    const l = launch(prefix, data, log);
    const [first] = await startsOf(log, 1);
    expect(await stage(prefix, data, archives.v101 ?? '', '1.0.1')).toEqual({ ok: true });
    expect(readTrial({ prefix })).toMatchObject({
      from_version: '1.0.0',
      to_version: '1.0.1',
      failed_starts: 0,
    });
    expect(existsSync(path.join(prefix, 'store-snapshot.sqlite'))).toBe(true);
    process.kill(first?.pid ?? 0, 'SIGUSR2');
    const starts = await startsOf(log, 2);
    expect(starts[1]?.version).toBe('1.0.1');
    await commitTrial({ prefix });
    expect(readTrial({ prefix })).toBeUndefined();
    expect(existsSync(path.join(prefix, 'store-snapshot.sqlite'))).toBe(false);
    expect(listReleases({ prefix })).toEqual([
      { version: '1.0.0', current: false },
      { version: '1.0.1', current: true },
    ]);
    l.child.kill('SIGTERM');
    expect((await l.exited).code).toBe(0);
    expect(markers(data)).toEqual(['before']);
  });

  it('a release that exits at start: three starts, then back to the old release with the store restored', async () => {
    const { prefix, data, log } = await installed();
    const l = launch(prefix, data, log);
    const [first] = await startsOf(log, 1);
    expect(await stage(prefix, data, archives.bad ?? '', '1.0.1')).toEqual({ ok: true });
    addMarker(data, 'after the snapshot');
    process.kill(first?.pid ?? 0, 'SIGUSR2');
    const starts = await startsOf(log, 5);
    expect(starts.map((s) => s.version)).toEqual(['1.0.0', '1.0.1', '1.0.1', '1.0.1', '1.0.0']);
    expect(markers(data)).toEqual(['before']);
    expect(readTrial({ prefix })).toBeUndefined();
    expect(readRollback({ prefix })).toEqual({
      update_id: 'upd_1',
      command_id: 'cmd_1',
      from_version: '1.0.0',
      to_version: '1.0.1',
      reason: 'exited 3 times before it committed (last exit code 1)',
      rolled_back_at: expect.any(String),
    });
    // The failed release is gone; the snapshot too.
    expect(listReleases({ prefix })).toEqual([{ version: '1.0.0', current: true }]);
    expect(existsSync(path.join(prefix, 'store-snapshot.sqlite'))).toBe(false);
    clearRollback({ prefix });
    expect(readRollback({ prefix })).toBeUndefined();
    l.child.kill('SIGTERM');
    expect((await l.exited).code).toBe(0);
  });

  it('a release that never commits: stopped at the deadline and rolled back', async () => {
    const { prefix, data, log } = await installed();
    const l = launch(prefix, data, log);
    const [first] = await startsOf(log, 1);
    expect(await stage(prefix, data, archives.v101 ?? '', '1.0.1', 2)).toEqual({ ok: true });
    addMarker(data, 'during the trial');
    process.kill(first?.pid ?? 0, 'SIGUSR2');
    const starts = await startsOf(log, 3);
    expect(starts.map((s) => s.version)).toEqual(['1.0.0', '1.0.1', '1.0.0']);
    expect(readRollback({ prefix })?.reason).toBe('did not commit within 2 s');
    expect(markers(data)).toEqual(['before']);
    expect(l.launcherLines().map((line) => line.msg)).toContain(
      'the release in trial did not commit by its deadline: stopping it',
    );
    l.child.kill('SIGTERM');
    expect((await l.exited).code).toBe(0);
  });

  it('the old release crashing after it recorded the trial still starts the new one', async () => {
    const { prefix, data, log } = await installed();
    const l = launch(prefix, data, log);
    const [first] = await startsOf(log, 1);
    expect(await stage(prefix, data, archives.v101 ?? '', '1.0.1')).toEqual({ ok: true });
    process.kill(first?.pid ?? 0, 'SIGKILL');
    const starts = await startsOf(log, 2);
    expect(starts[1]?.version).toBe('1.0.1');
    expect(readTrial({ prefix })?.failed_starts).toBe(0);
    l.child.kill('SIGTERM');
    expect((await l.exited).code).toBe(0);
  });
});

describe('stageRelease refusals leave everything as it was', () => {
  const untouched = (prefix: string) => {
    expect(readdirSync(path.join(prefix, 'releases'))).toEqual(['1.0.0']);
    expect(readlinkSync(path.join(prefix, 'current'))).toBe(path.join('releases', '1.0.0'));
    expect(readdirSync(prefix).sort()).toEqual(['bin', 'current', 'releases']);
  };

  it.each([
    ['a version other than the bundle’s', 'v101', '1.0.2', /the bundle is version 1\.0\.1, not 1\.0\.2/],
    ['the current version', 'v100', '1.0.0', /1\.0\.0 is already the current release/],
    ['not a version', 'v101', '../x', /is not a version/],
  ])('%s', async (_name, key, version, reason) => {
    const { prefix, data } = await installed();
    const result = await stage(prefix, data, archives[key] ?? '', version);
    expect(result).toEqual({ ok: false, reason: expect.stringMatching(reason) });
    untouched(prefix);
  });

  it('a bundle for another target or Node line', async () => {
    const { prefix, data } = await installed();
    for (const [agent, reason] of [
      [{ nodeLines: [22, 24], target: { ...HOST_TARGET, name: 'linux-mips' } }, /built for linux-mips/],
      [{ nodeLines: [20], target: HOST_TARGET }, /supports Node 20/],
    ] as const) {
      const archive = await standInArchive({
        dir: tmp.dir,
        version: '2.0.0',
        launcher,
        packageJson: { name: 'charger-agent', version: '2.0.0', chargerAgent: agent },
      });
      expect(await stage(prefix, data, archive, '2.0.0')).toEqual({
        ok: false,
        reason: expect.stringMatching(reason),
      });
      untouched(prefix);
    }
  });

  it('an archive that is not a tar, and a snapshot that fails for lack of room', async () => {
    const { prefix, data } = await installed();
    expect(await stage(prefix, data, AGENT_CLI, '2.0.0')).toEqual({
      ok: false,
      reason: expect.stringMatching(/^not a readable gzip'd tar/),
    });
    untouched(prefix);
    const full = await stageRelease(
      { prefix },
      {
        archive: archives.v101 ?? '',
        version: '1.0.1',
        snapshot: async () => {
          throw Object.assign(new Error('ENOSPC: no space left on device'), { code: 'ENOSPC' });
        },
        trial: { update_id: 'u', command_id: 'c' },
        healthSeconds: 60,
        now: Date.now(),
      },
    );
    expect(full).toEqual({ ok: false, reason: 'cannot snapshot the store: no room' });
    untouched(prefix);
  });

  it('a second trial while one is under way', async () => {
    const { prefix, data } = await installed();
    expect(await stage(prefix, data, archives.v101 ?? '', '1.0.1')).toEqual({ ok: true });
    expect(await stage(prefix, data, archives.v102 ?? '', '1.0.2')).toEqual({
      ok: false,
      reason: 'a trial of another release is under way',
    });
    expect(readTrial({ prefix })?.to_version).toBe('1.0.1');
    const install = await installRelease(archives.v102 ?? '', prefix);
    expect(install.code).toBe(1);
    expect(install.stderr).toContain('install: a trial is under way: let it commit or roll back first');
  });

  it('outside an A/B install', async () => {
    const result = await stage(
      path.join(tmp.dir, 'no-install'),
      path.join(tmp.dir, 'data-1'),
      archives.v101 ?? '',
      '1.0.1',
    );
    expect(result).toEqual({ ok: false, reason: expect.stringMatching(/is not an A\/B install/) });
  });
});
