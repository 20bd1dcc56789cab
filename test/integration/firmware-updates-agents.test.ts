import { generateKeyPairSync } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/agent.js';
import {
  type ChargerGroup,
  deviceOf,
  type FirmwareReport,
  firmwareHistory as firmwareHistoryOf,
  rateLimitsButOperatorReads,
  startChargers,
  stateOf,
  type UpdateView,
  uploadSignedFirmware,
  waitForUpdate,
} from '../helpers/firmware-agents.js';
import { createTenant, startTestPlatform, type TestPlatform } from '../helpers/platform.js';

/**
 * Firmware updates end to end (DESIGN.md §19): an operator uploads a firmware image signed with the OEM's key and
 * starts an update; real agents (in process, on the simulated HAL) that trust that key take the `update` command
 * over HTTPS, download the artifact from the platform, check it, install it through the HAL and report each step;
 * the platform's update gate moves the update along from those reports. On both backends.
 */

type Tenant = Awaited<ReturnType<typeof createTenant>>;
let tp: TestPlatform;
let tenant: Tenant;
let artifactId: string;
let group: ChargerGroup | undefined;
const oem = generateKeyPairSync('ed25519');
const OLD = '1.0.0-sim';
const NEW = '2.0.0';
const HEALTH_SECONDS = 1;

/** A fresh site of the tenant with one agent per HAL option set. */
async function siteWithChargers(tag: string, hals: Parameters<typeof startChargers>[1]['hals']) {
  const site = await tp.store.createSite({
    operator_id: tenant.operatorId,
    name: tag,
    timezone: 'Europe/Berlin',
  });
  group = await startChargers(tp, { siteId: site.site_id, updateKey: oem.publicKey, tag, hals });
  return { siteId: site.site_id, chargers: group.chargers };
}

async function startUpdate(body: Record<string, unknown>): Promise<string> {
  const res = await tp.http.post('/v1/operator/updates', {
    token: tenant.token,
    json: { artifact_id: artifactId, ...body },
  });
  expect(res.status, res.text).toBe(200);
  return res.body.data.update_id as string;
}

const siteUpdate = (siteId: string, rollout: Record<string, unknown> = {}) =>
  startUpdate({
    target_type: 'site',
    target_ids: [siteId],
    rollout: { health_seconds: HEALTH_SECONDS, ...rollout },
  });

async function device(deviceId: string): Promise<{ firmware_version: string }> {
  const res = await tp.http.get(`/v1/operator/devices/${deviceId}`, { token: tenant.token });
  expect(res.status, res.text).toBe(200);
  return res.body.data;
}

/** The update's command to `deviceId`, as the operator sees it. */
async function commandOf(view: UpdateView, deviceId: string): Promise<Record<string, unknown>> {
  const res = await tp.http.get(`/v1/operator/commands/${deviceOf(view, deviceId)?.command_id}`, {
    token: tenant.token,
  });
  expect(res.status, res.text).toBe(200);
  return res.body.data;
}

const firmwareHistory = (deviceId: string, updateId: string) =>
  firmwareHistoryOf(tp, tenant.token, deviceId, updateId);

/** The statuses newest first, a run of the same status (download progress) counted once. */
const statusRuns = (reports: FirmwareReport[]) =>
  reports.map((r) => r.status).filter((s, i, all) => i === 0 || all[i - 1] !== s);

const allIn = (view: UpdateView, states: string[]) => view.devices.every((d) => states.includes(d.state));

beforeAll(async () => {
  tp = await startTestPlatform({ rateLimitStore: rateLimitsButOperatorReads() });
  tenant = await createTenant(tp, 'Firmware E2E');
  artifactId = (await uploadSignedFirmware(tp, tenant.token, oem.privateKey, NEW)).artifact_id;
});
afterEach(async () => {
  await group?.stop();
  group = undefined;
});
afterAll(async () => {
  await tp?.stop();
});

describe('firmware updates carried out by real agents on the simulated HAL', () => {
  it('installs on every charger of a site: succeeded with the new version, inventory and history follow', async () => {
    const { siteId, chargers } = await siteWithChargers('fw-ok', [{}, {}, {}]);
    for (const c of chargers) expect((await device(c.deviceId)).firmware_version).toBe(OLD);

    const updateId = await siteUpdate(siteId);
    const view = await waitForUpdate(tp, tenant.token, updateId, (v) => v.status === 'completed');
    expect(view.status, JSON.stringify(view)).toBe('completed');
    expect(view.progress).toEqual({ succeeded: 3 });
    expect(view.batches).toEqual([{ index: 1, status: 'completed', device_count: 3 }]);
    for (const c of chargers) {
      expect(deviceOf(view, c.deviceId)).toMatchObject({
        batch: 1,
        state: 'succeeded',
        version_before: OLD,
        version_after: NEW,
      });
      // The HAL runs the image, and the platform's inventory says so.
      expect(await c.hal.firmwareVersion?.()).toBe(NEW);
      expect((await device(c.deviceId)).firmware_version).toBe(NEW);
      const reports = await firmwareHistory(c.deviceId, updateId);
      expect(statusRuns(reports)).toEqual([
        'installed',
        'install_rebooting',
        'installing',
        'signature_verified',
        'downloaded',
        'downloading',
        'download_scheduled',
      ]);
      expect(reports[0]).toMatchObject({ status: 'installed', version: NEW });
      expect(new Set(reports.map((r) => r.report_id)).size).toBe(reports.length);
    }
    // The command ended with the install.
    for (const c of chargers)
      expect(await commandOf(view, c.deviceId)).toMatchObject({ command: 'update', status: 'succeeded' });
  });

  it('when_idle: a charger with a car charging waits in install_scheduled until the car leaves', async () => {
    const { siteId, chargers } = await siteWithChargers('fw-busy', [{}, {}, {}]);
    const [busy, ...idle] = chargers as [(typeof chargers)[0], ...typeof chargers];
    busy.hal.plugIn(1, { soc: 20 });
    // Nothing holds the connector back, so the agent's control loop starts the session.
    const reading = await waitFor(
      () => busy.hal.readConnector(1),
      (r) => r.state === 'charging',
    );
    expect(reading.state).toBe('charging');

    const updateId = await siteUpdate(siteId);
    let view = await waitForUpdate(
      tp,
      tenant.token,
      updateId,
      (v) =>
        idle.every((c) => stateOf(v, c.deviceId) === 'succeeded') &&
        !['queued', 'downloading'].includes(stateOf(v, busy.deviceId) ?? 'queued'),
    );
    expect(idle.map((c) => stateOf(view, c.deviceId))).toEqual(['succeeded', 'succeeded']);
    // The others were installed and passed their health time meanwhile; this one is still waiting.
    expect(stateOf(view, busy.deviceId)).toBe('install_scheduled');
    expect(view.status).toBe('running');
    expect(view.batches).toEqual([{ index: 1, status: 'running', device_count: 3 }]);
    expect(view.progress).toEqual({ succeeded: 2, install_scheduled: 1 });
    expect(await busy.hal.firmwareVersion?.()).toBe(OLD);
    expect((await busy.hal.readConnector(1)).state).toBe('charging');
    const [scheduled] = await firmwareHistory(busy.deviceId, updateId);
    expect(scheduled).toMatchObject({
      status: 'install_scheduled',
      message: 'waiting until no connector charges or discharges (busy: 1)',
    });

    busy.hal.unplug(1);
    view = await waitForUpdate(tp, tenant.token, updateId, (v) => v.status === 'completed');
    expect(view.status, JSON.stringify(view)).toBe('completed');
    expect(deviceOf(view, busy.deviceId)).toMatchObject({ state: 'succeeded', version_after: NEW });
    expect((await device(busy.deviceId)).firmware_version).toBe(NEW);
    expect(statusRuns(await firmwareHistory(busy.deviceId, updateId)).slice(0, 4)).toEqual([
      'installed',
      'install_rebooting',
      'installing',
      'install_scheduled',
    ]);
  });

  it('a version check that fails after the reboot fails the charger and pauses the update over its threshold', async () => {
    const { siteId, chargers } = await siteWithChargers('fw-verify', [
      {},
      { firmwareFault: 'verification_fails' },
    ]);
    const [good, bad] = chargers as [(typeof chargers)[0], (typeof chargers)[0]];
    // One batch of two, max_failure_percent 20 (the default): one failure is 50%.
    const updateId = await siteUpdate(siteId);
    const view = await waitForUpdate(
      tp,
      tenant.token,
      updateId,
      (v) => v.status === 'paused' && stateOf(v, good.deviceId) === 'succeeded',
    );
    expect(view.status, JSON.stringify(view)).toBe('paused');
    expect(view.reason).toBe('batch 1 of 1: 1 of 2 chargers failed (more than max_failure_percent 20)');
    expect(view.batches).toEqual([{ index: 1, status: 'failed', device_count: 2 }]);
    expect(deviceOf(view, bad.deviceId)).toMatchObject({
      state: 'failed',
      reason: `install_verification_failed: the charger runs firmware ${OLD}, not ${NEW}`,
    });
    // A charger already sent the update goes on while the update is paused.
    expect(deviceOf(view, good.deviceId)).toMatchObject({ state: 'succeeded', version_after: NEW });

    expect((await device(bad.deviceId)).firmware_version).toBe(OLD);
    expect(await bad.hal.firmwareVersion?.()).toBe(OLD);
    const [last] = await firmwareHistory(bad.deviceId, updateId);
    expect(last).toMatchObject({ status: 'install_verification_failed', version: OLD });
    expect(await commandOf(view, bad.deviceId)).toMatchObject({
      status: 'failed',
      reason: `the charger runs firmware ${OLD}, not ${NEW}`,
    });
  });

  it('a HAL without the firmware capability rejects the command: the charger fails, nothing is installed', async () => {
    const { chargers } = await siteWithChargers('fw-nocap', [{ firmwareFault: 'no_firmware_capability' }]);
    const [plain] = chargers as [(typeof chargers)[0]];
    expect(plain.hal.installFirmware).toBeUndefined();
    const updateId = await startUpdate({
      target_type: 'device',
      target_ids: [plain.deviceId],
      rollout: { health_seconds: HEALTH_SECONDS },
    });
    const view = await waitForUpdate(
      tp,
      tenant.token,
      updateId,
      (v) => allIn(v, ['failed']) && v.status !== 'running',
    );
    const reason = "this charger's HAL cannot install firmware (no installFirmware)";
    expect(deviceOf(view, plain.deviceId), JSON.stringify(view)).toMatchObject({
      state: 'failed',
      reason: `command rejected: ${reason}`,
      version_before: OLD,
    });
    expect(deviceOf(view, plain.deviceId)?.version_after).toBeUndefined();
    expect(view.status).toBe('paused');
    expect(view.reason).toBe('batch 1 of 1: 1 of 1 chargers failed (more than max_failure_percent 20)');

    expect(await commandOf(view, plain.deviceId)).toMatchObject({ status: 'rejected', reason });
    // Refused before anything was stored or downloaded: no report about this update, the version unchanged.
    expect(await firmwareHistory(plain.deviceId, updateId)).toEqual([]);
    expect((await device(plain.deviceId)).firmware_version).toBe(OLD);
    expect((await plain.hal.getDeviceInfo()).firmwareVersion).toBe(OLD);
  });
});
