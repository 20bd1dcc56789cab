import { createHash } from 'node:crypto';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import { DIAGNOSTICS_MAX_BYTES, type DiagnosticsUploadState, ErrorCode } from '../../shared/index.js';
import { ApiError, errors } from '../domain/api-error.js';
import {
  type ContentRange,
  parseContentRange,
  tooLargeArchive,
  uploadConflict,
} from '../domain/diagnostics.js';
import { everyChunk } from '../storage/chunk-reads.js';
import type { DiagnosticsRow, Store } from '../storage/store.js';

/**
 * An archive that unpacks to more than this is refused as it is checked (a gzip bomb would otherwise keep zlib
 * busy for minutes): a charger's archive of at most 20 MiB of compressed logs unpacks to far less.
 */
export const DIAGNOSTICS_MAX_UNPACKED_BYTES = 100 * DIAGNOSTICS_MAX_BYTES;
/** Chunks read at once while an archive is checked. */
const CHUNKS_PER_READ = 8;

export interface DiagnosticsUploadDeps {
  store: Pick<
    Store,
    | 'getDiagnostics'
    | 'beginDiagnosticsUpload'
    | 'putDiagnosticsChunk'
    | 'readDiagnosticsChunks'
    | 'finishDiagnostics'
    | 'failDiagnostics'
  >;
  now: () => number;
  /** Told once when a record becomes available, by the instance that made it so (webhooks). */
  available?: (row: DiagnosticsRow) => void;
}

/** What an upload's request says about its body. */
export interface UploadHeaders {
  contentRange: string | undefined;
  contentLength: string | undefined;
}

export function uploadState(row: DiagnosticsRow): DiagnosticsUploadState {
  return { diagnostics_id: row.diagnostics_id, status: row.status, received: row.received, size: row.size };
}

/** 409 with the record's state in `details`: the charger goes on from `received`. */
const conflict = (message: string, row: DiagnosticsRow) =>
  new ApiError(ErrorCode.CONFLICT, message, { details: { ...uploadState(row) } });

const tooLarge = (size: number) =>
  new ApiError(
    ErrorCode.MALFORMED_BODY,
    `Archive of ${size} bytes: the platform takes at most ${DIAGNOSTICS_MAX_BYTES}`,
    { status: 413 },
  );

class TooMuchUnpacked extends Error {}

/** zlib's own errors (a corrupt or cut archive), as opposed to a failing read of the chunks. */
const isZlibError = (err: unknown) => {
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' && code.startsWith('Z_');
};

/**
 * Diagnostics uploads by chargers (DESIGN.md §20): the charger sends its archive with `Content-Range`, in one
 * request or several (after a cut it asks how much the platform holds and sends the rest). Bytes are stored
 * as they arrive, a chunk at a time, each with a compare-and-set of `received`: a request cut halfway leaves
 * every chunk it completed, and two requests for one record cannot interleave. Once every byte is stored the
 * platform measures the sha256 and unpacks the archive through zlib: a corrupt one fails the request.
 */
export function createDiagnosticsUploads(deps: DiagnosticsUploadDeps) {
  const { store, now } = deps;

  /** The charger's own request; another charger's answers like a missing one. */
  async function own(deviceId: string, diagnosticsId: string): Promise<DiagnosticsRow> {
    const row = await store.getDiagnostics(diagnosticsId);
    if (!row || row.device_id !== deviceId) throw errors.notFound('Diagnostics');
    return row;
  }

  /** The archive's sha256, or why it is not a valid gzip archive. */
  async function check(row: DiagnosticsRow, size: number): Promise<{ sha256: string } | { reason: string }> {
    const hash = createHash('sha256');
    const stored = everyChunk(
      (first, last) => store.readDiagnosticsChunks(row.diagnostics_id, first, last),
      Math.ceil(size / row.chunk_bytes),
      CHUNKS_PER_READ,
      `diagnostics ${row.diagnostics_id}`,
    );
    async function* chunks(): AsyncGenerator<Buffer> {
      for await (const chunk of stored) {
        hash.update(chunk);
        yield chunk;
      }
    }
    let unpacked = 0;
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        unpacked += chunk.length;
        done(unpacked > DIAGNOSTICS_MAX_UNPACKED_BYTES ? new TooMuchUnpacked() : undefined);
      },
    });
    try {
      await pipeline(Readable.from(chunks()), createGunzip(), sink);
    } catch (err) {
      if (err instanceof TooMuchUnpacked)
        return { reason: `the archive unpacks to more than ${DIAGNOSTICS_MAX_UNPACKED_BYTES} bytes` };
      if (isZlibError(err)) return { reason: `the archive is not valid gzip: ${(err as Error).message}` };
      throw err;
    }
    return { sha256: hash.digest('hex') };
  }

  /**
   * A record holding every byte it was declared to have is checked and becomes available, or failed; whichever
   * instance gets there first decides (the others find it done).
   */
  async function settle(row: DiagnosticsRow): Promise<DiagnosticsRow> {
    if (row.status !== 'uploading' || row.size === null || row.received !== row.size) return row;
    const verdict = await check(row, row.size);
    const t = now();
    const after =
      'sha256' in verdict
        ? await store.finishDiagnostics(row.diagnostics_id, verdict.sha256, t)
        : await store.failDiagnostics(row.diagnostics_id, verdict.reason, t);
    if (after?.status === 'available') deps.available?.(after);
    return after ?? (await store.getDiagnostics(row.diagnostics_id)) ?? row;
  }

  /**
   * Stores the body, bytes `range.first`.. of the archive, chunk by chunk as it arrives. When the record ends
   * inside a chunk (an earlier request's last bytes), this request completes that chunk. The body's last bytes
   * are stored when it ends; a body cut short keeps only the chunks it completed.
   */
  async function receive(row: DiagnosticsRow, range: ContentRange, body: Readable): Promise<DiagnosticsRow> {
    const id = row.diagnostics_id;
    const chunkBytes = row.chunk_bytes;
    let index = Math.floor(range.first / chunkBytes);
    let stored = range.first;
    let chunk = Buffer.allocUnsafe(chunkBytes);
    let filled = range.first % chunkBytes;
    if (filled > 0) {
      const [last] = await store.readDiagnosticsChunks(id, index, index);
      if (last?.length !== filled)
        throw new Error(`diagnostics ${id}: chunk ${index} does not end at ${stored}`);
      last.copy(chunk);
    }
    const put = async (data: Buffer) => {
      if (!(await store.putDiagnosticsChunk(id, index, data, stored, now()))) {
        const current = await own(row.device_id, id);
        throw conflict('Another upload of this archive moved on meanwhile: send it from `received`', current);
      }
      stored = index * chunkBytes + data.length;
    };
    const expected = range.last - range.first + 1;
    let got = 0;
    for await (const piece of body as AsyncIterable<Buffer>) {
      got += piece.length;
      if (got > expected) {
        throw errors.validation({
          field: 'content-range',
          value: `bytes ${range.first}-${range.last}/${range.size}`,
          message: 'the body is longer than the range it names',
        });
      }
      for (let offset = 0; offset < piece.length; ) {
        const n = piece.copy(chunk, filled, offset);
        filled += n;
        offset += n;
        if (filled === chunkBytes) {
          await put(chunk);
          index += 1;
          chunk = Buffer.allocUnsafe(chunkBytes);
          filled = 0;
        }
      }
    }
    if (filled > 0 && stored < index * chunkBytes + filled) await put(chunk.subarray(0, filled));
    return own(row.device_id, id);
  }

  return {
    /** How much of the archive the platform holds (GET): the charger resumes from `received`. */
    async state(deviceId: string, diagnosticsId: string): Promise<DiagnosticsUploadState> {
      // A record every byte of which was stored by an instance that stopped before checking it is checked now.
      return uploadState(await settle(await own(deviceId, diagnosticsId)));
    },
    /**
     * Takes part of the archive (PUT): FIRST must be what the platform holds (else 409 with the state), SIZE
     * the same on every request and at most DIAGNOSTICS_MAX_BYTES (else 413). Answers the state after it; once
     * the last byte is stored, the final one (`available`, or `failed` with why).
     */
    async upload(
      deviceId: string,
      diagnosticsId: string,
      headers: UploadHeaders,
      body: Readable,
    ): Promise<DiagnosticsUploadState> {
      const range = parseContentRange(headers.contentRange);
      if (!range) {
        throw errors.validation({
          field: 'content-range',
          value: headers.contentRange,
          message: 'must be `bytes FIRST-LAST/SIZE` with FIRST ≤ LAST < SIZE',
        });
      }
      if (tooLargeArchive(range.size)) throw tooLarge(range.size);
      const length = range.last - range.first + 1;
      if (headers.contentLength !== undefined && Number(headers.contentLength) !== length) {
        throw errors.validation({
          field: 'content-length',
          value: headers.contentLength,
          message: `must be the length of the range Content-Range names (${length})`,
        });
      }
      const row = await settle(await own(deviceId, diagnosticsId));
      const refusal = uploadConflict(row, range);
      if (refusal) throw conflict(refusal, row);
      const begun = await store.beginDiagnosticsUpload(
        diagnosticsId,
        { received: range.first, size: range.size },
        now(),
      );
      if (!begun) {
        const current = await own(deviceId, diagnosticsId);
        throw conflict(uploadConflict(current, range) ?? 'The archive changed meanwhile: ask again', current);
      }
      return uploadState(await settle(await receive(begun, range, body)));
    },
  };
}
export type DiagnosticsUploads = ReturnType<typeof createDiagnosticsUploads>;
