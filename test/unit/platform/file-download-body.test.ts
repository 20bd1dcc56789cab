import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { type Readable, Writable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createBufferPool, fileDownloadBody } from '../../../platform/services/file-download-body.js';
import { tempDir } from '../../helpers/agent.js';

/**
 * A download's body from the local copy of an artifact (services/file-download-body.ts), on a real file: every
 * range byte for byte, piped (as Fastify sends it) or read; piped, no more than two buffers per download, none
 * reused before the socket has written it; a client gone stops the reads; a file shorter than the range fails.
 */
const SIZE = 10_000;
const BUFFER = 1024;
let tmp: ReturnType<typeof tempDir>;
let file: string;
let data: Buffer;

beforeEach(() => {
  tmp = tempDir('file-body-');
  file = path.join(tmp.dir, 'artifact');
  data = randomBytes(SIZE);
  writeFileSync(file, data);
});
afterEach(() => tmp.remove());

/** A body of the range with a pool that records every buffer it hands out, and counts of turns and last reads. */
function bodyOf(start: number, end: number) {
  const pool = createBufferPool(BUFFER, 8);
  const handedOut = new Set<Buffer>();
  const counts = { turns: 0, lastReads: 0 };
  const recording = {
    ...pool,
    take() {
      const buffer = pool.take();
      handedOut.add(buffer);
      return buffer;
    },
  };
  const body = fileDownloadBody(
    file,
    { start, end },
    {
      pool: recording,
      turn: async () => {
        counts.turns += 1;
      },
      lastRead: () => {
        counts.lastReads += 1;
      },
    },
  );
  return { body, pool, handedOut, counts };
}

/**
 * A slow socket: takes a chunk, writes it a few milliseconds later, and checks at that moment that the chunk it
 * was given still holds what it held when given (a buffer reused too early would not).
 */
function slowSocket(highWaterMark = BUFFER) {
  const received: Buffer[] = [];
  let overwritten = 0;
  const socket = new Writable({
    highWaterMark,
    write(chunk: Buffer, _encoding, callback) {
      const copy = Buffer.from(chunk);
      setTimeout(() => {
        if (!copy.equals(chunk)) overwritten += 1;
        received.push(copy);
        callback();
      }, 2);
    },
  });
  return { socket, received: () => Buffer.concat(received), overwritten: () => overwritten };
}

function finished(body: Readable): Promise<void> {
  return new Promise((resolve, reject) => {
    body.once('close', () => resolve());
    body.once('error', reject);
  });
}

describe('a download body from a local file', () => {
  const ranges: Array<[string, number, number]> = [
    ['the whole file', 0, SIZE - 1],
    ['a middle part across buffers', 1000, 5000],
    ['the last byte', SIZE - 1, SIZE - 1],
    ['the first byte', 0, 0],
    ['two bytes across a buffer boundary', BUFFER - 1, BUFFER],
    ['exactly one buffer', BUFFER, 2 * BUFFER - 1],
  ];

  // A socket that pushes back after one buffer, and one that queues everything (write() always true).
  describe.each([
    ['pushes back', BUFFER],
    ['queues', 1 << 20],
  ])('piped to a socket that %s', (_kind, highWaterMark) => {
    it.each(ranges)('sends %s, byte for byte, with two buffers at most', async (_name, start, end) => {
      const { body, pool, handedOut, counts } = bodyOf(start, end);
      const { socket, received, overwritten } = slowSocket(highWaterMark);
      const socketDone = new Promise((resolve) => socket.once('finish', resolve));
      body.pipe(socket);
      await Promise.all([finished(body), socketDone]);
      expect(received().equals(data.subarray(start, end + 1))).toBe(true);
      expect(overwritten()).toBe(0);
      expect(handedOut.size).toBeLessThanOrEqual(2);
      // Every buffer is back in the pool for the next download.
      expect(pool.kept()).toBe(handedOut.size);
      expect(counts).toEqual({ turns: Math.ceil((end - start + 1) / BUFFER), lastReads: 1 });
    });
  });

  it.each(ranges)('read: gives %s, byte for byte', async (_name, start, end) => {
    const { body, counts } = bodyOf(start, end);
    const chunks: Buffer[] = [];
    for await (const chunk of body) chunks.push(chunk as Buffer);
    expect(Buffer.concat(chunks).equals(data.subarray(start, end + 1))).toBe(true);
    expect(counts.lastReads).toBe(1);
  });

  it('piped with { end: false }, leaves the socket open after the last byte, as Readable.pipe does', async () => {
    const { body } = bodyOf(0, SIZE - 1);
    const { socket, received } = slowSocket();
    body.pipe(socket, { end: false });
    await finished(body);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(socket.writableEnded).toBe(false);
    expect(received().equals(data)).toBe(true);
    socket.end();
  });

  it('stops reading when the client goes away, and closes', async () => {
    const { body, counts } = bodyOf(0, SIZE - 1);
    const { socket } = slowSocket();
    body.pipe(socket);
    await new Promise((resolve) => setTimeout(resolve, 5));
    // As Fastify does when the response closes first.
    socket.destroy();
    body.destroy();
    await finished(body);
    const turns = counts.turns;
    expect(turns).toBeLessThan(SIZE / BUFFER);
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(counts.turns).toBe(turns);
    expect(counts.lastReads).toBe(0);
  });

  it('ends the body itself when the socket is destroyed under it', async () => {
    const { body, counts } = bodyOf(0, SIZE - 1);
    const { socket } = slowSocket();
    body.pipe(socket);
    await new Promise((resolve) => setTimeout(resolve, 5));
    socket.destroy();
    await finished(body);
    expect(counts.lastReads).toBe(0);
  });

  it('fails, never ends short quietly, when the file is shorter than the range', async () => {
    writeFileSync(file, data.subarray(0, 3000));
    const { body } = bodyOf(0, SIZE - 1);
    const { socket } = slowSocket();
    const failed = new Promise<Error>((resolve) => body.once('error', resolve));
    body.pipe(socket);
    expect((await failed).message).toMatch(/ended at byte 3000 of 10000/);
  });

  it('fails with the reason when the file is missing', async () => {
    tmp.remove();
    const { body } = bodyOf(0, 10);
    await expect(
      (async () => {
        for await (const _ of body) void _;
      })(),
    ).rejects.toThrow(/ENOENT/);
  });
});
