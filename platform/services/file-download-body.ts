import { close, open, read } from 'node:fs';
import { Readable, type Writable } from 'node:stream';

/**
 * Buffers of one size kept for reuse (at most `keep` of them): a download's reads go into buffers the instance
 * already has instead of a fresh allocation per read. At 500 MiB/s, fresh 64 KiB buffers are 8,000 allocations a
 * second of memory outside V8's heap, which V8 collects only after tens of MiB have piled up (the bare static
 * server of bench:updates grows by over 100 MiB serving them).
 */
export function createBufferPool(size: number, keep: number) {
  const free: Buffer[] = [];
  return {
    size,
    take: (): Buffer => free.pop() ?? Buffer.allocUnsafeSlow(size),
    give(buffer: Buffer): void {
      if (free.length < keep) free.push(buffer);
    },
    /** Buffers kept now. */
    kept: () => free.length,
  };
}
export type BufferPool = ReturnType<typeof createBufferPool>;

export interface FileBodyHooks {
  pool: BufferPool;
  /** Waits for the read's turn of the event loop (tick-budget.ts). */
  turn: () => Promise<void>;
  /** Told once, when the last byte of the range is read. */
  lastRead: () => void;
}

/**
 * The bytes `start`..`end` (inclusive) of `file` as a download's body (DESIGN.md §19). Piped to a response (as
 * Fastify sends a stream), it reads into pooled buffers, each handed back once the socket has written it, and
 * reads the next while the previous is written: two buffers per download at most, none allocated in the steady
 * state. Read any other way, it reads into fresh buffers, as a file stream does.
 */
export function fileDownloadBody(
  file: string,
  range: { start: number; end: number },
  hooks: FileBodyHooks,
): Readable {
  let position = range.start;
  let stopped = false;
  let piped = false;
  const handle = fileHandle(file);

  /** Reads the next part of the range into `buffer`; the number of bytes read. */
  async function readNext(buffer: Buffer): Promise<number> {
    await hooks.turn();
    const length = Math.min(buffer.length, range.end - position + 1);
    const bytes = await handle.read(buffer, length, position);
    // The copy is shorter than the artifact (copies are checked, so it cannot be): never end short quietly.
    if (bytes === 0) throw new Error(`${file} ended at byte ${position} of ${range.end + 1}`);
    position += bytes;
    if (position > range.end) hooks.lastRead();
    return bytes;
  }

  /** Reads the next part into a pooled buffer; a failure is the caller's when it awaits, never unhandled. */
  function readAhead() {
    if (position > range.end) return undefined;
    const buffer = hooks.pool.take();
    const next = readNext(buffer).then((bytes) => ({ buffer, bytes }));
    next.catch(() => undefined);
    return next;
  }

  async function pump(destination: Writable, end: boolean): Promise<void> {
    let writing: Promise<void> | undefined;
    let next = readAhead();
    while (next && !stopped && !destination.destroyed) {
      const { buffer, bytes } = await next;
      // The buffer written before this one is back in the pool before another is read: two buffers at most, one
      // being written while the next is read, and none reused before the socket has written it.
      await writing;
      if (stopped || destination.destroyed) break;
      next = readAhead();
      writing = written(destination, buffer.subarray(0, bytes), () => hooks.pool.give(buffer));
    }
    if (stopped) return;
    // The client went away: the body ends with it (Fastify would destroy it too).
    if (destination.destroyed) {
      body.destroy();
      return;
    }
    // As Readable.pipe: the destination ends with the body unless the caller asked otherwise (`{ end: false }`).
    if (end) destination.end();
    body.push(null);
  }

  const body = new Readable({
    read() {
      if (piped) return;
      if (position > range.end) {
        body.push(null);
        return;
      }
      const buffer = Buffer.allocUnsafe(Math.min(hooks.pool.size, range.end - position + 1));
      readNext(buffer).then(
        (bytes) => body.push(buffer.subarray(0, bytes)),
        (error: Error) => body.destroy(error),
      );
    },
    destroy(error, callback) {
      stopped = true;
      handle.close();
      callback(error);
    },
  });
  body.pipe = <T extends NodeJS.WritableStream>(destination: T, options?: { end?: boolean }): T => {
    piped = true;
    // Flowing, with nothing pushed but the end: 'end' and 'close' come as for any piped stream.
    body.resume();
    pump(destination as unknown as Writable, options?.end !== false).catch((error: Error) =>
      body.destroy(error),
    );
    return destination;
  };
  return body;
}

/**
 * The file, opened on the first read; closed when asked once no read is under way (a descriptor closed under a
 * read could be reused by another file before the read runs).
 */
function fileHandle(file: string) {
  let opened: Promise<number> | undefined;
  let reading = 0;
  let closing = false;
  const closeNow = () => {
    opened?.then(
      (fd) => close(fd, () => undefined),
      () => undefined,
    );
    opened = undefined;
  };
  return {
    async read(buffer: Buffer, length: number, position: number): Promise<number> {
      if (closing) throw new Error(`${file} is closed`);
      opened ??= new Promise((resolve, reject) =>
        open(file, 'r', (error, fd) => (error ? reject(error) : resolve(fd))),
      );
      reading += 1;
      try {
        const fd = await opened;
        return await new Promise((resolve, reject) =>
          read(fd, buffer, 0, length, position, (error, bytes) => (error ? reject(error) : resolve(bytes))),
        );
      } finally {
        reading -= 1;
        if (closing && reading === 0) closeNow();
      }
    },
    close(): void {
      closing = true;
      if (reading === 0) closeNow();
    },
  };
}

/**
 * Writes `chunk`; resolves once the destination has written it (then `done`, the chunk being free again) or is
 * gone (a destroyed socket may never call back; its chunk is left to the garbage collector).
 */
function written(destination: Writable, chunk: Buffer, done: () => void): Promise<void> {
  return new Promise((resolve) => {
    const settle = () => {
      destination.off('close', settle);
      resolve();
    };
    destination.once('close', settle);
    destination.write(chunk, (error) => {
      if (!error) done();
      settle();
    });
  });
}
