import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { ApiError } from '../../../platform/domain/api-error.js';
import { createArtifactService } from '../../../platform/services/artifact-service.js';
import type { ArtifactRepository, ArtifactRow } from '../../../platform/storage/artifact-repository.js';
import { ARTIFACT_CHUNK_BYTES, ARTIFACT_MAX_BYTES } from '../../../shared/index.js';

const SIGNATURE = `${'A'.repeat(86)}==`;

/** The repository in memory, keeping only chunk sizes (a refused upload may run to 512 MiB). */
function memoryArtifacts() {
  const rows = new Map<string, ArtifactRow>();
  const chunks = new Map<string, number[]>();
  const repo: Pick<
    ArtifactRepository,
    'beginArtifact' | 'putArtifactChunk' | 'finishArtifact' | 'deleteArtifact'
  > = {
    async beginArtifact(row) {
      rows.set(row.artifact_id, { ...row, sha256: '', size: 0, status: 'uploading' });
      chunks.set(row.artifact_id, []);
      return 'ok';
    },
    async putArtifactChunk(id, index, data) {
      const list = chunks.get(id);
      if (list) list[index] = data.length;
    },
    async finishArtifact(id, measured) {
      const row = rows.get(id);
      if (!row) return undefined;
      const done = { ...row, ...measured, status: 'ready' as const };
      rows.set(id, done);
      return done;
    },
    async deleteArtifact(id) {
      chunks.delete(id);
      return rows.delete(id);
    },
  };
  return { repo: repo as ArtifactRepository, rows, chunks };
}

/** `count` pieces of `piece`, then optionally an error, as a request stream would deliver them. */
function pieces(piece: Buffer, count: number, fail?: Error): Readable {
  return Readable.from(
    (async function* () {
      for (let i = 0; i < count; i++) yield piece;
      if (fail) throw fail;
    })(),
  );
}

const query = { kind: 'firmware' as const, version: '1.0.0' };

describe('artifact upload', () => {
  it('cuts the stream into chunks of ARTIFACT_CHUNK_BYTES, whatever the pieces, and measures it', async () => {
    const m = memoryArtifacts();
    const service = createArtifactService({ store: m.repo, now: () => 0 });
    const piece = Buffer.alloc(Math.round(ARTIFACT_CHUNK_BYTES * 0.3), 7);
    const out = await service.upload(['op_1'], query, SIGNATURE, pieces(piece, 8));
    const size = 8 * piece.length;
    const hash = createHash('sha256');
    for (let i = 0; i < 8; i++) hash.update(piece);
    expect(out).toMatchObject({ size, sha256: hash.digest('hex'), signature: SIGNATURE, target: '' });
    expect(m.chunks.get(out.artifact_id)).toEqual([
      ARTIFACT_CHUNK_BYTES,
      ARTIFACT_CHUNK_BYTES,
      size - 2 * ARTIFACT_CHUNK_BYTES,
    ]);
  });

  it('refuses past ARTIFACT_MAX_BYTES with 413/1002 and removes what it stored', async () => {
    const m = memoryArtifacts();
    const service = createArtifactService({ store: m.repo, now: () => 0 });
    const piece = Buffer.alloc(ARTIFACT_CHUNK_BYTES);
    const count = ARTIFACT_MAX_BYTES / ARTIFACT_CHUNK_BYTES + 1;
    const err = await service.upload(['op_1'], query, SIGNATURE, pieces(piece, count)).catch((e) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect({ status: err.status, code: err.code }).toEqual({ status: 413, code: 1002 });
    expect(m.rows.size).toBe(0);
    expect(m.chunks.size).toBe(0);
  });

  it('removes what it stored when the stream fails (a client going away)', async () => {
    const m = memoryArtifacts();
    const service = createArtifactService({ store: m.repo, now: () => 0 });
    const cut = Object.assign(new Error('aborted'), { code: 'ECONNRESET' });
    const piece = Buffer.alloc(ARTIFACT_CHUNK_BYTES);
    await expect(service.upload(['op_1'], query, SIGNATURE, pieces(piece, 3, cut))).rejects.toBe(cut);
    expect(m.rows.size).toBe(0);
  });

  it.each([
    [['op_1', 'op_2'], undefined, 400, 1001],
    [[], undefined, 400, 1001],
    [['op_1'], 'op_2', 404, 3001],
  ] as const)('operators %j naming %s: %i/%i before anything is stored', async (ops, named, status, code) => {
    const m = memoryArtifacts();
    const service = createArtifactService({ store: m.repo, now: () => 0 });
    const q = named ? { ...query, operator_id: named } : query;
    const err = await service.upload(ops, q, SIGNATURE, pieces(Buffer.from('x'), 1)).catch((e) => e);
    expect({ status: err.status, code: err.code }).toEqual({ status, code });
    expect(m.rows.size).toBe(0);
  });
});
