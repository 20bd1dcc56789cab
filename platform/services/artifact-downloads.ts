import type { Readable } from 'node:stream';
import type { Logger } from 'pino';
import { ErrorCode } from '../../shared/index.js';
import { ApiError, errors } from '../domain/api-error.js';
import type { ArtifactFileCache } from '../storage/artifact-file-cache.js';
import type { Store } from '../storage/store.js';
import { chunkedFile, chunkStream, downloadHeaders, downloadRange } from './chunked-download.js';
import { createBufferPool, fileDownloadBody } from './file-download-body.js';
import { createTickBudget } from './tick-budget.js';

/** Downloads one instance serves at once (DESIGN.md §19); more are told to come back (429, Retry-After). */
export const DOWNLOADS_PER_INSTANCE = 64;
/** Chunks read and handed to sockets per turn of the event loop, across every download of the instance. */
const CHUNKS_PER_TICK = 4;
/** What a download reads from the local copy at once, into a pooled buffer (file-download-body.ts). */
const FILE_READ_BYTES = 128 * 1024;
/** File reads per turn of the event loop, across every download of the instance. */
const FILE_READS_PER_TICK = 8;
/** Seconds a charger turned away waits before it asks again. */
export const DOWNLOAD_RETRY_AFTER_SECONDS = 30;

export interface ArtifactDownload {
  status: 200 | 206;
  headers: Record<string, string>;
  body: Readable;
}

/** An artifact's stored chunks, as a download reads them. */
const storedChunks = (
  store: Pick<Store, 'readArtifactChunks'>,
  artifact: { artifact_id: string; chunk_bytes: number },
) =>
  chunkedFile(`artifact ${artifact.artifact_id}`, artifact.chunk_bytes, (first, last) =>
    store.readArtifactChunks(artifact.artifact_id, first, last),
  );

/**
 * Artifact downloads by chargers (DESIGN.md §19): only a charger that was sent an update of the artifact may
 * fetch it; `Range` answers 206 with the part (a resumed download), the ETag is the file's sha256, and at most
 * `limit` downloads run at once on this instance. The bytes come from the instance's local copy of the artifact
 * (storage/artifact-file-cache.ts) when it has a cache, read into buffers the downloads share
 * (file-download-body.ts); from the stored chunks when it has none or the copy cannot be made (a full disk). Either
 * way a few reads per turn of the event loop, whatever the number of downloads: the charger API stays responsive.
 */
export function createArtifactDownloads(deps: {
  store: Pick<Store, 'getArtifact' | 'readArtifactChunks' | 'deviceHasUpdateFor'>;
  limit?: number;
  cache?: ArtifactFileCache;
  logger?: Pick<Logger, 'warn'>;
}) {
  const limit = deps.limit ?? DOWNLOADS_PER_INSTANCE;
  let active = 0;
  const turn = createTickBudget(CHUNKS_PER_TICK);
  const fileTurn = createTickBudget(FILE_READS_PER_TICK);
  // Two buffers per download at most (one written, one read): kept for the next downloads.
  const pool = createBufferPool(FILE_READ_BYTES, 2 * limit);

  return {
    /** Downloads under way on this instance. */
    active: () => active,
    async open(
      deviceId: string,
      artifactId: string,
      request: { range?: string | undefined; ifRange?: string | undefined },
    ): Promise<ArtifactDownload> {
      // Another operator's artifact, or one this charger has no update for, is as good as missing.
      const [artifact, allowed] = await Promise.all([
        deps.store.getArtifact(artifactId),
        deps.store.deviceHasUpdateFor(deviceId, artifactId),
      ]);
      if (!artifact || !allowed) throw errors.notFound('Artifact');
      const etag = `"${artifact.sha256}"`;
      const range = downloadRange(request, artifact.size, etag);
      if (active >= limit) {
        throw new ApiError(ErrorCode.RATE_LIMITED, `This instance serves ${limit} downloads already`, {
          details: { retry_after_seconds: DOWNLOAD_RETRY_AFTER_SECONDS },
          headers: { 'retry-after': String(DOWNLOAD_RETRY_AFTER_SECONDS) },
        });
      }
      const { start, end } = range;
      // The slot is freed once the last chunk is read (a charger that takes its next download on the same
      // connection as soon as it has every byte must not find it still taken), or when the stream is torn down.
      let counted = true;
      const release = () => {
        if (counted) active -= 1;
        counted = false;
      };
      active += 1;
      let body: Readable;
      try {
        const file = deps.cache ? await deps.cache.fileOf(artifact) : undefined;
        body = file
          ? fileDownloadBody(file, { start, end }, { pool, turn: fileTurn, lastRead: release })
          : chunkStream(storedChunks(deps.store, artifact), range, { turn, lastRead: release });
      } catch (error) {
        deps.logger?.warn(
          { artifact_id: artifactId, err: (error as Error).message },
          'no local copy of the artifact: served from the stored chunks',
        );
        body = chunkStream(storedChunks(deps.store, artifact), range, { turn, lastRead: release });
      }
      body.once('end', release);
      body.once('close', release);
      const headers = downloadHeaders(range, {
        size: artifact.size,
        etag,
        contentType: 'application/octet-stream',
      });
      return { status: range.partial ? 206 : 200, headers, body };
    },
  };
}
export type ArtifactDownloads = ReturnType<typeof createArtifactDownloads>;
