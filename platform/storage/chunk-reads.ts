/**
 * Every chunk of a file the database keeps in chunks (update artifacts, diagnostics archives), in order, read
 * `perRead` at a time: a whole file is never held at once. Throws when the file has fewer than `count` chunks
 * (it was deleted while it was read).
 */
export async function* everyChunk(
  read: (first: number, last: number) => Promise<Buffer[]>,
  count: number,
  perRead: number,
  name: string,
): AsyncGenerator<Buffer> {
  for (let first = 0; first < count; first += perRead) {
    const last = Math.min(count, first + perRead) - 1;
    const chunks = await read(first, last);
    if (chunks.length !== last - first + 1) throw new Error(`${name} lost chunks`);
    yield* chunks;
  }
}
