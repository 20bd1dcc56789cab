import { generateKeyPairSync, sign } from 'node:crypto';
import { Agent } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AgentRuntime, startAgent } from '../../agent/runtime/agent-runtime.js';
import { artifactSigningText } from '../../shared/artifact-manifest.js';
import { createSimulatedHal } from '../../simulators/simulated-hal.js';
import { quietLogger, tempDir, waitFor } from '../helpers/agent.js';
import { createTenant, startTestPlatform, type TestPlatform } from '../helpers/platform.js';

/**
 * The update runner wired into a real agent (in process, simulated HAL) against a real platform over HTTPS: an
 * `update` command arrives with the heartbeat, the executor hands it to the runner, and its firmware status
 * reports (update_id, report_id) travel through the outbox to the platform's firmware history. The platform's
 * artifact download is not part of this test (its endpoint is built elsewhere): the artifact here is one the
 * platform does not serve to this charger, so the download ends `download_failed` on the 404.
 */

let tp: TestPlatform;
let tenant: Awaited<ReturnType<typeof createTenant>>;
let tmp: ReturnType<typeof tempDir>;
let agent: AgentRuntime;
let deviceId: string;
let dispatcher: Agent;
const oem = generateKeyPairSync('ed25519');

function updateParams(updateId: string, over: { target?: string } = {}) {
  const manifest = {
    kind: 'firmware' as const,
    version: '2.0.0',
    target: over.target ?? '',
    sha256: 'ab'.repeat(32),
    size: 4096,
  };
  const signature = sign(null, Buffer.from(artifactSigningText(manifest)), oem.privateKey).toString('base64');
  return {
    update_id: updateId,
    artifact_id: `art_${updateId}`,
    install: 'when_idle',
    ...manifest,
    signature,
  };
}

async function queueUpdate(params: Record<string, unknown>): Promise<string> {
  const [row] = await tp.store.enqueueCommands(
    [{ device_id: deviceId, command: 'update', params, expiry_ms: tp.now() + 600_000 }],
    tp.now(),
  );
  return row!.command_id;
}

const commandStatus = (commandId: string, want: string) =>
  waitFor(
    () => tp.store.getCommand(commandId),
    (v) => v?.command.status === want,
    15_000,
  );

beforeAll(async () => {
  tp = await startTestPlatform();
  tenant = await createTenant(tp, 'agent-updates');
  tmp = tempDir();
  const hal = createSimulatedHal({ connectors: 1, seed: 3, vehicles: 'manual', firmwareInstallMs: 0 });
  dispatcher = new Agent({ connect: { ca: tp.ca } });
  agent = await startAgent({
    config: {
      dataDir: tmp.dir,
      platformUrl: tp.url,
      sn: `AGENT-UPD-${process.pid}`,
      model: 'UPD-1',
      updateKeys: [oem.publicKey],
    },
    hal,
    logger: quietLogger(),
    dispatcher,
    tuning: {
      heartbeatIntervalMs: 500,
      pollWaitSeconds: 1,
      backoff: { baseMs: 50, capMs: 500 },
      flushPaceMs: 10,
    },
  });
  deviceId = (await agent.registered)!.deviceId;
  await tp.store.assignDevice(deviceId, tenant.siteId);
});

afterAll(async () => {
  await agent?.stop();
  await dispatcher?.close();
  await tp?.stop();
  tmp?.remove();
});

describe('updates through a running agent', () => {
  it('accepts an update, reports its steps to the firmware history, and fails it when the platform has no file', async () => {
    const commandId = await queueUpdate(updateParams('upd_1'));
    const found = await commandStatus(commandId, 'failed');
    expect(found?.command.status).toBe('failed');
    expect(found?.command.reason).toMatch(/no such artifact/);
    type Report = { status: string; update_id?: string; report_id?: string; message?: string };
    const history = async () =>
      (await tp.http.get(`/v1/operator/devices/${deviceId}/firmware`, { token: tenant.token })).body.data
        .items as Report[];
    const items = await waitFor(history, (h) => h.some((r) => r.status === 'download_failed'), 10_000);
    const reports = items.filter((r) => r.update_id === 'upd_1');
    // Newest first.
    expect(reports.map((r) => r.status)).toEqual(['download_failed', 'downloading', 'download_scheduled']);
    expect(new Set(reports.map((r) => r.report_id)).size).toBe(3);
    expect(reports[0]?.message).toMatch(/no such artifact/);
  });

  it('rejects an update built for another hardware model before downloading', async () => {
    const commandId = await queueUpdate(updateParams('upd_2', { target: 'OTHER-9' }));
    const found = await commandStatus(commandId, 'rejected');
    expect(found?.command.reason).toMatch(/built for OTHER-9, not this charger's hardware model \(UPD-1\)/);
  });
});
