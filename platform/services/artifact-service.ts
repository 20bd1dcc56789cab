import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import {
  ARTIFACT_CHUNK_BYTES,
  ARTIFACT_MAX_BYTES,
  ARTIFACT_SIGNATURE,
  ARTIFACT_SIGNATURE_HEADER,
  type Artifact,
  type ArtifactsQuery,
  type ArtifactUploadQuery,
  ErrorCode,
  toTimestamp,
} from '../../shared/index.js';
import { ApiError, errors } from '../domain/api-error.js';
import { newId } from '../domain/ids.js';
import type { ArtifactFileCache } from '../storage/artifact-file-cache.js';
import type { ArtifactRepository, ArtifactRow } from '../storage/artifact-repository.js';
import type { Page } from '../storage/page.js';
import type { TenantActor } from './tenancy.js';

/**
 * An upload still under way after this long was left by an instance that stopped mid-upload (a failing upload
 * removes itself): the sweep removes it. 512 MiB takes about 1.5 h at 100 KiB/s, far inside this.
 */
export const ABANDONED_UPLOAD_MS = 24 * 3600_000;

export interface ArtifactServiceDeps {
  store: ArtifactRepository;
  now: () => number;
  /** Whether a running or paused update uses the artifact (then it may not be deleted). */
  inUse?: (artifactId: string) => Promise<boolean>;
  /** This instance's local copies (a deleted artifact's goes with it). */
  cache?: Pick<ArtifactFileCache, 'remove'>;
}

export function artifactView(row: ArtifactRow): Artifact {
  return {
    artifact_id: row.artifact_id,
    kind: row.kind,
    version: row.version,
    target: row.target,
    sha256: row.sha256,
    size: row.size,
    signature: row.signature,
    created_at: toTimestamp(row.created_ms),
  };
}

/** Which of the caller's operators owns the upload: its only one, or the one the request names. */
function owningOperator(operatorIds: readonly string[], named: string | undefined): string {
  if (named !== undefined) {
    // Not one of the caller's: answered like a missing operator (tenancy, DESIGN.md §2).
    if (!operatorIds.includes(named)) throw errors.notFound('Operator');
    return named;
  }
  if (operatorIds.length === 1) return operatorIds[0]!;
  throw errors.validation({
    field: 'operator_id',
    value: undefined,
    message: 'this client acts for several operators: name the one that owns the artifact',
  });
}

function checkedSignature(signature: string | undefined): string {
  if (signature === undefined || !ARTIFACT_SIGNATURE.test(signature)) {
    throw errors.validation({
      field: ARTIFACT_SIGNATURE_HEADER,
      value: signature,
      message: 'required: the Ed25519 signature of the manifest in base64 (88 characters)',
    });
  }
  return signature;
}

const tooLarge = () =>
  new ApiError(ErrorCode.MALFORMED_BODY, `Artifact larger than ${ARTIFACT_MAX_BYTES} bytes`, { status: 413 });

/**
 * Reads `body` into chunks of `ARTIFACT_CHUNK_BYTES` and stores each as it fills, hashing on the way: the file is
 * never held whole (at most one chunk and the piece being read). The stream waits while a chunk is stored.
 */
async function storeChunks(
  store: ArtifactRepository,
  artifactId: string,
  body: Readable,
): Promise<{ sha256: string; size: number }> {
  const hash = createHash('sha256');
  let size = 0;
  let index = 0;
  let chunk = Buffer.allocUnsafe(ARTIFACT_CHUNK_BYTES);
  let filled = 0;
  for await (const piece of body as AsyncIterable<Buffer>) {
    size += piece.length;
    if (size > ARTIFACT_MAX_BYTES) throw tooLarge();
    hash.update(piece);
    let offset = 0;
    while (offset < piece.length) {
      const n = piece.copy(chunk, filled, offset);
      filled += n;
      offset += n;
      if (filled === ARTIFACT_CHUNK_BYTES) {
        await store.putArtifactChunk(artifactId, index++, chunk);
        chunk = Buffer.allocUnsafe(ARTIFACT_CHUNK_BYTES);
        filled = 0;
      }
    }
  }
  if (size === 0)
    throw new ApiError(ErrorCode.MALFORMED_BODY, 'Request body is empty; send the artifact file');
  if (filled > 0) await store.putArtifactChunk(artifactId, index, chunk.subarray(0, filled));
  return { sha256: hash.digest('hex'), size };
}

/**
 * Update artifacts (DESIGN.md §19): an operator's signed files. The platform keeps the OEM's signature as given
 * and does not verify it (it holds no OEM key; the charger verifies before installing); it measures size and
 * sha256 itself. Another operator's artifact answers like a missing one.
 */
export function createArtifactService(deps: ArtifactServiceDeps) {
  const { store } = deps;

  async function owned(actor: TenantActor, artifactId: string): Promise<ArtifactRow> {
    const row = await store.getArtifactForOperators(artifactId, actor.operatorIds);
    if (!row) throw errors.notFound('Artifact');
    return row;
  }

  return {
    /**
     * Stores `body` as a new release of the caller's operator. Whatever fails midway (the client going away,
     * the size limit, storage) removes what was stored of it.
     */
    async upload(
      operatorIds: readonly string[],
      query: ArtifactUploadQuery,
      signature: string | undefined,
      body: Readable,
      /** The request's Content-Length, when it gave one: too large a file is refused before it is read. */
      declaredBytes?: number,
    ): Promise<Artifact> {
      const checked = checkedSignature(signature);
      const operatorId = owningOperator(operatorIds, query.operator_id);
      if (declaredBytes !== undefined && declaredBytes > ARTIFACT_MAX_BYTES) throw tooLarge();
      const artifactId = newId('art');
      const begun = await store.beginArtifact({
        artifact_id: artifactId,
        operator_id: operatorId,
        kind: query.kind,
        version: query.version,
        target: query.target ?? '',
        signature: checked,
        chunk_bytes: ARTIFACT_CHUNK_BYTES,
        created_ms: deps.now(),
      });
      if (begun === 'duplicate') {
        throw errors.conflict(
          `This operator already has ${query.kind} ${query.version}${query.target ? ` for ${query.target}` : ''}`,
        );
      }
      try {
        const finished = await store.finishArtifact(artifactId, await storeChunks(store, artifactId, body));
        // Deleted while it was uploading.
        if (!finished) throw errors.notFound('Artifact');
        return artifactView(finished);
      } catch (err) {
        await store.deleteArtifact(artifactId).catch(() => undefined);
        throw err;
      }
    },
    async list(actor: TenantActor, query: ArtifactsQuery): Promise<Page<Artifact>> {
      const page = await store.listArtifacts(actor.operatorIds, query);
      return { ...page, items: page.items.map(artifactView) };
    },
    async get(actor: TenantActor, artifactId: string): Promise<Artifact> {
      return artifactView(await owned(actor, artifactId));
    },
    async delete(actor: TenantActor, artifactId: string): Promise<{ artifact_id: string; deleted: true }> {
      await owned(actor, artifactId);
      if (await deps.inUse?.(artifactId))
        throw errors.conflict('A running or paused update uses this artifact: cancel it first');
      await store.deleteArtifact(artifactId);
      await deps.cache?.remove(artifactId);
      return { artifact_id: artifactId, deleted: true };
    },
    /** Removes uploads an instance left unfinished (it died mid-upload) that began before `beforeMs`. */
    async removeStaleUploads(beforeMs: number): Promise<number> {
      const stale = await store.staleArtifactUploads(beforeMs);
      for (const id of stale) await store.deleteArtifact(id);
      return stale.length;
    },
  };
}
export type ArtifactService = ReturnType<typeof createArtifactService>;
