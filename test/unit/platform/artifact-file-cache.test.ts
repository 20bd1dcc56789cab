import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, utimesSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createArtifactFileCache } from '../../../platform/storage/artifact-file-cache.js';
import { tempDir } from '../../helpers/agent.js';

/**
 * The instance's local copies of artifacts (storage/artifact-file-cache.ts), on real files: made once from the
 * stored chunks however many downloads ask at once, checked against size and sha256 before use, never left half
 * made, removed with their artifact, pruned at start.
 */
const CHUNK = 1024;
let tmp: ReturnType<typeof tempDir>;
let dir: string;

beforeEach(() => {
  tmp = tempDir('artifact-cache-');
  dir = path.join(tmp.dir, 'cache');
});
afterEach(() => tmp.remove());

/** An artifact of `size` random bytes stored in chunks, and a chunk reader that counts its calls. */
function stored(id: string, size: number) {
  const data = randomBytes(size);
  const chunks = Array.from({ length: Math.ceil(size / CHUNK) }, (_, i) =>
    data.subarray(i * CHUNK, (i + 1) * CHUNK),
  );
  const reads: Array<[number, number]> = [];
  const readChunks = async (artifactId: string, first: number, last: number) => {
    expect(artifactId).toBe(id);
    reads.push([first, last]);
    await new Promise((resolve) => setTimeout(resolve, 5));
    return chunks.slice(first, last + 1);
  };
  const artifact = {
    artifact_id: id,
    size,
    sha256: createHash('sha256').update(data).digest('hex'),
    chunk_bytes: CHUNK,
  };
  return { data, chunks, reads, readChunks, artifact };
}

describe('the artifact file cache', () => {
  it('makes one checked copy from the chunks however many downloads ask at once, then reads none', async () => {
    const a = stored('art_one', 20 * CHUNK + 17);
    const cache = createArtifactFileCache({ dir, readChunks: a.readChunks });
    const files = await Promise.all([1, 2, 3].map(() => cache.fileOf(a.artifact)));
    expect(new Set(files).size).toBe(1);
    expect(readFileSync(files[0]!).equals(a.data)).toBe(true);
    // 21 chunks, eight at a time: three reads, each chunk once.
    expect(a.reads).toEqual([
      [0, 7],
      [8, 15],
      [16, 20],
    ]);
    await cache.fileOf(a.artifact);
    expect(a.reads).toHaveLength(3);
    expect(readdirSync(dir)).toEqual(['art_one']);
  });

  it('refuses a copy that does not read back as the artifact, and leaves no file behind', async () => {
    const a = stored('art_bad', 3 * CHUNK);
    a.chunks[1] = Buffer.alloc(CHUNK, 1);
    const cache = createArtifactFileCache({ dir, readChunks: a.readChunks });
    await expect(cache.fileOf(a.artifact)).rejects.toThrow(/reads back as 3072 bytes, sha256/);
    expect(readdirSync(dir)).toEqual([]);
    // A chunk missing from the store.
    const b = stored('art_short', 3 * CHUNK);
    const short = createArtifactFileCache({ dir, readChunks: async () => b.chunks.slice(0, 1) });
    await expect(short.fileOf(b.artifact)).rejects.toThrow(/lost chunks/);
    expect(readdirSync(dir)).toEqual([]);
  });

  it('makes the copy again when the file on disk is not the artifact’s size', async () => {
    const a = stored('art_cut', 4 * CHUNK);
    const cache = createArtifactFileCache({ dir, readChunks: a.readChunks });
    const file = await cache.fileOf(a.artifact);
    writeFileSync(file, a.data.subarray(0, 100));
    expect(readFileSync(await cache.fileOf(a.artifact)).equals(a.data)).toBe(true);
    expect(a.reads).toHaveLength(2);
  });

  it('never takes a name that is not an artifact id', async () => {
    const a = stored('../escape', CHUNK);
    const cache = createArtifactFileCache({ dir, readChunks: a.readChunks });
    await expect(cache.fileOf(a.artifact)).rejects.toThrow(/not an artifact id/);
    await expect(cache.remove('a/b')).rejects.toThrow(/not an artifact id/);
    expect(existsSync(path.join(tmp.dir, 'escape'))).toBe(false);
  });

  it('removes a deleted artifact’s copy, and prunes what no artifact or no writer owns any more', async () => {
    const kept = stored('art_kept', CHUNK);
    const gone = stored('art_gone', CHUNK);
    const cache = createArtifactFileCache({ dir, readChunks: kept.readChunks });
    await cache.fileOf(kept.artifact);
    await createArtifactFileCache({ dir, readChunks: gone.readChunks }).fileOf(gone.artifact);
    await cache.remove('art_kept');
    expect(readdirSync(dir)).toEqual(['art_gone']);
    await cache.fileOf(kept.artifact);
    // A copy another instance is writing now, and one a cut left an hour ago.
    writeFileSync(path.join(dir, '.tmp-art_new-0001'), 'x');
    writeFileSync(path.join(dir, '.tmp-art_old-0002'), 'x');
    const hourAgo = new Date(Date.now() - 3_600_000);
    utimesSync(path.join(dir, '.tmp-art_old-0002'), hourAgo, hourAgo);
    const removed = await cache.prune(async (id) => id === 'art_kept');
    expect(removed).toBe(2);
    expect(readdirSync(dir).sort()).toEqual(['.tmp-art_new-0001', 'art_kept']);
    // No directory yet: nothing to prune.
    expect(
      await createArtifactFileCache({ dir: path.join(tmp.dir, 'none'), readChunks: kept.readChunks }).prune(
        async () => false,
      ),
    ).toBe(0);
  });
});
