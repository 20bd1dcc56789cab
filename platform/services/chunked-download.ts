import { Readable } from 'node:stream';
import { ErrorCode } from '../../shared/index.js';
import { ApiError } from '../domain/api-error.js';
import { decideRange } from '../domain/byte-range.js';

/**
 * Downloads of files the database keeps in chunks (update artifacts, DESIGN.md §19; diagnostics archives, §20):
 * which bytes a request asks for, the answer's headers, and a body that reads one chunk at a time as the client
 * takes it, so that a slow client holds one chunk in memory, not its file.
 */

/** What a download served from the stored chunks writes to its socket at once. */
const SLICE_BYTES = 64 * 1024;

/** A file in the database: every chunk but the last is `chunkBytes`. */
export interface ChunkedFile {
  /** Names the file in errors. */
  id: string;
  chunkBytes: number;
  /** Chunk `index` (0-based); undefined when it is gone (the file was deleted while it was served). */
  read(index: number): Promise<Buffer | undefined>;
}

/** A file whose chunks `readChunks(first, last)` reads; `id` names it in errors. */
export function chunkedFile(
  id: string,
  chunkBytes: number,
  readChunks: (first: number, last: number) => Promise<Buffer[]>,
): ChunkedFile {
  return { id, chunkBytes, read: async (index) => (await readChunks(index, index))[0] };
}

/** The bytes of a file an answer carries: the whole file (200) or one range of it (206). */
export interface DownloadRange {
  start: number;
  end: number;
  partial: boolean;
}

/**
 * What a request's `Range` and `If-Range` ask of a file of `size` bytes whose ETag is `etag`
 * (domain/byte-range.ts); a range starting past the end answers 416 with the size.
 */
export function downloadRange(
  request: { range?: string | undefined; ifRange?: string | undefined },
  size: number,
  etag: string,
): DownloadRange {
  const decision = decideRange(request.range, request.ifRange, size, etag);
  if (decision.kind === 'unsatisfiable') {
    throw new ApiError(ErrorCode.VALIDATION, `Range not satisfiable: the file has ${size} bytes`, {
      status: 416,
      headers: { 'content-range': `bytes */${size}` },
    });
  }
  return decision.kind === 'partial'
    ? { start: decision.start, end: decision.end, partial: true }
    : { start: 0, end: size - 1, partial: false };
}

/** The headers of an answer carrying `range` of a file of `size` bytes. */
export function downloadHeaders(
  range: DownloadRange,
  file: { size: number; etag: string; contentType: string },
): Record<string, string> {
  const headers: Record<string, string> = {
    'content-type': file.contentType,
    'content-length': String(range.end - range.start + 1),
    'accept-ranges': 'bytes',
    etag: file.etag,
    'cache-control': 'private, no-transform',
  };
  if (range.partial) headers['content-range'] = `bytes ${range.start}-${range.end}/${file.size}`;
  return headers;
}

/**
 * The bytes `start`..`end` (inclusive) of `file`, read one stored chunk at a time as the client takes them.
 * `turn` waits for the read's turn of the event loop (tick-budget.ts); `lastRead` is told once the last chunk is
 * read.
 */
export function chunkStream(
  file: ChunkedFile,
  range: { start: number; end: number },
  hooks: { turn: () => Promise<void>; lastRead: () => void },
): Readable {
  const { start, end } = range;
  const { chunkBytes } = file;
  async function* bytes(): AsyncGenerator<Buffer> {
    const first = Math.floor(start / chunkBytes);
    const last = Math.floor(end / chunkBytes);
    for (let index = first; index <= last; index++) {
      await hooks.turn();
      const chunk = await file.read(index);
      // Deleted while it was being read: the answer ends short, which the client's size check catches.
      if (!chunk) throw new Error(`${file.id} lost chunk ${index} while it was served`);
      const base = index * chunkBytes;
      const from = Math.max(start - base, 0);
      const to = Math.min(end - base + 1, chunk.length);
      if (index === last) hooks.lastRead();
      // Handed over in slices: a socket's buffer then holds a slice, not a chunk, while its client reads.
      for (let at = from; at < to; at += SLICE_BYTES)
        yield chunk.subarray(at, Math.min(at + SLICE_BYTES, to));
    }
  }
  return Readable.from(bytes(), { objectMode: false });
}
