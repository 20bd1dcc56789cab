import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  commitTrial,
  listReleases,
  readRollback,
  readTrial,
  stageRelease,
} from '../../agent/updates/releases.js';
import { tempDir, waitFor } from '../helpers/agent.js';
import { buildAgent } from '../helpers/agent-bundle.js';
import { runCli } from '../helpers/cli.js';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import {
  installRelease,
  type LauncherProcess,
  PATH_WITH_THIS_NODE,
  rebuildArchive,
  startLauncher,
} from '../helpers/releases.js';

/**
 * A/B releases end to end with real bundles (DESIGN.md §19): `npm run build:agent` makes 1.0.0 and 1.0.1; 1.0.2
 * is 1.0.1 with an entry that exits 1 at start and 1.0.3 is 1.0.1 renamed (it never commits: the commit
 * conditions are the update runner's, not here). The bundle's own `charger-agent install` lays out 1.0.0,
 * PREFIX/bin/charger-agent runs it against a real platform, and the test stages as the update runner will
 * (stageRelease, the store snapshot by better-sqlite3's backup), then ends the old agent (the update runner
 * exits with the restart code; here SIGTERM, which the launcher treats alike once a trial is recorded):
 * - 1.0.1 runs in trial, `status` shows it, and commits when the test calls commitTrial;
 * - 1.0.2 exits three times: back to 1.0.1 with the store as it was at the snapshot, still registered;
 * - 1.0.3 does not commit within its 3 s: stopped, rolled back the same way.
 */

let tmp: ReturnType<typeof tempDir>;
let tp: TestPlatform;
const bundles: Record<string, { out: string; archive: string }> = {};
let launcher: LauncherProcess | undefined;
let prefix: string;
let data: string;

async function build(version: string): Promise<void> {
  const out = path.join(tmp.dir, `bundle-${version}`);
  const archive = path.join(tmp.dir, `charger-agent-${version}.tar.gz`);
  const built = await buildAgent(['--out', out, '--version', version, '--archive', archive, '--quiet']);
  if (built.code !== 0) throw new Error(`npm run build:agent failed:\n${built.output}`);
  bundles[version] = { out, archive };
}

beforeAll(async () => {
  tmp = tempDir('agent-releases-');
  await build('1.0.0');
  await build('1.0.1');
  const from = bundles['1.0.1']?.out ?? '';
  bundles['1.0.2'] = {
    out: path.join(tmp.dir, 'bundle-1.0.2'),
    archive: path.join(tmp.dir, 'bad-1.0.2.tar.gz'),
  };
  await rebuildArchive({
    from,
    into: bundles['1.0.2'].out,
    archive: bundles['1.0.2'].archive,
    version: '1.0.2',
    entry: "process.stderr.write('1.0.2 fails at start\\n');\nprocess.exit(1);\n",
  });
  bundles['1.0.3'] = {
    out: path.join(tmp.dir, 'bundle-1.0.3'),
    archive: path.join(tmp.dir, 'slow-1.0.3.tar.gz'),
  };
  await rebuildArchive({
    from,
    into: bundles['1.0.3'].out,
    archive: bundles['1.0.3'].archive,
    version: '1.0.3',
  });
  tp = await startTestPlatform();
  prefix = path.join(tmp.dir, 'opt-charger-agent');
  data = path.join(tmp.dir, 'var-lib-charger-agent');
}, 180_000);

afterAll(async () => {
  launcher?.killAll('SIGKILL');
  await tp?.stop();
  tmp?.remove();
});

/** The agent processes the launcher started: [{version, pid, trial}], oldest first. */
const started = () =>
  (launcher?.launcherLines() ?? [])
    .filter((l) => l.msg === 'started the agent')
    .map((l) => ({ version: String(l.version), pid: Number(l.pid), trial: l.trial === true }));

async function waitStarts(n: number, timeoutMs = 30_000) {
  const starts = await waitFor(started, (s) => s.length >= n, timeoutMs);
  if (starts.length < n)
    throw new Error(`expected ${n} starts, saw ${starts.length}:\n${launcher?.output()}`);
  return starts;
}

/** `PREFIX/bin/charger-agent status --json` (the launcher passes it through with its prefix). */
async function status(): Promise<Record<string, unknown> & { releases?: Record<string, unknown> }> {
  const result = await runCli(['status', '--data-dir', data, '--json'], {
    script: path.join(prefix, 'bin', 'charger-agent'),
    env: { PATH: PATH_WITH_THIS_NODE },
  });
  return JSON.parse(result.stdout);
}

/** A heartbeat of a running agent after `since` (ms): not the offline one the stopped agent sent. */
async function heartbeatAfter(deviceId: string, since: number): Promise<boolean> {
  const online = (d: Awaited<ReturnType<TestPlatform['store']['getDevice']>>) =>
    (d?.last_heartbeat_ms ?? 0) > since && d?.reported_status !== 'offline';
  return online(await waitFor(() => tp.store.getDevice(deviceId), online, 20_000));
}

function stage(version: string, healthSeconds: number) {
  const db = new Database(path.join(data, 'agent.sqlite'));
  return stageRelease(
    { prefix },
    {
      archive: bundles[version]?.archive ?? '',
      version,
      snapshot: async (toFile) => {
        await db.backup(toFile);
      },
      trial: { update_id: `upd_${version}`, command_id: `cmd_${version}` },
      healthSeconds,
      now: Date.now(),
    },
  ).finally(() => db.close());
}

/** Ends the running agent the way the update runner's exit would, after staging. */
function endRunningAgent(): void {
  const last = started().at(-1);
  if (last) process.kill(last.pid, 'SIGTERM');
}

function markTheStore(): void {
  const db = new Database(path.join(data, 'agent.sqlite'));
  db.exec('CREATE TABLE written_after_the_snapshot (x)');
  db.close();
}

function storeHasMark(): boolean {
  const db = new Database(path.join(data, 'agent.sqlite'), { readonly: true });
  try {
    return (
      db.prepare("SELECT 1 FROM sqlite_master WHERE name = 'written_after_the_snapshot'").get() !== undefined
    );
  } finally {
    db.close();
  }
}

describe('A/B agent releases with real bundles', () => {
  let deviceId = '';

  it('installs 1.0.0 with the bundle’s own CLI and runs it through the launcher against the platform', async () => {
    const install = await installRelease(
      bundles['1.0.0']?.archive ?? '',
      prefix,
      path.join(bundles['1.0.0']?.out ?? '', 'charger-agent.mjs'),
    );
    expect(install.code, install.stderr).toBe(0);
    const ca = path.join(tmp.dir, 'ca.pem');
    writeFileSync(ca, tp.ca);
    launcher = startLauncher(prefix, [
      'run',
      '--data-dir',
      data,
      '--platform-url',
      tp.url,
      '--ca',
      ca,
      '--sn',
      `AB-${process.pid}`,
      '--hal',
      'simulated',
      '--connectors',
      '1',
    ]);
    const ready = await waitFor(
      () =>
        launcher
          ?.output()
          .split('\n')
          .filter((l) => l.startsWith('{'))
          .map((l) => JSON.parse(l) as { msg?: string; device_id?: string })
          .find((l) => l.msg === 'platform identity ready'),
      (l) => l !== undefined,
      30_000,
    );
    deviceId = ready?.device_id ?? '';
    expect(deviceId, launcher.output()).not.toBe('');
    expect(await heartbeatAfter(deviceId, 0)).toBe(true);
    expect(started()).toEqual([{ version: '1.0.0', pid: expect.any(Number), trial: false }]);
    const report = await status();
    expect(report.releases).toMatchObject({
      prefix,
      current: '1.0.0',
      previous: null,
      trial: null,
      rollback: null,
    });
  });

  it('stages 1.0.1: the launcher starts it in trial, status shows the trial, commitTrial commits it', async () => {
    expect(await stage('1.0.1', 600)).toEqual({ ok: true });
    const restartedAt = Date.now();
    endRunningAgent();
    const starts = await waitStarts(2);
    expect(starts[1]).toMatchObject({ version: '1.0.1', trial: true });
    const inTrial = await waitFor(
      status,
      (r) => (r.agent as { version?: string })?.version === '1.0.1',
      20_000,
    );
    expect(inTrial.releases).toMatchObject({
      current: '1.0.1',
      previous: '1.0.0',
      trial: {
        update_id: 'upd_1.0.1',
        from_version: '1.0.0',
        to_version: '1.0.1',
        failed_starts: 0,
        rolling_back: null,
      },
    });
    const text = await runCli(['status', '--data-dir', data], {
      script: path.join(prefix, 'bin', 'charger-agent'),
      env: { PATH: PATH_WITH_THIS_NODE },
    });
    expect(text.stdout).toMatch(/^Release +1\.0\.1 \(previous 1\.0\.0\) in /m);
    expect(text.stdout).toMatch(/^Trial +1\.0\.0 → 1\.0\.1 \(update upd_1\.0\.1\) since .*failed starts 0$/m);

    await commitTrial({ prefix });
    expect(readTrial({ prefix })).toBeUndefined();
    expect(existsSync(path.join(prefix, 'store-snapshot.sqlite'))).toBe(false);
    expect((await status()).releases).toMatchObject({ current: '1.0.1', previous: '1.0.0', trial: null });
    // The new release heartbeats at start, as the same charger.
    expect(await heartbeatAfter(deviceId, restartedAt)).toBe(true);
  });

  it('1.0.2 exits at start: three starts, then 1.0.1 again with the store restored, still the same charger', async () => {
    expect(await stage('1.0.2', 600)).toEqual({ ok: true });
    markTheStore();
    expect(storeHasMark()).toBe(true);
    const restartedAt = Date.now();
    endRunningAgent();
    const starts = await waitStarts(6);
    expect(starts.slice(2).map((s) => s.version)).toEqual(['1.0.2', '1.0.2', '1.0.2', '1.0.1']);
    expect(readRollback({ prefix })).toMatchObject({
      update_id: 'upd_1.0.2',
      from_version: '1.0.1',
      to_version: '1.0.2',
      reason: 'exited 3 times before it committed (last exit code 1)',
    });
    expect(storeHasMark()).toBe(false);
    expect(await heartbeatAfter(deviceId, restartedAt)).toBe(true);
    expect(listReleases({ prefix })).toEqual([
      { version: '1.0.0', current: false },
      { version: '1.0.1', current: true },
    ]);
    const report = await status();
    expect(report.releases).toMatchObject({
      current: '1.0.1',
      rollback: { to_version: '1.0.2', reason: expect.stringMatching(/^exited 3 times/) },
    });
  });

  it('1.0.3 never commits: stopped at its 3 s deadline and rolled back to 1.0.1', async () => {
    expect(await stage('1.0.3', 3)).toEqual({ ok: true });
    markTheStore();
    const restartedAt = Date.now();
    endRunningAgent();
    const starts = await waitStarts(8, 45_000);
    expect(starts.slice(6).map((s) => s.version)).toEqual(['1.0.3', '1.0.1']);
    expect(readRollback({ prefix })).toMatchObject({
      to_version: '1.0.3',
      reason: 'did not commit within 3 s',
    });
    expect(storeHasMark()).toBe(false);
    expect(await heartbeatAfter(deviceId, restartedAt)).toBe(true);
  });

  it('stops cleanly on SIGTERM (forwarded to the agent)', async () => {
    launcher?.child.kill('SIGTERM');
    expect(await launcher?.exited).toEqual({ code: 0, signal: null });
    expect((await tp.store.getDevice(deviceId))?.reported_status).toBe('offline');
  });
});
