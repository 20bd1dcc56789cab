import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { newId } from '../../platform/domain/ids.js';
import type { NewArtifact, Store } from '../../platform/storage/store.js';
import { BACKENDS, openTestStore, type TestStore } from '../helpers/backends.js';

/**
 * The contract of ArtifactRepository on every backend (DESIGN.md §19): an upload is written chunk by chunk and
 * seen by nobody until finished; a release is uploaded once per operator; listings are newest first, tenancy
 * holds, ranges read only their chunks, and a deletion takes the chunks with it.
 */
const T0 = Date.UTC(2030, 0, 15, 12);
const SIGNATURE = `${'A'.repeat(86)}==`;

describe.each(BACKENDS)('artifact repository on %s', (backend) => {
  let ts: TestStore;
  let store: Store;
  let operatorId: string;
  beforeEach(async () => {
    ts = await openTestStore(backend, { now: () => T0 });
    store = ts.store;
    operatorId = (await store.createOperator('A')).operator_id;
  });
  afterEach(async () => {
    await ts.close();
  });

  function artifact(extra: Partial<NewArtifact> = {}): NewArtifact {
    return {
      artifact_id: newId('art'),
      operator_id: operatorId,
      kind: 'firmware',
      version: '1.0.0',
      target: '',
      signature: SIGNATURE,
      chunk_bytes: 16,
      created_ms: T0,
      ...extra,
    };
  }

  /** Begins, stores the chunks and finishes an upload; the finished row. */
  async function upload(row: NewArtifact, chunks: readonly Buffer[]) {
    expect(await store.beginArtifact(row)).toBe('ok');
    for (const [i, c] of chunks.entries()) await store.putArtifactChunk(row.artifact_id, i, c);
    const size = chunks.reduce((n, c) => n + c.length, 0);
    const done = await store.finishArtifact(row.artifact_id, { sha256: 'ab'.repeat(32), size });
    if (!done) throw new Error('not finished');
    return done;
  }

  it('keeps an artifact as given and reads its chunks back by range', async () => {
    const row = artifact({ target: 'linux-arm64' });
    const chunks = [Buffer.alloc(16, 1), Buffer.alloc(16, 2), Buffer.from([3, 0, 255])];
    const done = await upload(row, chunks);
    expect(done).toEqual({ ...row, sha256: 'ab'.repeat(32), size: 35, status: 'ready' });
    expect(await store.getArtifact(row.artifact_id)).toEqual(done);
    expect(await store.getArtifactForOperators(row.artifact_id, [operatorId])).toEqual(done);

    expect(await store.readArtifactChunks(row.artifact_id, 0, 2)).toEqual(chunks);
    expect(await store.readArtifactChunks(row.artifact_id, 1, 1)).toEqual([chunks[1]]);
    // Past the end: fewer chunks, or none.
    expect(await store.readArtifactChunks(row.artifact_id, 2, 9)).toEqual([chunks[2]]);
    expect(await store.readArtifactChunks(row.artifact_id, 5, 9)).toEqual([]);
    const read = await store.readArtifactChunks(row.artifact_id, 0, 0);
    expect(Buffer.isBuffer(read[0])).toBe(true);
  });

  it('shows an upload to nobody until it is finished', async () => {
    const row = artifact();
    expect(await store.beginArtifact(row)).toBe('ok');
    await store.putArtifactChunk(row.artifact_id, 0, Buffer.from('partial'));
    expect(await store.getArtifact(row.artifact_id)).toBeUndefined();
    expect(await store.getArtifactForOperators(row.artifact_id, [operatorId])).toBeUndefined();
    expect(await store.listArtifacts([operatorId], { page: 1, size: 10 })).toEqual({
      total: 0,
      page: 1,
      size: 10,
      items: [],
    });
    expect(await store.readArtifactChunks(row.artifact_id, 0, 0)).toEqual([]);
    expect(await store.finishArtifact(row.artifact_id, { sha256: 'cd'.repeat(32), size: 7 })).toMatchObject({
      status: 'ready',
    });
    expect(await store.readArtifactChunks(row.artifact_id, 0, 0)).toEqual([Buffer.from('partial')]);
    // Finished once: a second finish finds no upload.
    expect(await store.finishArtifact(row.artifact_id, { sha256: 'cd'.repeat(32), size: 7 })).toBeUndefined();
  });

  it('takes a release once per operator, uploading or ready, and again after its deletion', async () => {
    const first = artifact();
    expect(await store.beginArtifact(first)).toBe('ok');
    expect(await store.beginArtifact(artifact())).toBe('duplicate');
    await store.finishArtifact(first.artifact_id, { sha256: 'ab'.repeat(32), size: 1 });
    expect(await store.beginArtifact(artifact())).toBe('duplicate');
    // Another version, kind, target or operator is another release.
    expect(await store.beginArtifact(artifact({ version: '1.0.1' }))).toBe('ok');
    expect(await store.beginArtifact(artifact({ kind: 'agent' }))).toBe('ok');
    expect(await store.beginArtifact(artifact({ target: 'model-x' }))).toBe('ok');
    const other = await store.createOperator('B');
    expect(await store.beginArtifact(artifact({ operator_id: other.operator_id }))).toBe('ok');

    expect(await store.deleteArtifact(first.artifact_id)).toBe(true);
    expect(await store.beginArtifact(artifact())).toBe('ok');
  });

  it('lists ready artifacts newest first, by kind, within the operators given, in pages', async () => {
    const other = await store.createOperator('B');
    const a = await upload(artifact({ version: '1', created_ms: T0 + 1 }), [Buffer.from('a')]);
    const b = await upload(artifact({ version: '2', kind: 'agent', created_ms: T0 + 2 }), [Buffer.from('b')]);
    // Same time: the larger id first.
    const c1 = artifact({ version: '3', created_ms: T0 + 3, artifact_id: 'art_000000000000000000c1' });
    const c2 = artifact({ version: '4', created_ms: T0 + 3, artifact_id: 'art_000000000000000000c2' });
    const c = [await upload(c1, [Buffer.from('c')]), await upload(c2, [Buffer.from('c')])];
    const theirs = await upload(artifact({ operator_id: other.operator_id, created_ms: T0 + 9 }), [
      Buffer.from('x'),
    ]);

    const all = await store.listArtifacts([operatorId], { page: 1, size: 10 });
    expect(all).toEqual({ total: 4, page: 1, size: 10, items: [c[1], c[0], b, a] });
    expect(await store.listArtifacts([operatorId], { page: 2, size: 3 })).toEqual({
      total: 4,
      page: 2,
      size: 3,
      items: [a],
    });
    expect(await store.listArtifacts([operatorId], { kind: 'agent', page: 1, size: 10 })).toEqual({
      total: 1,
      page: 1,
      size: 10,
      items: [b],
    });
    expect((await store.listArtifacts([operatorId, other.operator_id], { page: 1, size: 1 })).items).toEqual([
      theirs,
    ]);
    expect(await store.listArtifacts([], { page: 1, size: 10 })).toMatchObject({ total: 0, items: [] });

    // Tenancy: another operator's artifact is not found for this one, but is for the charger download.
    expect(await store.getArtifactForOperators(theirs.artifact_id, [operatorId])).toBeUndefined();
    expect(await store.getArtifact(theirs.artifact_id)).toEqual(theirs);
  });

  it('deletes an artifact with its chunks, whatever its state, and then takes no more chunks', async () => {
    const ready = await upload(artifact(), [Buffer.from('one'), Buffer.from('two')]);
    expect(await store.deleteArtifact(ready.artifact_id)).toBe(true);
    expect(await store.getArtifact(ready.artifact_id)).toBeUndefined();
    expect(await store.readArtifactChunks(ready.artifact_id, 0, 9)).toEqual([]);
    expect(await store.deleteArtifact(ready.artifact_id)).toBe(false);

    const uploading = artifact({ version: '2' });
    await store.beginArtifact(uploading);
    await store.putArtifactChunk(uploading.artifact_id, 0, Buffer.from('one'));
    expect(await store.deleteArtifact(uploading.artifact_id)).toBe(true);
    // The upload goes on writing: nothing is stored, and finishing finds it gone.
    await store.putArtifactChunk(uploading.artifact_id, 1, Buffer.from('two'));
    expect(
      await store.finishArtifact(uploading.artifact_id, { sha256: 'ab'.repeat(32), size: 6 }),
    ).toBeUndefined();
    expect(await store.readArtifactChunks(uploading.artifact_id, 0, 9)).toEqual([]);
    expect(await store.deleteArtifact('art_missing')).toBe(false);
  });

  it('names the uploads still under way that began before a time', async () => {
    const old = artifact({ version: '1', created_ms: T0 - 10_000 });
    const recent = artifact({ version: '2', created_ms: T0 });
    const done = artifact({ version: '3', created_ms: T0 - 20_000 });
    await store.beginArtifact(old);
    await store.beginArtifact(recent);
    await upload(done, [Buffer.from('x')]);
    expect(await store.staleArtifactUploads(T0 - 1)).toEqual([old.artifact_id]);
    expect((await store.staleArtifactUploads(T0 + 1)).sort()).toEqual(
      [old.artifact_id, recent.artifact_id].sort(),
    );
  });
});
