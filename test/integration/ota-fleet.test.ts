import { createHash, generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RateLimitStore } from '../../platform/http/rate-limit/rate-limiter.js';
import { type ArtifactManifest, artifactSigningText } from '../../shared/index.js';
import { tempDir, waitFor } from '../helpers/agent.js';
import { buildAgent } from '../helpers/agent-bundle.js';
import { runCli } from '../helpers/cli.js';
import { createTenant, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import {
  installReleases,
  type LauncherProcess,
  PATH_WITH_THIS_NODE,
  rebuildArchive,
  startLauncher,
} from '../helpers/releases.js';

/**
 * Agent updates over the air end to end (DESIGN.md §19, issue 35's "real parts"): the built, signed bundle
 * installed on 20 chargers with `charger-agent install`, each started through its launcher on the simulated HAL
 * against a real platform. An update to 1.1.0 in batches of 5 reaches every charger, batch after healthy batch,
 * with its store intact; a release that exits at start rolls every charger of the first batch back by itself
 * and the update pauses before its second batch; a release signed with another key is refused before anything
 * is installed.
 */
type Tenant = Awaited<ReturnType<typeof createTenant>>;
const CHARGERS = 20;
const BATCH = 5;
let tmp: ReturnType<typeof tempDir>;
let tp: TestPlatform;
let tenant: Tenant;
const keys = generateKeyPairSync('ed25519');
const otherKey = generateKeyPairSync('ed25519').privateKey;
const archives: Record<string, string> = {};
interface Charger {
  sn: string;
  prefix: string;
  data: string;
  launcher: LauncherProcess;
  deviceId: string;
}
const chargers: Charger[] = [];

const allowAll: RateLimitStore = {
  hit: (_key, limit) => ({ allowed: true, limit, remaining: limit, resetSeconds: 1 }),
  peek: (_key, limit) => ({ allowed: true, limit, remaining: limit, resetSeconds: 1 }),
  close: () => undefined,
};

async function build(version: string): Promise<string> {
  const archive = path.join(tmp.dir, `charger-agent-${version}.tar.gz`);
  const keyFile = path.join(tmp.dir, 'release-ed25519.pem');
  const built = await buildAgent([
    '--out',
    path.join(tmp.dir, `bundle-${version}`),
    '--version',
    version,
    '--archive',
    archive,
    '--sign-key',
    keyFile,
    '--quiet',
  ]);
  if (built.code !== 0) throw new Error(`npm run build:agent failed:\n${built.output}`);
  return archive;
}

/** The archive's manifest with a signature by `key` (what FILE.sig holds when the key is the release key). */
function signed(archive: string, key = keys.privateKey): ArtifactManifest & { signature: string } {
  const manifest = JSON.parse(readFileSync(`${archive}.sig`, 'utf8')) as ArtifactManifest;
  const signature = sign(null, Buffer.from(artifactSigningText(manifest)), key).toString('base64');
  return { ...manifest, signature };
}

/**
 * A built bundle (1.1.0's unless `from`) re-tarred as `version`, with another entry (a bad release) or a file of
 * padding (a large one), and its manifest beside it (signed with the release key by `signed`). The code inside
 * keeps the version it was built with: a working release is built with its own version first.
 */
async function release(
  version: string,
  change: { entry?: string; padding?: Buffer; from?: string },
): Promise<string> {
  const archive = path.join(tmp.dir, `release-${version}.tar.gz`);
  const into = path.join(tmp.dir, `repacked-${version}`);
  if (change.padding) {
    mkdirSync(into, { recursive: true });
    writeFileSync(path.join(into, 'padding.bin'), change.padding);
  }
  await rebuildArchive({
    from: path.join(tmp.dir, `bundle-${change.from ?? '1.1.0'}`),
    into,
    archive,
    version,
    ...(change.entry !== undefined ? { entry: change.entry } : {}),
  });
  const content = readFileSync(archive);
  const manifest: ArtifactManifest = {
    kind: 'agent',
    version,
    target: signed(archives['1.1.0']!).target,
    sha256: createHash('sha256').update(content).digest('hex'),
    size: content.length,
  };
  writeFileSync(`${archive}.sig`, JSON.stringify(manifest));
  return archive;
}

async function upload(archive: string, manifest: ReturnType<typeof signed>): Promise<string> {
  const query = new URLSearchParams({
    kind: manifest.kind,
    version: manifest.version,
    target: manifest.target,
  });
  const res = await tp.http.post(`/v1/operator/artifacts?${query}`, {
    token: tenant.token,
    raw: readFileSync(archive),
    contentType: 'application/octet-stream',
    headers: { 'x-artifact-signature': manifest.signature },
  });
  expect(res.status, res.text).toBe(200);
  return res.body.data.artifact_id;
}

/** `charger-agent run` as each charger's launcher takes it. */
function runArgs(sn: string, data: string): string[] {
  const key = path.join(tmp.dir, 'release-ed25519.pub.pem');
  return ['run', '--data-dir', data, '--platform-url', tp.url, '--ca', path.join(tmp.dir, 'ca.pem')].concat([
    '--sn',
    sn,
    '--hal',
    'simulated',
    '--connectors',
    '1',
    '--update-key',
    key,
  ]);
}

const prefixOf = (i: number) => path.join(tmp.dir, `charger-${i}`, 'opt');

async function startCharger(i: number): Promise<Charger> {
  const sn = `OTA-${process.pid}-${i}`;
  const prefix = prefixOf(i);
  const data = path.join(tmp.dir, `charger-${i}`, 'data');
  const launcher = startLauncher(prefix, runArgs(sn, data));
  const ready = await waitFor(
    () =>
      launcher
        .output()
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as { msg?: string; device_id?: string })
        .find((l) => l.msg === 'platform identity ready'),
    (l) => l !== undefined,
    60_000,
  );
  if (!ready?.device_id) throw new Error(`charger ${i} did not register:\n${launcher.output()}`);
  await tp.store.assignDevice(ready.device_id, tenant.siteId);
  return { sn, prefix, data, launcher, deviceId: ready.device_id };
}

/** An update of `artifactId` to the whole site, installed at once, in batches of BATCH. */
async function updateSite(artifactId: string, rollout: Record<string, number>): Promise<string> {
  const started = await tp.http.post('/v1/operator/updates', {
    token: tenant.token,
    json: {
      artifact_id: artifactId,
      target_type: 'site',
      target_ids: [tenant.siteId],
      install: 'immediate',
      rollout: { batch_size: BATCH, ...rollout },
    },
  });
  expect(started.status, started.text).toBe(200);
  return started.body.data.update_id;
}

const getUpdate = async (id: string) =>
  (await tp.http.get(`/v1/operator/updates/${id}`, { token: tenant.token })).body.data;

/**
 * Follows an update until `done` says so, checking at every look that no batch has started before the one
 * before it was done (every charger of it final).
 */
// biome-ignore lint/suspicious/noExplicitAny: the update's view is read field by field
async function follow(updateId: string, done: (view: any) => boolean, timeoutMs: number) {
  const FINAL = new Set(['succeeded', 'skipped', 'failed', 'rolled_back', 'cancelled']);
  const end = Date.now() + timeoutMs;
  for (;;) {
    const view = await getUpdate(updateId);
    for (const batch of view.batches as Array<{ index: number }>) {
      const next = view.devices.filter((d: { batch: number }) => d.batch === batch.index + 1);
      if (next.some((d: { state: string }) => d.state !== 'pending' && d.state !== 'cancelled')) {
        const members = view.devices.filter((d: { batch: number }) => d.batch === batch.index);
        expect(members.map((d: { state: string }) => FINAL.has(d.state))).not.toContain(false);
      }
    }
    if (done(view)) return view;
    if (Date.now() > end)
      throw new Error(`update ${updateId} did not finish: ${JSON.stringify(view.progress)}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** The statuses the platform logged for requests to `url` (its request and completion lines share a reqId). */
function statusesOf(url: string): number[] {
  const lines = tp.logs.map(
    (l) => JSON.parse(l) as { reqId?: string; req?: { url?: string }; res?: { statusCode?: number } },
  );
  const ids = new Set(lines.filter((l) => l.req?.url === url).map((l) => l.reqId));
  return lines
    .filter((l) => ids.has(l.reqId) && l.res?.statusCode !== undefined)
    .map((l) => l.res!.statusCode!);
}

beforeAll(async () => {
  tmp = tempDir('ota-fleet-');
  writeFileSync(
    path.join(tmp.dir, 'release-ed25519.pem'),
    keys.privateKey.export({ type: 'pkcs8', format: 'pem' }),
  );
  writeFileSync(
    path.join(tmp.dir, 'release-ed25519.pub.pem'),
    keys.publicKey.export({ type: 'spki', format: 'pem' }),
  );
  // The three builds at once: each writes only its own directory, and waits on the disk as much as the CPU.
  const [v100, v110] = await Promise.all([build('1.0.0'), build('1.1.0'), build('1.4.0')]);
  archives['1.0.0'] = v100;
  archives['1.1.0'] = v110;
  archives['1.2.0'] = await release('1.2.0', {
    entry: "process.stderr.write('1.2.0 fails at start\\n');\nprocess.exit(1);\n",
  });
  // Starts, and never reaches the platform: it never commits.
  archives['1.3.0'] = await release('1.3.0', { entry: 'setInterval(() => undefined, 1 << 30);\n' });
  // A working release made large (random bytes do not compress), so that a download can be cut halfway.
  archives['1.4.0'] = await release('1.4.0', { from: '1.4.0', padding: randomBytes(48 * 1024 * 1024) });
  // The gate every 200 ms, not 5 s: each batch starts soon after the one before it passed its health check.
  tp = await startTestPlatform({
    rateLimitStore: allowAll,
    logLevel: 'info',
    sweepEveryMs: 200,
    updateGateEveryMs: 200,
  });
  tenant = await createTenant(tp, 'OTA Fleet');
  writeFileSync(path.join(tmp.dir, 'ca.pem'), tp.ca);
  await installReleases(
    archives['1.0.0'],
    Array.from({ length: CHARGERS }, (_, i) => prefixOf(i)),
  );
  chargers.push(...(await Promise.all(Array.from({ length: CHARGERS }, (_, i) => startCharger(i)))));
}, 300_000);

afterAll(async () => {
  for (const c of chargers) c.launcher.killAll('SIGKILL');
  await Promise.all(chargers.map((c) => c.launcher.exited));
  await tp?.stop();
  tmp?.remove();
});

describe('an agent release to a fleet of 20 in batches of 5', () => {
  it('reaches every charger, batch after healthy batch, with its store intact', async () => {
    const first = chargers[0]!;
    // Something the store must keep across the update: a schedule.
    const schedule = await tp.http.post(`/v1/operator/devices/${first.deviceId}/connectors/1/schedule`, {
      token: tenant.token,
      json: {
        schedule_id: 'ota-kept',
        type: 'daily',
        time_slots: [{ start: '01:00', end: '02:00' }],
        timezone: 'UTC',
      },
    });
    expect(schedule.status, schedule.text).toBe(200);
    await waitFor(
      async () =>
        (await tp.http.get(`/v1/operator/commands/${schedule.body.data.command_id}`, { token: tenant.token }))
          .body.data.status,
      (s) => s === 'succeeded',
      30_000,
    );
    const artifactId = await upload(archives['1.1.0']!, signed(archives['1.1.0']!));
    const updateId = await updateSite(artifactId, { health_seconds: 5 });
    const view = await follow(updateId, (v) => v.status !== 'running', 240_000);
    expect(view.status, JSON.stringify(view.devices)).toBe('completed');
    expect(view.progress).toEqual({ succeeded: CHARGERS });
    expect(view.batches).toHaveLength(CHARGERS / BATCH);
    const onNew = await tp.http.get('/v1/operator/devices?agent_version=1.1.0&size=100', {
      token: tenant.token,
    });
    expect(onNew.body.data.total).toBe(CHARGERS);
    // The store came along: the schedule is still the charger's.
    const listed = await runCli(['schedules', '--data-dir', first.data, '--json'], {
      script: path.join(first.prefix, 'bin', 'charger-agent'),
      env: { PATH: PATH_WITH_THIS_NODE },
    });
    expect(listed.stdout).toContain('ota-kept');
  }, 300_000);

  it('rolls a release that exits at start back by itself, and pauses before the second batch', async () => {
    const artifactId = await upload(archives['1.2.0']!, signed(archives['1.2.0']!));
    const updateId = await updateSite(artifactId, { health_seconds: 5, max_failure_percent: 20 });
    const view = await follow(
      updateId,
      (v) => v.devices.filter((d: { state: string }) => d.state === 'rolled_back').length === BATCH,
      180_000,
    );
    expect(view.status).toBe('paused');
    expect(view.reason).toContain('batch 1 of 4');
    const firstBatch = view.devices.filter((d: { batch: number }) => d.batch === 1);
    for (const d of firstBatch) expect(d.reason).toContain('exited 3 times');
    expect(
      view.devices.filter((d: { batch: number }) => d.batch > 1).map((d: { state: string }) => d.state),
    ).toEqual(Array(CHARGERS - BATCH).fill('pending'));
    // Every charger still runs 1.1.0, and says so.
    const onOld = await tp.http.get('/v1/operator/devices?agent_version=1.1.0&size=100', {
      token: tenant.token,
    });
    expect(onOld.body.data.total).toBe(CHARGERS);
    const cancelled = await tp.http.delete(`/v1/operator/updates/${updateId}`, {
      token: tenant.token,
    });
    expect(cancelled.status).toBe(200);
  }, 240_000);

  it('rolls a release that starts but never reaches the platform back at its deadline, and pauses', async () => {
    const artifactId = await upload(archives['1.3.0']!, signed(archives['1.3.0']!));
    // health_seconds 0: the trial gets the agent's shortest, 30 s.
    const updateId = await updateSite(artifactId, { health_seconds: 0, max_failure_percent: 20 });
    const view = await follow(
      updateId,
      (v) => v.devices.filter((d: { state: string }) => d.state === 'rolled_back').length === BATCH,
      180_000,
    );
    expect(view.status).toBe('paused');
    for (const d of view.devices.filter((x: { batch: number }) => x.batch === 1))
      expect(d.reason).toContain('did not commit within 30 s');
    expect(
      view.devices.filter((d: { batch: number }) => d.batch > 1).map((d: { state: string }) => d.state),
    ).toEqual(Array(CHARGERS - BATCH).fill('pending'));
    expect((await tp.http.delete(`/v1/operator/updates/${updateId}`, { token: tenant.token })).status).toBe(
      200,
    );
  }, 240_000);

  it('resumes a download cut by a power cut with a range request (206) and finishes the update', async () => {
    const target = chargers[1]!;
    const artifactId = await upload(archives['1.4.0']!, signed(archives['1.4.0']!));
    const started = await tp.http.post('/v1/operator/updates', {
      token: tenant.token,
      json: {
        artifact_id: artifactId,
        target_type: 'device',
        target_ids: [target.deviceId],
        install: 'immediate',
        rollout: { health_seconds: 5 },
      },
    });
    expect(started.status, started.text).toBe(200);
    // Cut the power (SIGKILL, agent and launcher) once a few MiB are on disk.
    const part = path.join(target.data, 'updates', `${artifactId}.part`);
    const size = await waitFor(
      () => (existsSync(part) ? statSync(part).size : 0),
      (n) => n > 4 * 1024 * 1024,
      60_000,
      5,
    );
    expect(size).toBeGreaterThan(4 * 1024 * 1024);
    const agentPid = [...target.launcher.launcherLines()]
      .reverse()
      .find((l) => l.msg === 'started the agent')?.pid;
    process.kill(Number(agentPid), 'SIGKILL');
    target.launcher.child.kill('SIGKILL');
    await target.launcher.exited;
    expect(statSync(part).size).toBeLessThan(signed(archives['1.4.0']!).size);
    target.launcher = startLauncher(target.prefix, runArgs(target.sn, target.data));
    const view = await follow(started.body.data.update_id, (v) => v.status !== 'running', 120_000);
    expect(view.status, JSON.stringify(view.devices)).toBe('completed');
    expect(view.devices[0]).toMatchObject({ state: 'succeeded', version_after: '1.4.0' });
    expect(statusesOf(`/v1/device/artifacts/${artifactId}`)).toContain(206);
  }, 240_000);

  it('refuses a release signed with another key: invalid_signature, nothing installed', async () => {
    const manifest = { ...signed(archives['1.2.0']!, otherKey), version: '1.2.1' };
    manifest.signature = sign(null, Buffer.from(artifactSigningText(manifest)), otherKey).toString('base64');
    const artifactId = await upload(archives['1.2.0']!, manifest);
    const target = chargers[CHARGERS - 1]!;
    const started = await tp.http.post('/v1/operator/updates', {
      token: tenant.token,
      json: {
        artifact_id: artifactId,
        target_type: 'device',
        target_ids: [target.deviceId],
        install: 'immediate',
      },
    });
    expect(started.status, started.text).toBe(200);
    const view = await follow(started.body.data.update_id, (v) => v.status !== 'running', 60_000);
    expect(view.devices[0]).toMatchObject({
      state: 'failed',
      reason: expect.stringContaining('invalid_signature'),
    });
    const device = await tp.http.get(`/v1/operator/devices/${target.deviceId}`, { token: tenant.token });
    expect(device.body.data.agent_version).toBe('1.1.0');
  }, 90_000);
});
