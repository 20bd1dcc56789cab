import { createHash, generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisLink, type RedisLink } from '../../platform/coordination/redis-link.js';
import { artifactSigningText } from '../../shared/index.js';
import { createTenant, registerDevice, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { startRedisServer, type TestRedis } from '../helpers/redis.js';
import { type ScriptedCharger, scriptedCharger } from '../helpers/scripted-charger.js';

/**
 * An update (DESIGN.md §19) across two instances over one PostgreSQL database and one Redis (§13): its progress is
 * in the database, so the instance that did not start it moves it along; both gates running at once start each
 * batch once (every charger gets one command); and with the first instance gone, the second finishes the update.
 * PostgreSQL only (`npm run test:postgres`).
 */
const quiet = { warn: () => undefined, info: () => undefined };
let redis: TestRedis;
let dataDir: string;
const links: RedisLink[] = [];
let a: TestPlatform;
let b: TestPlatform;
let aStopped = false;

async function instance(name: string): Promise<TestPlatform> {
  const link = createRedisLink(redis.url, name, quiet);
  links.push(link);
  const end = Date.now() + 10_000;
  while (!link.available() && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
  return startTestPlatform({ dataDir, redis: link, instanceId: name });
}

beforeAll(async () => {
  redis = await startRedisServer();
  dataDir = await mkdtemp(join(tmpdir(), 'cp-update-instances-'));
  a = await instance('inst-a');
  b = await instance('inst-b');
}, 60_000);

afterAll(async () => {
  if (!aStopped) await a?.stop();
  await b?.stop();
  for (const link of links) await link.close();
  await redis?.stop();
  await rm(dataDir, { recursive: true, force: true });
});

/** Takes the update command and reports the install through `via`'s device API. */
async function install(c: ScriptedCharger, updateId: string): Promise<void> {
  const commands = (await c.heartbeat()).filter((x) => x.command === 'update');
  expect(commands, c.deviceId).toHaveLength(1);
  await c.command(commands[0]!.command_id, 'accepted');
  await c.firmware(updateId, 'installed', { version: '7.0.0' });
  await c.command(commands[0]!.command_id, 'succeeded');
}

describe('an update on two instances', () => {
  it('moves on whichever instance runs the gate, starts each batch once, and outlives the instance that began it', async () => {
    const tenant = await createTenant(a, 'Instances Updates');
    const devices = [];
    for (let i = 0; i < 3; i++)
      devices.push(await registerDevice(a, `SN-UPD-INST-${i}-${process.pid}`, tenant.siteId));
    const file = randomBytes(2048);
    const m = {
      kind: 'firmware' as const,
      version: '7.0.0',
      target: '',
      sha256: createHash('sha256').update(file).digest('hex'),
      size: file.length,
    };
    const { privateKey } = generateKeyPairSync('ed25519');
    const up = await a.http.post('/v1/operator/artifacts?kind=firmware&version=7.0.0', {
      token: tenant.token,
      raw: file,
      contentType: 'application/octet-stream',
      headers: {
        'x-artifact-signature': sign(null, Buffer.from(artifactSigningText(m)), privateKey).toString(
          'base64',
        ),
      },
    });
    expect(up.status, up.text).toBe(200);
    const started = await a.http.post('/v1/operator/updates', {
      token: tenant.token,
      json: {
        artifact_id: up.body.data.artifact_id,
        target_type: 'site',
        target_ids: [tenant.siteId],
        rollout: { batch_size: 1, health_seconds: 0 },
      },
    });
    expect(started.status, started.text).toBe(200);
    const updateId: string = started.body.data.update_id;
    // The chargers talk to instance b only.
    const onB = devices.map((d) => scriptedCharger(b, d));
    const view = async () =>
      (await b.http.get(`/v1/operator/updates/${updateId}`, { token: tenant.token })).body.data;
    const inBatch = async (batch: number) => {
      const v = await view();
      const id = v.devices.find((d: { batch: number }) => d.batch === batch).device_id;
      return onB.find((c) => c.deviceId === id)!;
    };

    // Batch 1, then both gates at once, several times: batch 2 starts once.
    await install(await inBatch(1), updateId);
    for (let i = 0; i < 3; i++) await Promise.all([a.platform.sweep(), b.platform.sweep()]);
    expect((await view()).batches.map((x: { status: string }) => x.status)).toEqual([
      'completed',
      'running',
      'pending',
    ]);
    await install(await inBatch(2), updateId);

    // Instance a goes; b alone finishes the update it never started.
    await a.stop();
    aStopped = true;
    for (let i = 0; i < 3; i++) await b.platform.sweep();
    await install(await inBatch(3), updateId);
    for (let i = 0; i < 3; i++) await b.platform.sweep();
    const done = await view();
    expect(done.status).toBe('completed');
    expect(done.progress).toEqual({ succeeded: 3 });
    // Every charger got exactly one update command.
    for (const d of devices) {
      const cmds = await b.http.get(`/v1/operator/devices/${d.deviceId}/commands?size=100`, {
        token: tenant.token,
      });
      const updates = cmds.body.data.items.filter((c: { command: string }) => c.command === 'update');
      expect(updates, d.deviceId).toHaveLength(1);
    }
  });
});
