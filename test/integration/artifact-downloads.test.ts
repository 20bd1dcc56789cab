import { createHash, generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RateLimitStore } from '../../platform/http/rate-limit/rate-limiter.js';
import { ARTIFACT_CHUNK_BYTES, artifactSigningText } from '../../shared/index.js';
import { tempDir } from '../helpers/agent.js';
import {
  createTenant,
  expectError,
  type RegisteredDevice,
  registerDevice,
  startTestPlatform,
  type TestPlatform,
} from '../helpers/platform.js';

/**
 * Chargers' downloads of an update's artifact (DESIGN.md §19) over real HTTPS, on both backends: the whole file
 * or a range of it (a resumed download), the ETag and If-Range, only for a charger sent the update, and no more
 * at once than the instance serves (64 by default; 4 here, so that the downloads held open are large enough
 * not to fit in the sockets' buffers).
 */
const LIMIT = 4;
type Tenant = Awaited<ReturnType<typeof createTenant>>;
let tp: TestPlatform;
let alpha: Tenant;
let bravo: Tenant;
let updated: RegisteredDevice;
let notUpdated: RegisteredDevice;
let foreign: RegisteredDevice;
let artifactId: string;
let bigArtifactId: string;
let bigUpdated: RegisteredDevice;
// Two and a half chunks: ranges cross chunk boundaries.
const file = randomBytes(2 * ARTIFACT_CHUNK_BYTES + ARTIFACT_CHUNK_BYTES / 2);
const sha256 = createHash('sha256').update(file).digest('hex');

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/** Starts a download; the answer's body is not read (the caller reads or drops it). */
function begin(
  token: string | undefined,
  id: string,
  headers: Record<string, string> = {},
  on: TestPlatform = tp,
): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(`${on.url}/v1/device/artifacts/${id}`, {
      ca: on.ca,
      agent: false,
      headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...headers },
    });
    req.on('response', resolve).on('error', reject).end();
  });
}

async function download(
  token: string | undefined,
  id: string,
  headers: Record<string, string> = {},
  on: TestPlatform = tp,
): Promise<Answer> {
  const res = await begin(token, id, headers, on);
  const chunks: Buffer[] = [];
  for await (const chunk of res) chunks.push(chunk as Buffer);
  return { status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) };
}

const json = (a: Answer) => ({
  status: a.status,
  text: a.body.toString(),
  body: JSON.parse(a.body.toString()),
  headers: a.headers,
});

/** One charger's token stands for several chargers below: its rate budget must not be what refuses them. */
const allowAll: RateLimitStore = {
  hit: (_key, limit) => ({ allowed: true, limit, remaining: limit, resetSeconds: 1 }),
  peek: (_key, limit) => ({ allowed: true, limit, remaining: limit, resetSeconds: 1 }),
  close: () => undefined,
};

const { privateKey } = generateKeyPairSync('ed25519');

/** Uploads `content` as a firmware and starts an update of it to `device`; answers the artifact's id. */
async function uploadAndUpdate(content: Buffer, version: string, device: RegisteredDevice): Promise<string> {
  const manifest = {
    kind: 'firmware' as const,
    version,
    target: '',
    sha256: createHash('sha256').update(content).digest('hex'),
    size: content.length,
  };
  const up = await tp.http.post(`/v1/operator/artifacts?kind=firmware&version=${version}`, {
    token: alpha.token,
    raw: content,
    contentType: 'application/octet-stream',
    headers: {
      'x-artifact-signature': sign(null, Buffer.from(artifactSigningText(manifest)), privateKey).toString(
        'base64',
      ),
    },
  });
  expect(up.status, up.text).toBe(200);
  const started = await tp.http.post('/v1/operator/updates', {
    token: alpha.token,
    json: { artifact_id: up.body.data.artifact_id, target_type: 'device', target_ids: [device.deviceId] },
  });
  expect(started.status, started.text).toBe(200);
  return up.body.data.artifact_id;
}

beforeAll(async () => {
  tp = await startTestPlatform({ rateLimitStore: allowAll, downloadsPerInstance: LIMIT });
  alpha = await createTenant(tp, 'Alpha Downloads');
  bravo = await createTenant(tp, 'Bravo Downloads');
  updated = await registerDevice(tp, `SN-DL-1-${process.pid}`, alpha.siteId);
  notUpdated = await registerDevice(tp, `SN-DL-2-${process.pid}`, alpha.siteId);
  foreign = await registerDevice(tp, `SN-DL-3-${process.pid}`, bravo.siteId);
  bigUpdated = await registerDevice(tp, `SN-DL-4-${process.pid}`, alpha.siteId);
  artifactId = await uploadAndUpdate(file, '9.0.0', updated);
  bigArtifactId = await uploadAndUpdate(randomBytes(24 * ARTIFACT_CHUNK_BYTES), '9.0.1', bigUpdated);
});
afterAll(async () => {
  await tp?.stop();
});

describe('GET /v1/device/artifacts/{artifact_id}', () => {
  it('answers the whole file with its sha256 as ETag', async () => {
    const a = await download(updated.token, artifactId);
    expect(a.status).toBe(200);
    expect(a.body.equals(file)).toBe(true);
    expect(a.headers).toMatchObject({
      'content-type': 'application/octet-stream',
      'content-length': String(file.length),
      'accept-ranges': 'bytes',
      etag: `"${sha256}"`,
    });
  });

  it('answers a range with 206 and Content-Range, across chunk boundaries', async () => {
    const from = ARTIFACT_CHUNK_BYTES - 10;
    const rest = await download(updated.token, artifactId, {
      range: `bytes=${from}-`,
      'if-range': `"${sha256}"`,
    });
    expect(rest.status).toBe(206);
    expect(rest.headers['content-range']).toBe(`bytes ${from}-${file.length - 1}/${file.length}`);
    expect(rest.body.equals(file.subarray(from))).toBe(true);
    const middle = await download(updated.token, artifactId, { range: 'bytes=500-599' });
    expect(middle.status).toBe(206);
    expect(middle.body.equals(file.subarray(500, 600))).toBe(true);
    // Another file than the one the charger began with: the whole of this one.
    const changed = await download(updated.token, artifactId, { range: 'bytes=500-', 'if-range': '"0000"' });
    expect(changed.status).toBe(200);
    expect(changed.body.length).toBe(file.length);
  });

  it('resumes a download cut halfway with the rest of the file', async () => {
    const res = await begin(updated.token, artifactId);
    const got: Buffer[] = [];
    let size = 0;
    for await (const chunk of res) {
      got.push(chunk as Buffer);
      size += (chunk as Buffer).length;
      if (size >= file.length / 2) break;
    }
    res.destroy();
    const rest = await download(updated.token, artifactId, {
      range: `bytes=${size}-`,
      'if-range': `"${sha256}"`,
    });
    expect(rest.status).toBe(206);
    expect(Buffer.concat([...got, rest.body]).equals(file)).toBe(true);
  });

  it('answers 416 with the size for a range past the end', async () => {
    const a = await download(updated.token, artifactId, { range: `bytes=${file.length}-` });
    expectError(json(a), 416, 1001);
    expect(a.headers['content-range']).toBe(`bytes */${file.length}`);
  });

  it('is 404 for a charger without the update, another tenant’s charger and a missing artifact; 401 without a token', async () => {
    expectError(json(await download(notUpdated.token, artifactId)), 404, 3001);
    expectError(json(await download(foreign.token, artifactId)), 404, 3001);
    expectError(json(await download(updated.token, 'art_00000000000000000000')), 404, 3001);
    expectError(json(await download(undefined, artifactId)), 401, 2001);
  });

  it('serves its limit of downloads at once; the next is told to come back (429, Retry-After)', async () => {
    // Each held open, unread: the platform streams no further than the socket takes.
    const held = await Promise.all(
      Array.from({ length: LIMIT }, () => begin(bigUpdated.token, bigArtifactId)),
    );
    expect(held.map((r) => r.statusCode)).toEqual(Array(LIMIT).fill(200));
    expect(tp.platform.context.downloads.active()).toBe(LIMIT);
    const refused = await download(updated.token, artifactId);
    expectError(json(refused), 429, 5001);
    expect(refused.headers['retry-after']).toBe('30');
    for (const r of held) r.destroy();
    // Every slot comes back when the chargers go away.
    await expect.poll(() => tp.platform.context.downloads.active(), { timeout: 5_000 }).toBe(0);
    expect((await download(updated.token, artifactId)).status).toBe(200);
  });
});

describe('downloads from the instance’s local copy (storage/artifact-file-cache.ts)', () => {
  it('serves from a copy made on the first download, removed with its artifact', async () => {
    const device = await registerDevice(tp, `SN-DL-5-${process.pid}`, alpha.siteId);
    const content = randomBytes(ARTIFACT_CHUNK_BYTES + 3);
    const id = await uploadAndUpdate(content, '9.0.2', device);
    const copy = join(tp.dataDir, 'artifact-cache', id);
    expect(existsSync(copy)).toBe(false);
    expect((await download(device.token, id)).body.equals(content)).toBe(true);
    expect(readFileSync(copy).equals(content)).toBe(true);
    const updates = await tp.http.get('/v1/operator/updates', { token: alpha.token });
    const update = (
      updates.body.data.items as Array<{ update_id: string; artifact: { artifact_id: string } }>
    ).find((u) => u.artifact.artifact_id === id)!;
    expect(
      (await tp.http.delete(`/v1/operator/updates/${update.update_id}`, { token: alpha.token })).status,
    ).toBe(200);
    expect((await tp.http.delete(`/v1/operator/artifacts/${id}`, { token: alpha.token })).status).toBe(200);
    expect(existsSync(copy)).toBe(false);
  });

  it('serves from the stored chunks when no copy can be made', async () => {
    const dir = tempDir('downloads-no-cache-');
    // A file where the cache's directory would be: no copy can be written.
    writeFileSync(join(dir.dir, 'artifact-cache'), 'not a directory');
    const other = await startTestPlatform({ rateLimitStore: allowAll, dataDir: dir.dir, logLevel: 'warn' });
    try {
      const tenant = await createTenant(other, 'Cacheless');
      const device = await registerDevice(other, `SN-DL-6-${process.pid}`, tenant.siteId);
      const content = randomBytes(2 * ARTIFACT_CHUNK_BYTES + 1);
      const manifest = {
        kind: 'firmware' as const,
        // Not the 1.0.0 it registered with (that would be skipped).
        version: '2.0.0',
        target: '',
        sha256: createHash('sha256').update(content).digest('hex'),
        size: content.length,
      };
      const up = await other.http.post('/v1/operator/artifacts?kind=firmware&version=2.0.0', {
        token: tenant.token,
        raw: content,
        contentType: 'application/octet-stream',
        headers: {
          'x-artifact-signature': sign(null, Buffer.from(artifactSigningText(manifest)), privateKey).toString(
            'base64',
          ),
        },
      });
      expect(up.status, up.text).toBe(200);
      const id = up.body.data.artifact_id as string;
      const started = await other.http.post('/v1/operator/updates', {
        token: tenant.token,
        json: { artifact_id: id, target_type: 'device', target_ids: [device.deviceId] },
      });
      expect(started.status, started.text).toBe(200);
      const got = await download(device.token, id, {}, other);
      expect(got.status).toBe(200);
      expect(got.body.equals(content)).toBe(true);
      expect(other.logs.some((l) => l.includes('no local copy of the artifact'))).toBe(true);
    } finally {
      await other.stop();
      dir.remove();
    }
  });
});
