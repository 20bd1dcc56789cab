/**
 * A local copy of each artifact an instance serves (DESIGN.md §19): the database keeps the artifact in chunks (the
 * truth, shared by every instance); downloads read this file instead, through the kernel's page cache and
 * libuv's thread pool, as a static file server would — no database read, no copy of a chunk into the heap per
 * download, nothing synchronous on the event loop. The copy is made from the chunks on the first download of
 * the artifact on this instance (one copy at a time per artifact), checked against the artifact's size and
 * sha256 before it is used, and written under a temporary name then renamed, so that a cut leaves no half copy
 * and several instances may share the directory.
 *
 * Artifacts never change once stored: a copy is good for as long as the artifact exists. A deleted artifact's copy
 * is removed by the instance that deleted it, and by every instance's pass at start (`prune`) otherwise.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { finished } from 'node:stream/promises';
import { everyChunk } from './chunk-reads.js';

/** What a copy is made from and checked against. */
export interface CachedArtifact {
  artifact_id: string;
  size: number;
  sha256: string;
  chunk_bytes: number;
}

export interface ArtifactFileCache {
  /** The path of a checked local copy of the artifact, made now if there is none. */
  fileOf(artifact: CachedArtifact): Promise<string>;
  /** Removes the copy of an artifact (deleted). */
  remove(artifactId: string): Promise<void>;
  /** Removes unfinished copies, and copies of artifacts `exists` no longer knows. */
  prune(exists: (artifactId: string) => Promise<boolean>): Promise<number>;
}

const TEMP_PREFIX = '.tmp-';
/** Artifact ids as the platform makes them (`art_…`): nothing else becomes a file name. */
const SAFE_ID = /^[A-Za-z0-9_-]{1,64}$/;
/** Chunks read from the database at once while a copy is made. */
const CHUNKS_PER_READ = 8;
/** A temporary copy this old was left by a cut (copies take seconds). */
const UNFINISHED_AFTER_MS = 10 * 60_000;

async function olderThan(file: string, ms: number): Promise<boolean> {
  const found = await stat(file).catch(() => undefined);
  return found !== undefined && Date.now() - found.mtimeMs > ms;
}

export function createArtifactFileCache(options: {
  dir: string;
  readChunks: (artifactId: string, first: number, last: number) => Promise<Buffer[]>;
}): ArtifactFileCache {
  const { dir } = options;
  const making = new Map<string, Promise<string>>();

  const fileName = (artifactId: string) => {
    if (!SAFE_ID.test(artifactId)) throw new Error(`not an artifact id: ${JSON.stringify(artifactId)}`);
    return path.join(dir, artifactId);
  };

  async function make(artifact: CachedArtifact, file: string): Promise<string> {
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const temp = path.join(dir, `${TEMP_PREFIX}${artifact.artifact_id}-${randomBytes(4).toString('hex')}`);
    const out = createWriteStream(temp, { mode: 0o600 });
    const hash = createHash('sha256');
    let written = 0;
    try {
      const chunks = everyChunk(
        (first, last) => options.readChunks(artifact.artifact_id, first, last),
        Math.ceil(artifact.size / artifact.chunk_bytes),
        CHUNKS_PER_READ,
        `artifact ${artifact.artifact_id}`,
      );
      for await (const chunk of chunks) {
        hash.update(chunk);
        written += chunk.length;
        if (!out.write(chunk)) await new Promise<void>((resolve) => out.once('drain', () => resolve()));
      }
      out.end();
      await finished(out);
      const sha256 = hash.digest('hex');
      if (written !== artifact.size || sha256 !== artifact.sha256)
        throw new Error(`artifact ${artifact.artifact_id} reads back as ${written} bytes, sha256 ${sha256}`);
      await rename(temp, file);
      return file;
    } catch (error) {
      // Closed first: a stream destroyed before its file is open creates the file after an rm that came first.
      if (!out.closed) await new Promise<void>((resolve) => out.once('close', () => resolve()).destroy());
      await rm(temp, { force: true });
      throw error;
    }
  }

  return {
    async fileOf(artifact) {
      const file = fileName(artifact.artifact_id);
      const found = await stat(file).catch(() => undefined);
      if (found?.size === artifact.size) return file;
      let pending = making.get(artifact.artifact_id);
      if (!pending) {
        pending = make(artifact, file).finally(() => making.delete(artifact.artifact_id));
        making.set(artifact.artifact_id, pending);
      }
      return pending;
    },
    async remove(artifactId) {
      await rm(fileName(artifactId), { force: true });
    },
    async prune(exists) {
      const entries = await readdir(dir).catch(() => [] as string[]);
      let removed = 0;
      for (const entry of entries) {
        // Another instance sharing the directory may be writing a copy now: only old unfinished ones go.
        const stale = entry.startsWith(TEMP_PREFIX)
          ? await olderThan(path.join(dir, entry), UNFINISHED_AFTER_MS)
          : !SAFE_ID.test(entry) || !(await exists(entry));
        if (!stale) continue;
        await rm(path.join(dir, entry), { force: true, recursive: true });
        removed += 1;
      }
      return removed;
    },
  };
}
