import { createHash, generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { artifactSigningText } from '../../shared/index.js';
import {
  createTenant,
  expectError,
  registerDevice,
  startTestPlatform,
  type TestPlatform,
} from '../helpers/platform.js';
import { type ScriptedCharger, scriptedCharger } from '../helpers/scripted-charger.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';

/**
 * Updates (campaigns, DESIGN.md §19) over real HTTPS on both backends, with chargers played over the real device
 * API: batches that start only when the previous one is installed and healthy, the automatic pause over the
 * failure threshold, pause, resume and cancel, `update.status_changed` to a real Standard Webhooks receiver,
 * and every refusal. Real agents carry updates out in the agent's own tests.
 */
type Tenant = Awaited<ReturnType<typeof createTenant>>;
let tp: TestPlatform;
let receiver: WebhookReceiver;
let alpha: Tenant;
let bravo: Tenant;
const { privateKey } = generateKeyPairSync('ed25519');
const HEALTH_SECONDS = 60;

async function uploadArtifact(
  tenant: Tenant,
  kind: 'agent' | 'firmware',
  version: string,
  target = '',
): Promise<{ artifact_id: string; sha256: string; size: number; signature: string }> {
  const file = randomBytes(4096);
  const m = {
    kind,
    version,
    target,
    sha256: createHash('sha256').update(file).digest('hex'),
    size: file.length,
  };
  const signature = sign(null, Buffer.from(artifactSigningText(m)), privateKey).toString('base64');
  const query = new URLSearchParams({ kind, version, ...(target ? { target } : {}) });
  const res = await tp.http.post(`/v1/operator/artifacts?${query}`, {
    token: tenant.token,
    raw: file,
    contentType: 'application/octet-stream',
    headers: { 'x-artifact-signature': signature },
  });
  expect(res.status, res.text).toBe(200);
  return res.body.data;
}

/** A fresh site of `tenant` with `n` chargers, each played by the test. */
async function siteWithChargers(tenant: Tenant, n: number, tag: string) {
  const site = await tp.store.createSite({
    operator_id: tenant.operatorId,
    name: tag,
    timezone: 'Europe/Berlin',
  });
  const chargers: ScriptedCharger[] = [];
  for (let i = 0; i < n; i++)
    chargers.push(
      scriptedCharger(tp, await registerDevice(tp, `SN-UPD-${tag}-${i}-${process.pid}`, site.site_id)),
    );
  return { siteId: site.site_id, chargers };
}

const startUpdate = (tenant: Tenant, body: Record<string, unknown>) =>
  tp.http.post('/v1/operator/updates', { token: tenant.token, json: body });
const getUpdate = async (tenant: Tenant, id: string) => {
  const res = await tp.http.get(`/v1/operator/updates/${id}`, { token: tenant.token });
  expect(res.status, res.text).toBe(200);
  return res.body.data;
};
const stateOf = (view: { devices: Array<{ device_id: string; state: string }> }, c: ScriptedCharger) =>
  view.devices.find((d) => d.device_id === c.deviceId)?.state;

/** The charger takes its update command and reports every step to `installed` with `version`. */
async function install(c: ScriptedCharger, updateId: string, version: string): Promise<void> {
  const [command] = (await c.heartbeat()).filter((x) => x.command === 'update');
  expect(command, `no update command for ${c.deviceId}`).toBeDefined();
  await c.command(command!.command_id, 'accepted');
  for (const status of ['downloading', 'downloaded', 'signature_verified', 'installing'])
    await c.firmware(updateId, status);
  await c.firmware(updateId, 'installed', { version });
  await c.command(command!.command_id, 'succeeded');
}

beforeAll(async () => {
  receiver = await startWebhookReceiver();
  tp = await startTestPlatform({ webhooks: { allowPrivate: true, ca: receiver.ca } });
  alpha = await createTenant(tp, 'Alpha Updates');
  bravo = await createTenant(tp, 'Bravo Updates');
  const hook = await tp.http.post('/v1/operator/webhooks', {
    token: alpha.token,
    json: { url: receiver.url, events: ['update.status_changed'] },
  });
  expect(hook.status, hook.text).toBe(200);
  receiver.trust(hook.body.data.secret);
});
afterAll(async () => {
  await tp?.stop();
  await receiver?.close();
});

describe('an agent release rolled out in batches', () => {
  it('starts each batch only once the previous one is installed and healthy, then completes', async () => {
    const { siteId, chargers } = await siteWithChargers(alpha, 4, 'roll');
    const artifact = await uploadArtifact(alpha, 'agent', '2.0.0');
    const res = await startUpdate(alpha, {
      artifact_id: artifact.artifact_id,
      target_type: 'site',
      target_ids: [siteId],
      rollout: { batch_size: 2, health_seconds: HEALTH_SECONDS },
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toEqual({
      update_id: expect.stringMatching(/^upd_/),
      status: 'running',
      device_count: 4,
    });
    const updateId: string = res.body.data.update_id;

    let view = await getUpdate(alpha, updateId);
    expect(view.batches).toEqual([
      { index: 1, status: 'running', device_count: 2 },
      { index: 2, status: 'pending', device_count: 2 },
    ]);
    expect(view.artifact).toEqual({ artifact_id: artifact.artifact_id, kind: 'agent', version: '2.0.0' });
    const first = chargers.filter(
      (c) =>
        view.devices.find((d: { device_id: string; batch: number }) => d.device_id === c.deviceId)?.batch ===
        1,
    );
    const second = chargers.filter((c) => !first.includes(c));
    expect(first.map((c) => stateOf(view, c))).toEqual(['queued', 'queued']);
    expect(second.map((c) => stateOf(view, c))).toEqual(['pending', 'pending']);

    // The command carries the signed manifest; the second batch has nothing yet.
    const [command] = await first[0]!.heartbeat();
    expect(command).toMatchObject({
      command: 'update',
      params: {
        update_id: updateId,
        artifact_id: artifact.artifact_id,
        kind: 'agent',
        version: '2.0.0',
        target: '',
        sha256: artifact.sha256,
        size: artifact.size,
        signature: artifact.signature,
        install: 'when_idle',
        health_seconds: HEALTH_SECONDS,
      },
    });
    expect(await second[0]!.heartbeat()).toEqual([]);

    for (const c of first) await install(c, updateId, '2.0.0');
    await tp.platform.sweep();
    view = await getUpdate(alpha, updateId);
    expect(first.map((c) => stateOf(view, c))).toEqual(['installed', 'installed']);
    // Installed is not healthy yet: the second batch waits out the health time.
    expect(second.map((c) => stateOf(view, c))).toEqual(['pending', 'pending']);

    tp.advance(HEALTH_SECONDS * 1000);
    for (const c of first) await c.heartbeat();
    await tp.platform.sweep();
    view = await getUpdate(alpha, updateId);
    expect(first.map((c) => stateOf(view, c))).toEqual(['succeeded', 'succeeded']);
    expect(view.batches.map((b: { status: string }) => b.status)).toEqual(['completed', 'running']);
    expect(view.devices.find((d: { device_id: string }) => d.device_id === first[0]!.deviceId)).toMatchObject(
      {
        version_after: '2.0.0',
      },
    );
    // The inventory follows the charger's report.
    const device = await tp.http.get(`/v1/operator/devices/${first[0]!.deviceId}`, { token: alpha.token });
    expect(device.body.data.agent_version).toBe('2.0.0');

    for (const c of second) await install(c, updateId, '2.0.0');
    await tp.platform.sweep();
    tp.advance(HEALTH_SECONDS * 1000);
    for (const c of second) await c.heartbeat();
    await tp.platform.sweep();
    view = await getUpdate(alpha, updateId);
    expect(view.status).toBe('completed');
    expect(view.progress).toEqual({ succeeded: 4 });

    await tp.platform.webhooks.deliverDue();
    const told = receiver.received
      .filter((d) => d.verifiedWith.length > 0 && d.event?.data?.update_id === updateId)
      .map((d) => d.event.data.status);
    expect(told).toEqual(['running', 'completed']);
  });

  it('skips chargers already on the version: with none left, the update completes at once', async () => {
    const { siteId } = await siteWithChargers(alpha, 2, 'skip');
    // registerDevice reports firmware 1.0.0.
    const artifact = await uploadArtifact(alpha, 'firmware', '1.0.0');
    const res = await startUpdate(alpha, {
      artifact_id: artifact.artifact_id,
      target_type: 'site',
      target_ids: [siteId],
    });
    expect(res.status, res.text).toBe(200);
    const view = await getUpdate(alpha, res.body.data.update_id);
    expect(view.status).toBe('completed');
    expect(view.progress).toEqual({ skipped: 2 });
    expect(view.devices[0]).toMatchObject({ batch: 0, state: 'skipped', version_before: '1.0.0' });
  });
});

describe('failures', () => {
  it('pause the update over max_failure_percent before the next batch, and resume goes past that batch', async () => {
    const { siteId, chargers } = await siteWithChargers(alpha, 4, 'fail');
    const artifact = await uploadArtifact(alpha, 'agent', '3.0.0');
    const res = await startUpdate(alpha, {
      artifact_id: artifact.artifact_id,
      target_type: 'site',
      target_ids: [siteId],
      rollout: { batch_size: 2, health_seconds: HEALTH_SECONDS, max_failure_percent: 20 },
    });
    const updateId: string = res.body.data.update_id;
    let view = await getUpdate(alpha, updateId);
    const [bad, good] = chargers.filter(
      (c) =>
        view.devices.find((d: { device_id: string; batch: number }) => d.device_id === c.deviceId)?.batch ===
        1,
    );
    const [command] = await bad!.heartbeat();
    await bad!.command(command!.command_id, 'accepted');
    await bad!.firmware(updateId, 'rolled_back', { version: '1.0.0', message: 'exited 3 times at start' });
    await bad!.command(command!.command_id, 'failed', 'rolled back');
    await tp.platform.sweep();
    view = await getUpdate(alpha, updateId);
    expect(view.status).toBe('paused');
    expect(view.reason).toBe('batch 1 of 2: 1 of 2 chargers failed (more than max_failure_percent 20)');
    expect(stateOf(view, bad!)).toBe('rolled_back');
    expect(view.devices.find((d: { device_id: string }) => d.device_id === bad!.deviceId).reason).toBe(
      'rolled back: exited 3 times at start',
    );
    expect(view.batches.map((b: { status: string }) => b.status)).toEqual(['failed', 'pending']);

    // Resumed: the failed batch no longer holds it, but the next starts only once this one is done.
    const resumed = await tp.http.post(`/v1/operator/updates/${updateId}/resume`, { token: alpha.token });
    expect(resumed.status, resumed.text).toBe(200);
    expect(resumed.body.data.status).toBe('running');
    await install(good!, updateId, '3.0.0');
    await tp.platform.sweep();
    // An error event during the health check fails the charger.
    await good!.errorEvent();
    tp.advance(HEALTH_SECONDS * 1000);
    await good!.heartbeat();
    await tp.platform.sweep();
    view = await getUpdate(alpha, updateId);
    expect(stateOf(view, good!)).toBe('failed');
    expect(view.status).toBe('running');
    expect(view.batches.map((b: { status: string }) => b.status)).toEqual(['failed', 'running']);

    // Operator's pause and cancel: queued commands cancelled, nothing more sent.
    const paused = await tp.http.post(`/v1/operator/updates/${updateId}/pause`, { token: alpha.token });
    expect(paused.body.data).toMatchObject({ status: 'paused', reason: 'paused by the operator' });
    expectError(
      await tp.http.post(`/v1/operator/updates/${updateId}/pause`, { token: alpha.token }),
      409,
      4001,
    );
    const deleteArtifact = await tp.http.delete(`/v1/operator/artifacts/${artifact.artifact_id}`, {
      token: alpha.token,
    });
    expectError(deleteArtifact, 409, 4001);
    const cancelled = await tp.http.delete(`/v1/operator/updates/${updateId}`, { token: alpha.token });
    expect(cancelled.status, cancelled.text).toBe(200);
    expect(cancelled.body.data.status).toBe('cancelled');
    const waiting = view.devices.filter((d: { batch: number }) => d.batch === 2);
    for (const d of waiting)
      expect(stateOf(cancelled.body.data, { deviceId: d.device_id } as ScriptedCharger)).toBe('cancelled');
    for (const c of chargers.filter((x) => x !== bad && x !== good)) {
      expect((await c.heartbeat()).filter((x) => x.command === 'update')).toEqual([]);
    }
    expectError(await tp.http.delete(`/v1/operator/updates/${updateId}`, { token: alpha.token }), 409, 4001);
    expectError(
      await tp.http.post(`/v1/operator/updates/${updateId}/resume`, { token: alpha.token }),
      409,
      4001,
    );
    // No longer in use: the artifact may go.
    const gone = await tp.http.delete(`/v1/operator/artifacts/${artifact.artifact_id}`, {
      token: alpha.token,
    });
    expect(gone.status, gone.text).toBe(200);
    // The update still reads, its artifact named.
    expect((await getUpdate(alpha, updateId)).artifact.version).toBe('3.0.0');
  });
});

describe('refusals and tenancy', () => {
  it('answers another tenant’s update, artifact, site and charger like missing ones', async () => {
    const { siteId, chargers } = await siteWithChargers(alpha, 1, 'tenancy');
    const other = await siteWithChargers(bravo, 1, 'tenancy-b');
    const artifact = await uploadArtifact(alpha, 'agent', '4.0.0');
    const res = await startUpdate(alpha, {
      artifact_id: artifact.artifact_id,
      target_type: 'site',
      target_ids: [siteId],
    });
    const updateId: string = res.body.data.update_id;
    expectError(await tp.http.get(`/v1/operator/updates/${updateId}`, { token: bravo.token }), 404, 3001);
    expectError(
      await tp.http.post(`/v1/operator/updates/${updateId}/pause`, { token: bravo.token }),
      404,
      3001,
    );
    expectError(await tp.http.delete(`/v1/operator/updates/${updateId}`, { token: bravo.token }), 404, 3001);
    const listed = await tp.http.get('/v1/operator/updates', { token: bravo.token });
    expect(listed.body.data.items.map((u: { update_id: string }) => u.update_id)).not.toContain(updateId);
    const mine = await tp.http.get('/v1/operator/updates?status=running', { token: alpha.token });
    expect(mine.body.data.items.find((u: { update_id: string }) => u.update_id === updateId)).toMatchObject({
      status: 'running',
      device_count: 1,
      progress: { queued: 1 },
    });
    // Bravo cannot use Alpha's artifact; Alpha cannot reach Bravo's site, operator or charger.
    expectError(
      await startUpdate(bravo, { artifact_id: artifact.artifact_id, target_type: 'all' }),
      404,
      3001,
    );
    const other4 = await uploadArtifact(alpha, 'agent', '4.0.1');
    for (const target of [
      { target_type: 'site', target_ids: [other.siteId] },
      { target_type: 'operator', target_ids: [bravo.operatorId] },
      { target_type: 'device', target_ids: [other.chargers[0]!.deviceId] },
    ]) {
      expectError(await startUpdate(alpha, { artifact_id: other4.artifact_id, ...target }), 404, 3001);
    }
    // One unfinished update per charger.
    const busy = await startUpdate(alpha, {
      artifact_id: other4.artifact_id,
      target_type: 'device',
      target_ids: [chargers[0]!.deviceId],
    });
    expect(expectError(busy, 409, 4001).message).toContain(updateId);
  });

  it('refuses bad requests with the field named', async () => {
    const artifact = await uploadArtifact(alpha, 'firmware', '5.0.0', 'Other-Model');
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ artifact_id: artifact.artifact_id, target_type: 'site' }, 'target_ids'],
      [
        { artifact_id: artifact.artifact_id, target_type: 'all', window: { start: '02:00', end: '02:00' } },
        'window.end',
      ],
      [
        { artifact_id: artifact.artifact_id, target_type: 'all', window: { start: '24:00', end: '02:00' } },
        'window.start',
      ],
      [
        { artifact_id: artifact.artifact_id, target_type: 'all', rollout: { max_failure_percent: 101 } },
        'rollout.max_failure_percent',
      ],
      [{ artifact_id: artifact.artifact_id, target_type: 'all', install: 'later' }, 'install'],
      // A firmware for a model none of the chargers is.
      [{ artifact_id: artifact.artifact_id, target_type: 'all' }, 'target_ids'],
    ];
    for (const [body, field] of cases) {
      const error = expectError(await startUpdate(alpha, body), 400, 1001);
      expect(error.data?.field ?? error.details?.field ?? error.message, JSON.stringify(body)).toContain(
        field,
      );
    }
  });
});
