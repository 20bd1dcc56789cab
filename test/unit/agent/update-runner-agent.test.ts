import { createHash, generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { copyFileSync, existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type Clock, systemClock } from '../../../agent/clock.js';
import { createPlatformClient, type PlatformClient } from '../../../agent/link/platform-client.js';
import { createSerialRunner } from '../../../agent/runtime/serial-runner.js';
import {
  type AgentStore,
  agentStoreFile,
  openAgentStore,
  type UpdateParams,
} from '../../../agent/store/agent-store.js';
import type { AgentReleases, ReleaseRollback, ReleaseTrial } from '../../../agent/updates/update-install.js';
import { createUpdateRunner, type UpdateRunner } from '../../../agent/updates/update-runner.js';
import { artifactSigningText } from '../../../shared/artifact-manifest.js';
import { createSimulatedHal } from '../../../simulators/simulated-hal.js';
import { quietLogger, tempDir, waitFor } from '../../helpers/agent.js';
import { type ArtifactServer, startArtifactServer, staticTokens } from '../../helpers/artifact-server.js';
import { VirtualClock } from '../../helpers/virtual-clock.js';

const oem = generateKeyPairSync('ed25519');

/**
 * The release layer's records as files, the way the launcher leaves them between starts (the real layer,
 * agent/updates/releases*.ts, is another module's; the runner codes against its own small interface).
 */
function fileReleases(dir: string, stageAnswer: { ok: true } | { ok: false; reason: string } = { ok: true }) {
  const trialFile = join(dir, 'trial.json');
  const rollbackFile = join(dir, 'rollback.json');
  const read = <T>(file: string): T | undefined =>
    existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as T) : undefined;
  const staged: Array<{ archive: string; version: string; archiveExisted: boolean }> = [];
  const snapshotFile = join(dir, 'snapshot.sqlite');
  const releases: AgentReleases = {
    async stage(input) {
      staged.push({
        archive: input.archive,
        version: input.version,
        archiveExisted: existsSync(input.archive),
      });
      if (!stageAnswer.ok) return stageAnswer;
      await input.snapshot(snapshotFile);
      const trial: ReleaseTrial = {
        update_id: input.updateId,
        command_id: input.commandId,
        from_version: '0.1.0',
        to_version: input.version,
        started_at: new Date(input.now).toISOString(),
        deadline_at: new Date(input.now + 600_000).toISOString(),
        failed_starts: 0,
      };
      writeFileSync(trialFile, JSON.stringify(trial));
      return { ok: true };
    },
    readTrial: () => read<ReleaseTrial>(trialFile),
    commitTrial: () => rmSync(trialFile, { force: true }),
    readRollback: () => read<ReleaseRollback>(rollbackFile),
    clearRollback: () => rmSync(rollbackFile, { force: true }),
  };
  /** What the launcher does when the trial fails: current goes back, the outcome is recorded. */
  const rollBack = (reason: string) => {
    const trial = read<ReleaseTrial>(trialFile)!;
    rmSync(trialFile);
    writeFileSync(
      rollbackFile,
      JSON.stringify({ ...trial, reason, rolled_back_at: new Date().toISOString() }),
    );
  };
  return { releases, staged, rollBack, trialFile, rollbackFile, snapshotFile };
}

describe('update runner (agent bundles, A/B releases)', () => {
  let tmp: ReturnType<typeof tempDir>;
  let server: ArtifactServer;
  let client: PlatformClient;
  let store: AgentStore;
  let runner: UpdateRunner | undefined;
  let params: UpdateParams;
  let restarts: number;

  beforeEach(async () => {
    tmp = tempDir('update-agent-');
    server = await startArtifactServer(tmp.dir);
    client = createPlatformClient({ baseUrl: server.url, ca: server.ca, timeoutMs: 5_000 });
    store = openAgentStore(tmp.dir);
    const bundle = randomBytes(32 * 1024);
    const sha256 = createHash('sha256').update(bundle).digest('hex');
    server.serve('art-a', bundle, sha256);
    const manifest = { kind: 'agent' as const, version: '0.2.0', target: '', sha256, size: bundle.length };
    const signature = sign(null, Buffer.from(artifactSigningText(manifest)), oem.privateKey).toString(
      'base64',
    );
    params = { update_id: 'upd-a', artifact_id: 'art-a', install: 'immediate', ...manifest, signature };
    store.journalInsert(
      { commandId: 'cmd-a', command: 'update', params, expiry: '2099-01-01T00:00:00Z' },
      new Date().toISOString(),
    );
    restarts = 0;
  });
  afterEach(async () => {
    await runner?.stop();
    store.close();
    await client.close();
    await server.close();
    tmp.remove();
  });

  function start(
    releases: AgentReleases | undefined,
    runningVersion = '0.1.0',
    healthy = async () => true,
    clock: Clock = systemClock,
  ) {
    const hal = createSimulatedHal({ connectors: 1, seed: 1, vehicles: 'manual' });
    const serial = createSerialRunner();
    const api = client.withTokens(staticTokens);
    runner = createUpdateRunner({
      store,
      hal,
      clock,
      logger: quietLogger(),
      dir: join(tmp.dir, 'updates'),
      keys: [oem.publicKey],
      target: {},
      source: () => (id, r) => api.downloadArtifact(id, r),
      busyConnectors: async () => [],
      schedules: () => [],
      runExclusive: (work) => serial.run(work),
      ...(releases ? { releases } : {}),
      runningVersion,
      healthy,
      requestRestart: () => {
        restarts += 1;
      },
      random: () => 0,
      freeSpace: async () => 1024 ** 3,
    });
    return runner;
  }

  const states = () =>
    store.outbox
      .peek(1000, 'firmware_status')
      .map((i) => i.payload as { status: string; version?: string; message?: string });
  const commandStates = () =>
    store.outbox
      .peek(1000, 'command_status')
      .map((i) => i.payload as { status: string; reason?: string })
      .map((p) => (p.reason ? `${p.status}: ${p.reason}` : p.status));

  it('rejects an agent update when the agent was not installed with charger-agent install', () => {
    start(undefined).take('cmd-a', params, false);
    expect(commandStates()).toEqual([
      expect.stringMatching(/^rejected: .*not installed with charger-agent install/),
    ]);
    expect(server.requests).toEqual([]);
  });

  it('stages the verified bundle, asks for the restart, and leaves the update at installing', async () => {
    const layer = fileReleases(tmp.dir);
    start(layer.releases).take('cmd-a', params, false);
    await waitFor(
      () => restarts,
      (n) => n === 1,
      10_000,
    );
    expect(layer.staged).toMatchObject([{ version: '0.2.0', archiveExisted: true }]);
    expect(states().at(-1)).toMatchObject({ status: 'installing', version: '0.2.0' });
    expect(store.journalGet('cmd-a')?.status).toBe('accepted');
    expect(existsSync(layer.trialFile)).toBe(true);
  });

  it('the new release commits once healthy and reports installed with its version', async () => {
    const layer = fileReleases(tmp.dir);
    start(layer.releases).take('cmd-a', params, false);
    await waitFor(
      () => restarts,
      (n) => n === 1,
      10_000,
    );
    await runner?.stop();
    // The restart: the new release (0.2.0) on the same store; healthy on the second look.
    let looks = 0;
    const clock = new VirtualClock(Date.now());
    start(layer.releases, '0.2.0', async () => ++looks >= 2, clock).resume();
    await waitFor(
      () => looks,
      (n) => n === 1,
      10_000,
    );
    expect(store.journalGet('cmd-a')?.status).toBe('accepted'); // not healthy yet: no commit
    expect(existsSync(layer.trialFile)).toBe(true);
    await clock.advanceTo(clock.now() + 5_000);
    await waitFor(
      () => store.journalGet('cmd-a')?.status,
      (s) => s === 'succeeded',
      15_000,
    );
    expect(existsSync(layer.trialFile)).toBe(false);
    expect(states().at(-1)).toMatchObject({ status: 'installed', version: '0.2.0' });
    expect(looks).toBe(2);
  });

  it('a rolled-back release: the old one reports rolled_back from the outcome, never runs the command again', async () => {
    const layer = fileReleases(tmp.dir);
    start(layer.releases).take('cmd-a', params, false);
    await waitFor(
      () => restarts,
      (n) => n === 1,
      10_000,
    );
    await runner?.stop();
    const requests = server.requests.length;
    // The new release ran meanwhile and wrote to the store; the launcher's rollback throws that away.
    store.recordCommandStatus('cmd-a', [{ status: 'succeeded' }], new Date().toISOString());
    layer.rollBack('the new release exited 3 times');
    store.close();
    copyFileSync(layer.snapshotFile, agentStoreFile(tmp.dir));
    rmSync(`${agentStoreFile(tmp.dir)}-wal`, { force: true });
    rmSync(`${agentStoreFile(tmp.dir)}-shm`, { force: true });
    store = openAgentStore(tmp.dir);
    // The old release again, its store restored from the snapshot: the command is `accepted` in its journal.
    expect(store.journalGet('cmd-a')?.status).toBe('accepted');
    expect(store.updateGet('upd-a')?.phase).toBe('installing');
    const again = start(layer.releases, '0.1.0');
    again.resume();
    again.take('cmd-a', params, true); // what the executor's resumeUnfinished does
    await waitFor(
      () => store.journalGet('cmd-a')?.status,
      (s) => s === 'failed',
      10_000,
    );
    expect(states().at(-1)).toMatchObject({
      status: 'rolled_back',
      version: '0.1.0',
      message: 'the new release exited 3 times',
    });
    expect(commandStates().at(-1)).toBe('failed: the new release exited 3 times');
    expect(existsSync(layer.rollbackFile)).toBe(false);
    expect(server.requests.length).toBe(requests);
    expect(restarts).toBe(1);
  });

  it('a release that cannot be staged: install_failed with the reason, no restart', async () => {
    const layer = fileReleases(tmp.dir, { ok: false, reason: 'needs Node 22, this charger has 20' });
    start(layer.releases).take('cmd-a', params, false);
    await waitFor(
      () => store.journalGet('cmd-a')?.status,
      (s) => s === 'failed',
      10_000,
    );
    expect(states().at(-1)).toMatchObject({
      status: 'install_failed',
      message: 'needs Node 22, this charger has 20',
    });
    expect(restarts).toBe(0);
  });
});
