import { createHash, generateKeyPairSync, sign } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RateLimitStore } from '../../platform/http/rate-limit/rate-limiter.js';
import { type ArtifactManifest, artifactSigningText } from '../../shared/index.js';
import { type Fleet, runFleet } from '../../simulators/fleet/fleet-runner.js';
import { tempDir, waitFor } from '../helpers/agent.js';
import { buildAgent } from '../helpers/agent-bundle.js';
import { createTenant, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { rebuildArchive } from '../helpers/releases.js';

/**
 * The simulated fleet takes agent updates (`--agent-releases`, simulators/fleet/simulated-releases.ts): each
 * charger stages a real, signed bundle in an A/B layout of its own, "restarts" into it (the bundle's own code
 * runs as the start check) and commits once healthy, so the platform sees every charger on the new version; a
 * bundle that exits at start rolls back by itself after three starts, with the charger's store restored, and the
 * update pauses before its second batch. What the sandbox runs (README, docs/oem-guide.md).
 */
type Tenant = Awaited<ReturnType<typeof createTenant>>;
const COUNT = 4;
let tmp: ReturnType<typeof tempDir>;
let tp: TestPlatform;
let tenant: Tenant;
let fleet: Fleet;
const keys = generateKeyPairSync('ed25519');
const archives: Record<string, string> = {};

const allowAll: RateLimitStore = {
  hit: (_key, limit) => ({ allowed: true, limit, remaining: limit, resetSeconds: 1 }),
  peek: (_key, limit) => ({ allowed: true, limit, remaining: limit, resetSeconds: 1 }),
  close: () => undefined,
};

function manifestOf(archive: string): ArtifactManifest & { signature: string } {
  const manifest = JSON.parse(readFileSync(`${archive}.sig`, 'utf8')) as ArtifactManifest;
  const signature = sign(null, Buffer.from(artifactSigningText(manifest)), keys.privateKey).toString(
    'base64',
  );
  return { ...manifest, signature };
}

async function upload(archive: string): Promise<string> {
  const manifest = manifestOf(archive);
  const query = new URLSearchParams({ kind: 'agent', version: manifest.version, target: manifest.target });
  const res = await tp.http.post(`/v1/operator/artifacts?${query}`, {
    token: tenant.token,
    raw: readFileSync(archive),
    contentType: 'application/octet-stream',
    headers: { 'x-artifact-signature': manifest.signature },
  });
  expect(res.status, res.text).toBe(200);
  return res.body.data.artifact_id;
}

interface UpdateView {
  status: string;
  reason?: string;
  devices: Array<{
    device_id: string;
    batch: number;
    state: string;
    reason?: string;
    version_after?: string;
  }>;
}

async function view(updateId: string): Promise<UpdateView> {
  const res = await tp.http.get(`/v1/operator/updates/${updateId}`, { token: tenant.token });
  expect(res.status, res.text).toBe(200);
  return res.body.data;
}

/** Starts the update and moves it along (the gate's 5-s timer, run at once) until `done` holds. */
async function rollOut(artifactId: string, done: (v: UpdateView) => boolean): Promise<UpdateView> {
  const res = await tp.http.post('/v1/operator/updates', {
    token: tenant.token,
    json: {
      artifact_id: artifactId,
      target_type: 'site',
      target_ids: [tenant.siteId],
      install: 'immediate',
      rollout: { batch_size: 2, health_seconds: 2 },
    },
  });
  expect(res.status, res.text).toBe(200);
  const updateId = res.body.data.update_id as string;
  const last = await waitFor(
    async () => {
      await tp.platform.sweep();
      return view(updateId);
    },
    done,
    90_000,
    500,
  );
  expect(done(last), JSON.stringify(last)).toBe(true);
  return last;
}

const agentVersions = async () => {
  const res = await tp.http.get(`/v1/operator/devices?site_id=${tenant.siteId}&size=100`, {
    token: tenant.token,
  });
  return (res.body.data.items as Array<{ agent_version?: string }>).map((d) => d.agent_version);
};

beforeAll(async () => {
  tmp = tempDir('fleet-releases-');
  const keyFile = path.join(tmp.dir, 'update-ed25519.pem');
  writeFileSync(keyFile, keys.privateKey.export({ type: 'pkcs8', format: 'pem' }));
  writeFileSync(`${keyFile}.pub`, keys.publicKey.export({ type: 'spki', format: 'pem' }));
  const good = path.join(tmp.dir, 'agent-0.2.0.tar.gz');
  const bundle = path.join(tmp.dir, 'bundle-0.2.0');
  const built = await buildAgent([
    '--out',
    bundle,
    '--version',
    '0.2.0',
    '--archive',
    good,
    '--sign-key',
    keyFile,
    '--quiet',
  ]);
  if (built.code !== 0) throw new Error(`npm run build:agent failed:\n${built.output}`);
  archives.good = good;
  // The same bundle as 0.3.0 whose entry exits at start.
  const broken = path.join(tmp.dir, 'agent-0.3.0.tar.gz');
  await rebuildArchive({
    from: bundle,
    into: path.join(tmp.dir, 'bundle-0.3.0'),
    archive: broken,
    version: '0.3.0',
    entry: "process.stderr.write('0.3.0 fails at start\\n');\nprocess.exit(1);\n",
  });
  const content = readFileSync(broken);
  writeFileSync(
    `${broken}.sig`,
    JSON.stringify({
      kind: 'agent',
      version: '0.3.0',
      target: manifestOf(good).target,
      sha256: createHash('sha256').update(content).digest('hex'),
      size: content.length,
    }),
  );
  archives.broken = broken;

  tp = await startTestPlatform({ rateLimitStore: allowAll });
  tenant = await createTenant(tp, 'Fleet Releases');
  fleet = await runFleet({
    platformUrl: tp.url,
    ca: tp.ca,
    count: COUNT,
    seed: 5150,
    rampMs: 500,
    outageShare: 0,
    dataDir: path.join(tmp.dir, 'fleet'),
    agentReleases: true,
    updateKeyFiles: [`${keyFile}.pub`],
    heartbeatIntervalMs: 1_000,
    tuning: { pollWaitSeconds: 2, backoff: { baseMs: 100, capMs: 1_000 } },
  });
  const ids = await waitFor(
    () => fleet.chargers().flatMap((c) => (c.deviceId ? [c.deviceId] : [])),
    (found) => found.length === COUNT,
    30_000,
  );
  for (const id of ids) await tp.store.assignDevice(id, tenant.siteId);
}, 120_000);

afterAll(async () => {
  await fleet?.stop();
  await tp?.stop();
  tmp?.remove();
});

describe('the simulated fleet with --agent-releases', () => {
  it('moves every charger to a new agent release, batch after batch, and reports it', async () => {
    expect(await agentVersions()).toEqual(Array(COUNT).fill('0.1.0'));
    const done = await rollOut(await upload(archives.good!), (v) => v.status !== 'running');
    expect(done.status).toBe('completed');
    expect(done.devices.map((d) => [d.state, d.version_after])).toEqual(
      Array(COUNT).fill(['succeeded', '0.2.0']),
    );
    expect(await agentVersions()).toEqual(Array(COUNT).fill('0.2.0'));
    for (const c of fleet.chargers()) {
      const prefix = path.join(tmp.dir, 'fleet', c.sn, 'releases');
      expect(existsSync(path.join(prefix, 'trial.json'))).toBe(false);
      expect(existsSync(path.join(prefix, 'releases', '0.2.0', 'charger-agent.mjs'))).toBe(true);
    }
  });

  it('rolls a release that exits at start back by itself, and pauses before the second batch', async () => {
    // The first failure pauses the update (1 of 2 is over 20 %); the other charger of the batch, mid-install then,
    // still rolls back by itself and reports it.
    const paused = await rollOut(
      await upload(archives.broken!),
      (v) =>
        v.status === 'paused' &&
        v.devices.filter((d) => d.batch === 1).every((d) => d.state === 'rolled_back'),
    );
    const first = paused.devices.filter((d) => d.batch === 1);
    expect(first.map((d) => d.state)).toEqual(['rolled_back', 'rolled_back']);
    for (const d of first) expect(d.reason).toContain('exited 3 times');
    expect(paused.devices.filter((d) => d.batch === 2).map((d) => d.state)).toEqual(['pending', 'pending']);
    // Back on 0.2.0, with their stores (identity included) as they were: still online under their ids.
    expect(await agentVersions()).toEqual(Array(COUNT).fill('0.2.0'));
    const res = await tp.http.get(`/v1/operator/devices?site_id=${tenant.siteId}&size=100`, {
      token: tenant.token,
    });
    expect((res.body.data.items as Array<{ status: string }>).map((d) => d.status)).toEqual(
      Array(COUNT).fill('online'),
    );
  });
});
