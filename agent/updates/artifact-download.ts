/**
 * Downloads an update's artifact to `DIR/<artifact_id>.part` (DESIGN.md §19, "The agent"), resuming after a cut
 * or a restart: the part file is the download's state, its length where to go on from (`Range: bytes=N-`, with
 * `If-Range` on the sha256 the platform gives as ETag, so a changed file is sent whole and started over).
 *
 * - Free disk is checked before starting: the bytes still to come plus `DISK_MARGIN_BYTES` (the store, logs and
 *   the agent go on writing meanwhile); too little refuses the download rather than fill the disk.
 * - 429 waits the platform's Retry-After (plus jitter, core/backoff.ts); network errors, 5xx and malformed
 *   answers back off and resume; 404 (no update for this artifact) and other refusals fail it.
 * - Progress is told in steps of 10 % (core/update-progress.ts), never per chunk.
 * - Complete, the part file is renamed to `DIR/<artifact_id>`; checking it is artifact-check.ts's job.
 * - Retries go on until the download ends or `signal` aborts (a shutdown): a charger offline for a day resumes
 *   when it is back. An abort leaves the part file for the next start.
 */
import { createWriteStream, promises as fs } from 'node:fs';
import path from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { type Clock, sleep } from '../clock.js';
import { DEFAULT_BACKOFF, nextDelayMs } from '../core/backoff.js';
import { progressToReport } from '../core/update-progress.js';
import type { ArtifactBody, ArtifactRequest } from '../link/platform-client.js';
import { isPlatformError } from '../link/platform-errors.js';

/** Room left for everything else on the disk while an artifact downloads. */
export const DISK_MARGIN_BYTES = 16 * 1024 * 1024;

/** Where the bytes come from: the platform client's `downloadArtifact` (tests serve their own). */
export type ArtifactSource = (artifactId: string, request: ArtifactRequest) => Promise<ArtifactBody>;

/** Free bytes for an unprivileged writer on the file system holding `dir`. */
export type FreeSpaceReader = (dir: string) => Promise<number>;

export const freeSpaceOf: FreeSpaceReader = async (dir) => {
  const s = await fs.statfs(dir);
  return s.bavail * s.bsize;
};

export interface DownloadRequest {
  dir: string;
  artifactId: string;
  size: number;
  sha256: string;
  source: ArtifactSource;
  clock: Clock;
  random?: () => number;
  freeSpace?: FreeSpaceReader;
  /** A new 10 % step reached (10..90). */
  onProgress?: (percent: number) => void;
  /** Each failed attempt that will be retried, for the log. */
  onRetry?: (error: Error, delayMs: number) => void;
  signal?: AbortSignal;
  /** Progress already reported (a resumed download does not report its steps again). */
  reported?: number;
}

/**
 * `failed`: the download cannot succeed (no disk, no such artifact, a refusal); `size_mismatch`: the platform's
 * file is not the manifest's size — the artifact does not match its manifest, as a checked file would show;
 * `aborted`: the agent stops, the part file stays for the next start.
 */
export type DownloadResult =
  | { ok: true; file: string }
  | { ok: false; kind: 'failed' | 'size_mismatch' | 'aborted'; reason: string };

export function artifactFiles(dir: string, artifactId: string): { part: string; file: string } {
  const file = path.join(dir, artifactId);
  return { part: `${file}.part`, file };
}

async function sizeOf(file: string): Promise<number | undefined> {
  try {
    return (await fs.stat(file)).size;
  } catch {
    return undefined;
  }
}

/** Bytes from a 206's `Content-Range: bytes N-M/T`, or undefined when it is not one. */
function rangeStartOf(answer: ArtifactBody): number | undefined {
  const raw = answer.headers['content-range'];
  const match = /^bytes (\d+)-\d+\/(\d+|\*)$/.exec(Array.isArray(raw) ? (raw[0] ?? '') : (raw ?? ''));
  return match ? Number(match[1]) : undefined;
}

class SizeMismatch extends Error {}

/** The whole file's size as the answer declares it (Content-Range's total, or a 200's Content-Length). */
function declaredTotalOf(answer: ArtifactBody): number | undefined {
  const header = answer.status === 206 ? answer.headers['content-range'] : answer.headers['content-length'];
  const raw = Array.isArray(header) ? header[0] : header;
  const match = answer.status === 206 ? /\/(\d+)$/.exec(raw ?? '') : /^(\d+)$/.exec(raw ?? '');
  return match ? Number(match[1]) : undefined;
}

/** Appends the answer's body to `part`, counting bytes for progress; refuses bytes past `size`. */
async function appendBody(answer: ArtifactBody, part: string, from: number, req: DownloadRequest) {
  let bytes = from;
  let reported = req.reported;
  const counter = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      bytes += chunk.length;
      if (bytes > req.size) {
        done(new SizeMismatch(`the platform sent more than the manifest's ${req.size} bytes`));
        return;
      }
      const step = progressToReport(reported, bytes, req.size);
      if (step !== undefined) {
        reported = step;
        req.onProgress?.(step);
      }
      done(null, chunk);
    },
  });
  try {
    await pipeline(answer.body, counter, createWriteStream(part, { flags: from === 0 ? 'w' : 'a' }));
  } finally {
    req.reported = reported;
  }
}

/** How a request ended when it did not throw (a throw is retried after a backoff). */
type Attempt =
  | { done: true }
  | { done: false; restart?: boolean; fail?: { kind: 'failed' | 'size_mismatch'; reason: string } };

/** One request: what it appended and what to do next. */
async function attempt(req: DownloadRequest, part: string, from: number): Promise<Attempt> {
  let answer: ArtifactBody;
  try {
    answer = await req.source(req.artifactId, {
      ...(from > 0 ? { from, ifRange: req.sha256 } : {}),
      ...(req.signal ? { signal: req.signal } : {}),
    });
  } catch (error) {
    if (!isPlatformError(error)) throw error;
    if (error.status === 416) return { done: false, restart: true }; // our part file is not a prefix of theirs
    if (error.kind === 'not_found') {
      const reason = `the platform has no such artifact for this charger (${error.message})`;
      return { done: false, fail: { kind: 'failed', reason } };
    }
    if (!error.retryable && error.kind !== 'unauthorized')
      return { done: false, fail: { kind: 'failed', reason: error.message } };
    throw error;
  }
  if (from > 0 && answer.status === 206 && rangeStartOf(answer) !== from) {
    answer.body.destroy();
    return { done: false, restart: true };
  }
  const total = declaredTotalOf(answer);
  if (total !== undefined && total !== req.size) {
    answer.body.destroy();
    const reason = `the platform's file has ${total} bytes, the manifest says ${req.size}`;
    return { done: false, fail: { kind: 'size_mismatch', reason } };
  }
  // A 200 to a range request: the file changed or the server ignores ranges; the whole file comes again.
  const start = answer.status === 206 ? from : 0;
  try {
    await appendBody(answer, part, start, req);
  } catch (error) {
    if (error instanceof SizeMismatch)
      return { done: false, fail: { kind: 'size_mismatch', reason: error.message } };
    throw error;
  }
  if ((await sizeOf(part)) !== req.size) throw new Error('the answer ended before the whole file came');
  return { done: true };
}

export async function downloadArtifact(req: DownloadRequest): Promise<DownloadResult> {
  const { part, file } = artifactFiles(req.dir, req.artifactId);
  await fs.mkdir(req.dir, { recursive: true, mode: 0o700 });
  if ((await sizeOf(file)) === req.size) return { ok: true, file };
  let from = (await sizeOf(part)) ?? 0;
  if (from > req.size) {
    await fs.rm(part, { force: true });
    from = 0;
  }
  const need = req.size - from + DISK_MARGIN_BYTES;
  const have = await (req.freeSpace ?? freeSpaceOf)(req.dir);
  if (have < need)
    return { ok: false, kind: 'failed', reason: `not enough disk: need ${need} bytes, have ${have}` };

  const random = req.random ?? Math.random;
  let failures = 0;
  while (from < req.size) {
    if (req.signal?.aborted)
      return { ok: false, kind: 'aborted', reason: 'download interrupted (the agent stops)' };
    try {
      const outcome = await attempt(req, part, from);
      if (outcome.done) break;
      if (outcome.fail !== undefined) {
        await fs.rm(part, { force: true });
        return { ok: false, ...outcome.fail };
      }
      if (outcome.restart) await fs.rm(part, { force: true });
    } catch (error) {
      if (req.signal?.aborted) continue;
      // A cut after some progress starts the backoff over: only failures in a row lengthen it.
      if (((await sizeOf(part)) ?? 0) > from) failures = 0;
      const retryAfter = isPlatformError(error) ? error.retryAfterSeconds : undefined;
      const delay = nextDelayMs(failures, {
        ...DEFAULT_BACKOFF,
        random,
        ...(retryAfter !== undefined ? { retryAfterSeconds: retryAfter } : {}),
      });
      failures += 1;
      req.onRetry?.(error as Error, delay);
      await sleep(req.clock, delay, req.signal);
    }
    from = (await sizeOf(part)) ?? 0;
  }
  await fs.rename(part, file);
  return { ok: true, file };
}
