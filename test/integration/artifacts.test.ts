import { createHash, generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { request as httpsRequest } from 'node:https';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ARTIFACT_CHUNK_BYTES,
  ARTIFACT_MAX_BYTES,
  type ArtifactManifest,
  artifactSigningText,
} from '../../shared/index.js';
import {
  createTenant,
  expectError,
  type HttpResult,
  operatorToken,
  startTestPlatform,
  type TestPlatform,
} from '../helpers/platform.js';
import { createClientOf } from '../helpers/sealed-writes.js';

/**
 * Update artifacts over real HTTPS (DESIGN.md §19): a file uploaded streamed is stored in chunks equal to it,
 * listed, read and deleted within its operator; every refusal is the documented one, and an upload that fails or
 * is cut off leaves nothing behind.
 */
let tp: TestPlatform;
let alpha: Awaited<ReturnType<typeof createTenant>>;
let bravo: Awaited<ReturnType<typeof createTenant>>;
const { privateKey } = generateKeyPairSync('ed25519');

function manifestOf(
  file: Buffer,
  kind: 'agent' | 'firmware',
  version: string,
  target = '',
): ArtifactManifest {
  return {
    kind,
    version,
    target,
    sha256: createHash('sha256').update(file).digest('hex'),
    size: file.length,
  };
}
const signatureOf = (m: ArtifactManifest) =>
  sign(null, Buffer.from(artifactSigningText(m)), privateKey).toString('base64');

function upload(
  file: Buffer,
  query: Record<string, string>,
  opts: { token?: string; signature?: string | null; contentType?: string } = {},
): Promise<HttpResult> {
  const kind = (query.kind ?? 'firmware') as 'agent' | 'firmware';
  const signature =
    opts.signature === undefined
      ? signatureOf(manifestOf(file, kind, query.version ?? '', query.target))
      : opts.signature;
  return tp.http.post(`/v1/operator/artifacts?${new URLSearchParams(query)}`, {
    token: opts.token ?? alpha.token,
    raw: file,
    contentType: opts.contentType ?? 'application/octet-stream',
    ...(signature !== null ? { headers: { 'x-artifact-signature': signature } } : {}),
  });
}

/** Every artifact row of the store, whatever its state: nothing may be left of a failed upload. */
const uploadsUnderWay = () => tp.store.staleArtifactUploads(Number.MAX_SAFE_INTEGER);

beforeAll(async () => {
  tp = await startTestPlatform();
  alpha = await createTenant(tp, 'Alpha Firmware');
  bravo = await createTenant(tp, 'Bravo Firmware');
});
afterAll(async () => {
  await tp?.stop();
});

describe('POST /v1/operator/artifacts', () => {
  it('stores a file of a few MiB streamed, in chunks equal to it, and answers what it measured', async () => {
    const file = randomBytes(3 * ARTIFACT_CHUNK_BYTES + 12_345);
    const m = manifestOf(file, 'firmware', '2.1.0', 'model-x');
    const res = await upload(file, { kind: 'firmware', version: '2.1.0', target: 'model-x' });
    expect(res.status, res.text).toBe(200);
    const a = res.body.data;
    expect(a).toEqual({
      artifact_id: expect.stringMatching(/^art_[0-9a-f]{20}$/),
      kind: 'firmware',
      version: '2.1.0',
      target: 'model-x',
      sha256: m.sha256,
      size: file.length,
      signature: signatureOf(m),
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
    });
    const chunks = await tp.store.readArtifactChunks(a.artifact_id, 0, 99);
    expect(chunks.map((c) => c.length)).toEqual([
      ARTIFACT_CHUNK_BYTES,
      ARTIFACT_CHUNK_BYTES,
      ARTIFACT_CHUNK_BYTES,
      12_345,
    ]);
    expect(Buffer.concat(chunks).equals(file)).toBe(true);
    // A range reads only its chunks.
    const second = await tp.store.readArtifactChunks(a.artifact_id, 1, 1);
    expect(second[0]!.equals(file.subarray(ARTIFACT_CHUNK_BYTES, 2 * ARTIFACT_CHUNK_BYTES))).toBe(true);
  });

  it('refuses a release already uploaded (409/4001), and takes another version, kind or target', async () => {
    const file = randomBytes(1000);
    expect((await upload(file, { kind: 'agent', version: '1.0.0' })).status).toBe(200);
    const again = expectError(await upload(randomBytes(10), { kind: 'agent', version: '1.0.0' }), 409, 4001);
    expect(again.message).toContain('1.0.0');
    // Refused before its body was read: the connection closes rather than take the rest of a large file.
    const big = await upload(randomBytes(3 * ARTIFACT_CHUNK_BYTES), { kind: 'agent', version: '1.0.0' });
    expectError(big, 409, 4001);
    expect(big.headers.connection).toBe('close');
    expect((await upload(file, { kind: 'agent', version: '1.0.1' })).status).toBe(200);
    expect((await upload(file, { kind: 'firmware', version: '1.0.0' })).status).toBe(200);
    expect((await upload(file, { kind: 'agent', version: '1.0.0', target: 'linux-arm64' })).status).toBe(200);
    // Another operator has releases of its own.
    expect((await upload(file, { kind: 'agent', version: '1.0.0' }, { token: bravo.token })).status).toBe(
      200,
    );
  });

  it('requires the signature header, in base64 of 64 bytes (400/1001 naming it)', async () => {
    const file = randomBytes(100);
    for (const signature of [null, '', 'not base64', `${'A'.repeat(86)}=`, 'A'.repeat(88)]) {
      const body = expectError(
        await upload(file, { kind: 'agent', version: 'sig-1' }, { signature }),
        400,
        1001,
      );
      expect(body.details.field, String(signature)).toBe('x-artifact-signature');
    }
    expect(await uploadsUnderWay()).toEqual([]);
  });

  it('validates the query (400/1001 naming the field)', async () => {
    const file = randomBytes(100);
    const cases: Array<[Record<string, string>, string]> = [
      [{ version: '1.0.0' }, 'kind'],
      [{ kind: 'bootloader', version: '1.0.0' }, 'kind'],
      [{ kind: 'agent' }, 'version'],
      [{ kind: 'agent', version: '-1' }, 'version'],
      [{ kind: 'agent', version: 'a/b' }, 'version'],
      [{ kind: 'agent', version: '1', target: '' }, 'target'],
      [{ kind: 'agent', version: '1', extra: 'x' }, 'extra'],
    ];
    for (const [query, field] of cases) {
      const body = expectError(await upload(file, query, { signature: `${'A'.repeat(86)}==` }), 400, 1001);
      expect(body.details.field, JSON.stringify(query)).toBe(field);
    }
  });

  it('takes only application/octet-stream (415/1002) and refuses an empty body (400/1002)', async () => {
    const file = Buffer.from('{"not":"a file"}');
    for (const contentType of ['application/json', 'text/plain', 'multipart/form-data; boundary=x']) {
      expectError(await upload(file, { kind: 'agent', version: 'ct-1' }, { contentType }), 415, 1002);
    }
    const none = await tp.http.post('/v1/operator/artifacts?kind=agent&version=ct-2', {
      token: alpha.token,
      raw: file,
      headers: { 'x-artifact-signature': `${'A'.repeat(86)}==` },
    });
    expectError(none, 415, 1002);
    expectError(await upload(Buffer.alloc(0), { kind: 'agent', version: 'empty-1' }), 400, 1002);
    // Nothing stored of them: the same release is free.
    expect((await upload(randomBytes(10), { kind: 'agent', version: 'empty-1' })).status).toBe(200);
    expect(await uploadsUnderWay()).toEqual([]);
  });

  it('refuses without write scope (403/2003) or credentials (401/2001)', async () => {
    const reader = await createTenant(tp, 'Reader', ['read']);
    expectError(
      await upload(randomBytes(10), { kind: 'agent', version: 'r-1' }, { token: reader.token }),
      403,
      2003,
    );
    const anonymous = await tp.http.post('/v1/operator/artifacts?kind=agent&version=r-1', {
      raw: randomBytes(10),
      contentType: 'application/octet-stream',
    });
    expectError(anonymous, 401, 2001);
  });

  it('for a client of several operators, needs operator_id, one of its own', async () => {
    const { client, secret } = await createClientOf(tp, {
      operator_ids: [alpha.operatorId, bravo.operatorId],
      scopes: ['read', 'write'],
    });
    const token = await operatorToken(tp.http, client.client_id, secret);
    const file = randomBytes(500);
    const unnamed = expectError(
      await upload(file, { kind: 'agent', version: 'agg-1' }, { token }),
      400,
      1001,
    );
    expect(unnamed.details.field).toBe('operator_id');
    const stranger = await tp.store.createOperator('Stranger');
    for (const operator_id of [stranger.operator_id, 'op_00000000000000000000']) {
      expectError(await upload(file, { kind: 'agent', version: 'agg-1', operator_id }, { token }), 404, 3001);
    }
    const named = await upload(
      file,
      { kind: 'agent', version: 'agg-1', operator_id: bravo.operatorId },
      { token },
    );
    expect(named.status, named.text).toBe(200);
    // It is Bravo's: Bravo's own client sees it, Alpha's does not.
    const id = named.body.data.artifact_id;
    expect((await tp.http.get(`/v1/operator/artifacts/${id}`, { token: bravo.token })).status).toBe(200);
    expectError(await tp.http.get(`/v1/operator/artifacts/${id}`, { token: alpha.token }), 404, 3001);
    // A single operator's client may name its own.
    const own = await upload(file, { kind: 'agent', version: 'agg-2', operator_id: alpha.operatorId });
    expect(own.status, own.text).toBe(200);
    expectError(
      await upload(file, { kind: 'agent', version: 'agg-3', operator_id: bravo.operatorId }),
      404,
      3001,
    );
  });

  it('refuses a file declared larger than 512 MiB before reading it (413/1002)', async () => {
    const res = await new Promise<{ status: number; body: string; connection: string | undefined }>(
      (resolve, reject) => {
        const req = httpsRequest(
          new URL(`${tp.url}/v1/operator/artifacts?kind=firmware&version=huge-1`),
          {
            method: 'POST',
            ca: tp.ca,
            headers: {
              authorization: `Bearer ${alpha.token}`,
              'content-type': 'application/octet-stream',
              'content-length': String(ARTIFACT_MAX_BYTES + 1),
              'x-artifact-signature': `${'A'.repeat(86)}==`,
            },
          },
          (r) => {
            let body = '';
            r.on('data', (d) => {
              body += d;
            });
            r.on('end', () => resolve({ status: r.statusCode ?? 0, body, connection: r.headers.connection }));
          },
        );
        req.on('error', reject);
        req.write(randomBytes(1000));
      },
    );
    expect(res.status).toBe(413);
    expect(JSON.parse(res.body)).toMatchObject({ code: 1002 });
    expect(res.connection).toBe('close');
    expect(await uploadsUnderWay()).toEqual([]);
  });

  it('leaves nothing behind when the client goes away mid-upload', async () => {
    const url = new URL(`${tp.url}/v1/operator/artifacts?kind=firmware&version=cut-1`);
    const req = httpsRequest(url, {
      method: 'POST',
      ca: tp.ca,
      headers: {
        authorization: `Bearer ${alpha.token}`,
        'content-type': 'application/octet-stream',
        'content-length': String(4 * ARTIFACT_CHUNK_BYTES),
        'x-artifact-signature': `${'A'.repeat(86)}==`,
      },
    });
    req.on('error', () => undefined);
    req.write(randomBytes(ARTIFACT_CHUNK_BYTES + 1000));
    // Wait until the upload is under way (its first chunk stored), then cut the connection.
    const deadline = Date.now() + 10_000;
    while ((await uploadsUnderWay()).length === 0) {
      expect(Date.now()).toBeLessThan(deadline);
      await new Promise((r) => setTimeout(r, 20));
    }
    req.destroy();
    while ((await uploadsUnderWay()).length > 0) {
      expect(Date.now(), 'the cut upload was not removed').toBeLessThan(deadline);
      await new Promise((r) => setTimeout(r, 20));
    }
    // The release is free again.
    expect((await upload(randomBytes(10), { kind: 'firmware', version: 'cut-1' })).status).toBe(200);
  });
});

describe('uploads an instance abandoned', () => {
  it('are removed by the sweep once a day old, with their chunks; younger ones are left alone', async () => {
    const begin = async (version: string, created_ms: number) => {
      const artifact_id = `art_${version.padStart(20, '0')}`;
      await tp.store.beginArtifact({
        artifact_id,
        operator_id: alpha.operatorId,
        kind: 'agent',
        version,
        target: '',
        signature: `${'A'.repeat(86)}==`,
        chunk_bytes: ARTIFACT_CHUNK_BYTES,
        created_ms,
      });
      await tp.store.putArtifactChunk(artifact_id, 0, Buffer.from('partial'));
      return artifact_id;
    };
    const old = await begin('1001', tp.now() - 24 * 3600_000 - 1000);
    const young = await begin('1002', tp.now() - 23 * 3600_000);
    await tp.platform.sweep();
    expect(await uploadsUnderWay()).toEqual([young]);
    // The old release is free again; the young upload may still finish.
    expect((await upload(randomBytes(10), { kind: 'agent', version: '1001' })).status).toBe(200);
    expect(await tp.store.finishArtifact(young, { sha256: 'ab'.repeat(32), size: 7 })).toMatchObject({
      status: 'ready',
    });
    expect(old).not.toBe(young);
  });
});

describe('GET and DELETE /v1/operator/artifacts', () => {
  it('lists the operator’s artifacts newest first, by kind, in pages; gets one; deletes one', async () => {
    const t = await createTenant(tp, 'Lister');
    const ids: string[] = [];
    for (const [kind, version] of [
      ['agent', '1'],
      ['firmware', '2'],
      ['agent', '3'],
    ] as const) {
      const res = await upload(randomBytes(64), { kind, version }, { token: t.token });
      expect(res.status, res.text).toBe(200);
      ids.push(res.body.data.artifact_id);
      tp.advance(1000);
    }
    const all = await tp.http.get('/v1/operator/artifacts', { token: t.token });
    expect(all.status).toBe(200);
    expect(all.body.data).toMatchObject({ total: 3, page: 1, size: 20 });
    expect(all.body.data.items.map((a: { artifact_id: string }) => a.artifact_id)).toEqual(
      [...ids].reverse(),
    );
    const agents = await tp.http.get('/v1/operator/artifacts?kind=agent&size=1&page=2', { token: t.token });
    expect(agents.body.data).toMatchObject({ total: 2, page: 2, size: 1 });
    expect(agents.body.data.items.map((a: { artifact_id: string }) => a.artifact_id)).toEqual([ids[0]]);
    expectError(await tp.http.get('/v1/operator/artifacts?kind=bios', { token: t.token }), 400, 1001);

    const one = await tp.http.get(`/v1/operator/artifacts/${ids[1]}`, { token: t.token });
    expect(one.body.data).toEqual(all.body.data.items[1]);

    const deleted = await tp.http.delete(`/v1/operator/artifacts/${ids[1]}`, { token: t.token });
    expect(deleted.body.data).toEqual({ artifact_id: ids[1], deleted: true });
    expect(await tp.store.readArtifactChunks(ids[1]!, 0, 9)).toEqual([]);
    expectError(await tp.http.get(`/v1/operator/artifacts/${ids[1]}`, { token: t.token }), 404, 3001);
    expectError(await tp.http.delete(`/v1/operator/artifacts/${ids[1]}`, { token: t.token }), 404, 3001);
    expect((await tp.http.get('/v1/operator/artifacts', { token: t.token })).body.data.total).toBe(2);
  });

  it('answers another operator’s artifact exactly like a missing one', async () => {
    const mine = await upload(randomBytes(64), { kind: 'firmware', version: 'tenancy-1' });
    const id: string = mine.body.data.artifact_id;
    const missing = id.replace(/[0-9a-f]+$/, (hex) => '0'.repeat(hex.length));
    for (const method of ['get', 'delete'] as const) {
      const theirs = await tp.http[method](`/v1/operator/artifacts/${id}`, { token: bravo.token });
      const none = await tp.http[method](`/v1/operator/artifacts/${missing}`, { token: bravo.token });
      expectError(theirs, 404, 3001);
      expect(theirs.text).toBe(none.text);
    }
    const listed = await tp.http.get('/v1/operator/artifacts', { token: bravo.token });
    expect(listed.text).not.toContain(id);
    // Still there for its operator.
    expect((await tp.http.get(`/v1/operator/artifacts/${id}`, { token: alpha.token })).status).toBe(200);
  });
});
