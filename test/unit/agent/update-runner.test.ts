import { createHash, generateKeyPairSync, type KeyObject, randomBytes, sign } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type Clock, systemClock } from '../../../agent/clock.js';
import { createPlatformClient, type PlatformClient } from '../../../agent/link/platform-client.js';
import { createSerialRunner } from '../../../agent/runtime/serial-runner.js';
import { type AgentStore, openAgentStore, type UpdateParams } from '../../../agent/store/agent-store.js';
import { artifactFiles } from '../../../agent/updates/artifact-download.js';
import {
  createUpdateRunner,
  type UpdateRunner,
  type UpdateRunnerOptions,
} from '../../../agent/updates/update-runner.js';
import { artifactSigningText } from '../../../shared/artifact-manifest.js';
import type { FirmwareFault } from '../../../simulators/simulated-firmware.js';
import { createSimulatedHal, type SimulatedHal } from '../../../simulators/simulated-hal.js';
import { quietLogger, tempDir, waitFor } from '../../helpers/agent.js';
import { type ArtifactServer, startArtifactServer, staticTokens } from '../../helpers/artifact-server.js';
import { VirtualClock } from '../../helpers/virtual-clock.js';

const oem = generateKeyPairSync('ed25519');
const stranger = generateKeyPairSync('ed25519');
const ev = { capacityKwh: 80, soc: 50, maxChargeKw: 22, maxDischargeKw: 11 };

/** A firmware image and the `update` params the platform would send for it, signed by `key`. */
function firmwareUpdate(
  bytes: Buffer,
  over: Partial<UpdateParams> = {},
  key: KeyObject = oem.privateKey,
): UpdateParams {
  const manifest = {
    kind: 'firmware' as const,
    version: '2.0.0',
    target: '',
    sha256: createHash('sha256').update(bytes).digest('hex'),
    size: bytes.length,
    ...(over as object),
  } as { kind: 'firmware'; version: string; target: string; sha256: string; size: number };
  const signature = sign(null, Buffer.from(artifactSigningText(manifest)), key).toString('base64');
  return {
    update_id: 'upd-1',
    artifact_id: 'art-1',
    install: 'when_idle',
    ...manifest,
    signature,
    ...over,
  } as UpdateParams;
}

describe('update runner (firmware, simulated HAL, HTTPS download)', () => {
  let tmp: ReturnType<typeof tempDir>;
  let server: ArtifactServer;
  let client: PlatformClient;
  let store: AgentStore;
  let hal: SimulatedHal;
  let runner: UpdateRunner | undefined;
  let image: Buffer;

  beforeEach(async () => {
    tmp = tempDir('update-runner-');
    server = await startArtifactServer(tmp.dir);
    client = createPlatformClient({ baseUrl: server.url, ca: server.ca, timeoutMs: 5_000 });
    store = openAgentStore(tmp.dir);
    image = randomBytes(64 * 1024);
    server.serve('art-1', image, createHash('sha256').update(image).digest('hex'));
  });
  afterEach(async () => {
    await runner?.stop();
    runner = undefined;
    store.close();
    await client.close();
    await server.close();
    tmp.remove();
  });

  function start(
    opts: { fault?: FirmwareFault; clock?: Clock; hal?: SimulatedHal } = {},
    extra: Partial<UpdateRunnerOptions> = {},
  ) {
    hal =
      opts.hal ??
      createSimulatedHal({
        connectors: 1,
        seed: 1,
        vehicles: 'manual',
        autoStartCharging: true,
        meanTimeBetweenFaultsMs: Number.POSITIVE_INFINITY,
        firmwareInstallMs: 0,
        ...(opts.fault ? { firmwareFault: opts.fault } : {}),
      });
    const serial = createSerialRunner();
    const api = client.withTokens(staticTokens);
    runner = createUpdateRunner({
      store,
      hal,
      clock: opts.clock ?? systemClock,
      logger: quietLogger(),
      dir: join(tmp.dir, 'updates'),
      keys: [oem.publicKey],
      target: {},
      source: () => (id, r) => api.downloadArtifact(id, r),
      busyConnectors: () =>
        serial.run(async () => {
          const r = await hal.readConnector(1);
          return r.state === 'charging' || r.state === 'discharging' ? [1] : [];
        }),
      schedules: () => [],
      runExclusive: (work) => serial.run(work),
      runningVersion: '0.1.0',
      random: () => 0,
      freeSpace: async () => 1024 ** 3,
      ...extra,
    });
    return runner;
  }

  /** The command in the journal (for `take`, which the executor calls after journaling it). */
  function journal(commandId: string, params: UpdateParams) {
    store.journalInsert(
      { commandId, command: 'update', params, expiry: '2099-01-01T00:00:00Z' },
      new Date().toISOString(),
    );
  }
  const firmwareStates = () =>
    store.outbox.peek(1000, 'firmware_status').map((i) => (i.payload as { status: string }).status);
  const firmwareReports = () =>
    store.outbox.peek(1000, 'firmware_status').map(
      (i) =>
        i.payload as {
          status: string;
          message?: string;
          report_id: string;
          update_id: string;
          version?: string;
        },
    );
  const commandStates = (id = 'cmd-1') =>
    store.outbox
      .peek(1000, 'command_status')
      .map((i) => i.payload as { command_id: string; status: string; reason?: string })
      .filter((p) => p.command_id === id)
      .map((p) => (p.reason ? `${p.status}: ${p.reason}` : p.status));
  const settled = () =>
    waitFor(
      () => store.journalGet('cmd-1')?.status,
      (s) => s === 'succeeded' || s === 'failed' || s === 'rejected',
      10_000,
    );

  it('downloads, verifies, installs and confirms a firmware image: installed, command succeeded', async () => {
    const params = firmwareUpdate(image);
    journal('cmd-1', params);
    start().take('cmd-1', params, false);
    expect(await settled()).toBe('succeeded');
    expect(firmwareStates().filter((s) => s !== 'downloading')).toEqual([
      'download_scheduled',
      'downloaded',
      'signature_verified',
      'installing',
      'install_rebooting',
      'installed',
    ]);
    // Progress: 0 at the start, then rising 10 % steps (as chunks arrive), never per chunk.
    const progress = store.outbox
      .peek(1000, 'firmware_status')
      .map((i) => i.payload as { status: string; progress?: number })
      .filter((p) => p.status === 'downloading')
      .map((p) => p.progress ?? -1);
    expect(progress[0]).toBe(0);
    expect(progress.length).toBeLessThanOrEqual(10);
    for (const [i, p] of progress.entries()) {
      expect(p % 10).toBe(0);
      if (i > 0) expect(p).toBeGreaterThan(progress[i - 1]!);
    }
    const reports = firmwareReports();
    expect(new Set(reports.map((r) => r.report_id)).size).toBe(reports.length);
    expect(reports.every((r) => r.update_id === 'upd-1')).toBe(true);
    expect(reports.at(-1)).toMatchObject({ status: 'installed', version: '2.0.0' });
    expect(commandStates()).toEqual(['accepted', 'succeeded: installed 2.0.0']);
    expect(await hal.firmwareVersion?.()).toBe('2.0.0');
    expect(existsSync(artifactFiles(join(tmp.dir, 'updates'), 'art-1').file)).toBe(false);
  });

  it('reports install_verification_failed when the charger comes back on its old firmware', async () => {
    const params = firmwareUpdate(image);
    journal('cmd-1', params);
    start({ fault: 'verification_fails' }).take('cmd-1', params, false);
    expect(await settled()).toBe('failed');
    expect(firmwareStates().slice(-3)).toEqual([
      'installing',
      'install_rebooting',
      'install_verification_failed',
    ]);
    expect(firmwareReports().at(-1)?.message).toMatch(/runs firmware 1\.0\.0-sim, not 2\.0\.0/);
  });

  it('reports install_failed with the HAL reason when the install throws', async () => {
    const params = firmwareUpdate(image);
    journal('cmd-1', params);
    start({ fault: 'install_fails' }).take('cmd-1', params, false);
    expect(await settled()).toBe('failed');
    expect(firmwareStates().slice(-2)).toEqual(['installing', 'install_failed']);
    expect(commandStates().at(-1)).toMatch(/^failed: simulated fault: firmware 2\.0\.0 failed to install/);
  });

  it('rejects a firmware update on a HAL without installFirmware, before downloading', async () => {
    const params = firmwareUpdate(image);
    journal('cmd-1', params);
    start({ fault: 'no_firmware_capability' }).take('cmd-1', params, false);
    expect(store.journalGet('cmd-1')?.status).toBe('rejected');
    expect(commandStates()[0]).toMatch(/cannot install firmware/);
    expect(firmwareStates()).toEqual([]);
    expect(server.requests).toEqual([]);
  });

  it('rejects a manifest the charger cannot take (no trusted key) at once', async () => {
    const params = firmwareUpdate(image);
    journal('cmd-1', params);
    start({}, { keys: [] }).take('cmd-1', params, false);
    expect(commandStates()).toEqual([expect.stringMatching(/^rejected: this charger trusts no update key/)]);
    expect(server.requests).toEqual([]);
  });

  const tamperings: Array<{
    name: string;
    params: () => UpdateParams;
    serve?: () => Buffer;
    message: RegExp;
  }> = [
    {
      name: 'a tampered file',
      params: () => firmwareUpdate(image),
      serve: () => Buffer.concat([image.subarray(0, 100), Buffer.from('X'), image.subarray(101)]),
      message: /sha256_mismatch/,
    },
    {
      name: 'a manifest signed by an untrusted key',
      params: () => firmwareUpdate(image, {}, stranger.privateKey),
      message: /invalid_signature/,
    },
    {
      name: 'a manifest with the wrong size',
      params: () => firmwareUpdate(image, { size: image.length + 1 }),
      message: /manifest says/,
    },
  ];
  for (const t of tamperings) {
    it(`${t.name}: invalid_signature, file deleted, nothing installed`, async () => {
      if (t.serve) server.serve('art-1', t.serve(), createHash('sha256').update(image).digest('hex'));
      const params = t.params();
      journal('cmd-1', params);
      start().take('cmd-1', params, false);
      expect(await settled()).toBe('failed');
      expect(firmwareStates().at(-1)).toBe('invalid_signature');
      expect(firmwareStates()).not.toContain('installing');
      expect(firmwareReports().at(-1)?.message).toMatch(t.message);
      const files = artifactFiles(join(tmp.dir, 'updates'), 'art-1');
      expect(existsSync(files.file) || existsSync(files.part)).toBe(false);
      expect(await hal.firmwareVersion?.()).toBe('1.0.0-sim');
    });
  }

  it('when_idle: holds install_scheduled while a connector charges and installs once the session ends', async () => {
    const clock = new VirtualClock(Date.parse('2026-01-14T10:00:00Z'));
    const params = firmwareUpdate(image);
    journal('cmd-1', params);
    const r = start({ clock });
    hal.plugIn(1, ev);
    expect((await hal.readConnector(1)).state).toBe('charging');
    r.take('cmd-1', params, false);
    await waitFor(
      () => firmwareStates().at(-1),
      (s) => s === 'install_scheduled',
      10_000,
    );
    // An hour of rechecks later, still charging: still waiting, reported once.
    await clock.advanceTo(clock.now() + 3_600_000);
    expect(firmwareStates().filter((s) => s === 'install_scheduled')).toHaveLength(1);
    expect(firmwareReports().at(-1)?.message).toMatch(/busy: 1/);
    expect(store.journalGet('cmd-1')?.status).toBe('accepted');
    hal.unplug(1);
    r.recheck();
    expect(await settled()).toBe('succeeded');
    expect(firmwareStates().slice(-4)).toEqual([
      'install_scheduled',
      'installing',
      'install_rebooting',
      'installed',
    ]);
  });

  it('resumes after a restart: a verified file waiting for its window is not downloaded again', async () => {
    const clock = new VirtualClock(Date.parse('2026-01-14T10:00:00Z')); // 11:00 in Berlin
    const params = firmwareUpdate(image, {
      window: { start: '02:00', end: '04:00', timezone: 'Europe/Berlin' },
    });
    journal('cmd-1', params);
    start({ clock }).take('cmd-1', params, false);
    await waitFor(
      () => firmwareStates().at(-1),
      (s) => s === 'install_scheduled',
      10_000,
    );
    expect(firmwareReports().at(-1)?.message).toMatch(/opens at 2026-01-15T01:00:00.000Z/);
    await runner?.stop();
    const requests = server.requests.length;
    // The next start: same store, same HAL.
    const again = start({ clock, hal });
    again.resume();
    await clock.advanceTo(Date.parse('2026-01-15T01:00:00Z'));
    expect(await settled()).toBe('succeeded');
    expect(server.requests.length).toBe(requests);
    expect(firmwareStates().filter((s) => s === 'downloaded')).toHaveLength(1);
  });

  it('fails a waiting update when the charger no longer trusts its key after a restart', async () => {
    const clock = new VirtualClock(Date.parse('2026-01-14T10:00:00Z'));
    const params = firmwareUpdate(image, {
      window: { start: '02:00', end: '04:00', timezone: 'Europe/Berlin' },
    });
    journal('cmd-1', params);
    start({ clock }).take('cmd-1', params, false);
    await waitFor(
      () => firmwareStates().at(-1),
      (s) => s === 'install_scheduled',
      10_000,
    );
    await runner?.stop();
    start({ clock, hal }, { keys: [] }).resume();
    expect(await settled()).toBe('failed');
    expect(firmwareStates().at(-1)).toBe('install_failed');
    expect(await hal.firmwareVersion?.()).toBe('1.0.0-sim');
  });

  for (const rebooted of [
    { version: '2.0.0', outcome: 'succeeded', last: 'installed' },
    { version: '1.0.0-sim', outcome: 'failed', last: 'install_verification_failed' },
  ]) {
    it(`confirms at the next start when the reboot ended the agent during the install (${rebooted.last})`, async () => {
      const params = firmwareUpdate(image);
      journal('cmd-1', params);
      // An install that never returns: the charger reboots under the agent.
      const installing = createSimulatedHal({
        connectors: 1,
        seed: 1,
        vehicles: 'manual',
        firmwareInstallMs: 3_600_000,
      });
      start({ hal: installing }).take('cmd-1', params, false);
      await waitFor(
        () => firmwareStates().at(-1),
        (s) => s === 'installing',
        10_000,
      );
      runner = undefined; // gone with the reboot
      const after = createSimulatedHal({
        connectors: 1,
        seed: 1,
        vehicles: 'manual',
        initialFirmwareVersion: rebooted.version,
      });
      start({ hal: after }).resume();
      expect(await settled()).toBe(rebooted.outcome);
      expect(firmwareStates().slice(-2)).toEqual(['installing', rebooted.last]);
      expect(firmwareStates().filter((s) => s === 'installing')).toHaveLength(1);
    });
  }
});
