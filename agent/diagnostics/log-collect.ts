/**
 * The logs part of a diagnostics archive: the agent's log lines of a time window, from every rotated file in
 * `DIR/logs` (logger.ts, rotating-file.ts), oldest first, streamed into one file; and cutting that file down to
 * its newest lines when the archive would be too large. Memory stays at a chunk or two whatever the logs weigh.
 */
import { once } from 'node:events';
import { createWriteStream, type WriteStream } from 'node:fs';
import { type FileHandle, open, readdir, rename } from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import {
  fileSpan,
  firstLineTime,
  keepLine,
  lastLineTime,
  lineTimeMs,
  logFilesOldestFirst,
  overlaps,
  type TimeSpan,
  type TimeWindow,
} from './log-window.js';
import { cutOffset } from './truncation.js';

/** How much of each end of a file is read to find its first and last time. */
const EDGE_BYTES = 64 * 1024;

/** Lines are gathered into writes of about this size. */
const WRITE_CHUNK = 64 * 1024;

export interface LogSource {
  name: string;
  bytes: number;
  span: { start: string; end: string } | null;
  /** Whether its span meets the window: its lines without a time are kept only then. */
  overlaps: boolean;
  /** The window's lines taken from it (before any truncation for size). */
  kept_lines: number;
}

export interface CollectedLogs {
  lines: number;
  bytes: number;
  sources: LogSource[];
}

function isoOrNull(ms: number): string | null {
  const date = new Date(ms);
  return Number.isNaN(date.getTime()) ? null : date.toISOString();
}

async function readAt(handle: FileHandle, position: number, length: number): Promise<string> {
  const buffer = Buffer.alloc(length);
  const { bytesRead } = await handle.read(buffer, 0, length, position);
  return buffer.subarray(0, bytesRead).toString('utf8');
}

async function spanOf(handle: FileHandle, size: number, mtimeMs: number): Promise<TimeSpan> {
  const whole = size <= EDGE_BYTES;
  const head = await readAt(handle, 0, Math.min(size, EDGE_BYTES));
  const tail = whole ? head : await readAt(handle, size - EDGE_BYTES, EDGE_BYTES);
  return fileSpan(firstLineTime(head, whole), lastLineTime(tail, whole), mtimeMs);
}

/** Buffered writes that wait for the stream to drain, so a slow disk never piles the logs up in memory. */
function chunkedWriter(out: WriteStream) {
  let pending = '';
  const flush = async () => {
    if (pending === '') return;
    const chunk = pending;
    pending = '';
    if (!out.write(chunk)) await once(out, 'drain');
  };
  return {
    async line(text: string) {
      pending += `${text}\n`;
      if (pending.length >= WRITE_CHUNK) await flush();
    },
    async end() {
      await flush();
      out.end();
      await once(out, 'finish');
    },
  };
}

/** Opens every log file first: a rotation while they are read renames or unlinks paths, not open files. */
async function openLogFiles(logDir: string): Promise<Array<{ name: string; handle: FileHandle }>> {
  let names: string[];
  try {
    names = await readdir(logDir);
  } catch {
    return []; // no log directory: the agent has not logged here
  }
  const opened: Array<{ name: string; handle: FileHandle }> = [];
  for (const name of logFilesOldestFirst(names)) {
    try {
      opened.push({ name, handle: await open(path.join(logDir, name), 'r') });
    } catch {
      // rotated away between the listing and the open
    }
  }
  return opened;
}

/**
 * Streams the log lines of `window` from every file in `logDir` into `outFile` (created 0600), each passed
 * through `scrub` (secrets known by value), and says what it took from where.
 */
export async function collectLogLines(options: {
  logDir: string;
  window: TimeWindow;
  outFile: string;
  scrub: (line: string) => string;
}): Promise<CollectedLogs> {
  const { window, scrub } = options;
  const files = await openLogFiles(options.logDir);
  const out = createWriteStream(options.outFile, { mode: 0o600 });
  const writer = chunkedWriter(out);
  const sources: LogSource[] = [];
  let lines = 0;
  let bytes = 0;
  try {
    for (const { name, handle } of files) {
      // Up to the size now: the current file keeps growing while it is read (with this build's own lines).
      const { size, mtimeMs } = await handle.stat();
      const span = size > 0 ? await spanOf(handle, size, mtimeMs) : undefined;
      const fileOverlaps = span !== undefined && overlaps(span, window);
      let kept = 0;
      if (size > 0) {
        const input = handle.createReadStream({ start: 0, end: size - 1, autoClose: false });
        for await (const line of createInterface({ input, crlfDelay: Number.POSITIVE_INFINITY })) {
          if (line === '' || !keepLine(lineTimeMs(line), fileOverlaps, window)) continue;
          const text = scrub(line);
          await writer.line(text);
          kept += 1;
          bytes += Buffer.byteLength(text) + 1;
        }
      }
      lines += kept;
      const startIso = span && isoOrNull(span.startMs);
      const endIso = span && isoOrNull(span.endMs);
      sources.push({
        name,
        bytes: size,
        span: startIso && endIso ? { start: startIso, end: endIso } : null,
        overlaps: fileOverlaps,
        kept_lines: kept,
      });
    }
  } finally {
    await writer.end();
    await Promise.all(files.map(({ handle }) => handle.close().catch(() => undefined)));
  }
  return { lines, bytes, sources };
}

/** The first byte at or after `offset` that starts a line (`size` when no line starts there). */
async function lineStartFrom(handle: FileHandle, offset: number, size: number): Promise<number> {
  if (offset <= 0) return 0;
  const buffer = Buffer.alloc(WRITE_CHUNK);
  // The byte before the offset decides: a newline there means the offset already starts a line.
  for (let position = offset - 1; position < size; ) {
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, position);
    if (bytesRead === 0) break;
    const newline = buffer.subarray(0, bytesRead).indexOf(10);
    if (newline >= 0) return position + newline + 1;
    position += bytesRead;
  }
  return size;
}

function countNewlines(chunk: Buffer): number {
  let count = 0;
  for (let i = chunk.indexOf(10); i >= 0; i = chunk.indexOf(10, i + 1)) count += 1;
  return count;
}

/**
 * Keeps only the newest whole lines of `file`, at most `keepBytes` of them (the oldest go first), by copying the
 * tail to a new file and renaming it over the old one.
 */
export async function keepNewestLines(
  file: string,
  keepBytes: number,
): Promise<{ keptBytes: number; keptLines: number }> {
  const source = await open(file, 'r');
  const temp = `${file}.cut`;
  let keptLines = 0;
  let keptBytes = 0;
  try {
    const { size } = await source.stat();
    const start = await lineStartFrom(source, cutOffset(size, keepBytes), size);
    const out = createWriteStream(temp, { mode: 0o600 });
    if (start < size) {
      for await (const chunk of source.createReadStream({ start, end: size - 1, autoClose: false })) {
        const buffer = chunk as Buffer;
        keptLines += countNewlines(buffer);
        keptBytes += buffer.length;
        if (!out.write(buffer)) await once(out, 'drain');
      }
    }
    out.end();
    await once(out, 'finish');
  } finally {
    await source.close();
  }
  await rename(temp, file);
  return { keptBytes, keptLines };
}
