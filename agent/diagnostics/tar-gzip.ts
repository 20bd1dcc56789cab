/**
 * Writes a directory tree as one gzip'd tar file and measures it (size, sha256) as it is written, so the
 * archive is never read back. `tar` is imported here, when an archive is built, never by `run` at cadence
 * (as updates/release-unpack.ts does).
 */
import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { open } from 'node:fs/promises';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';

/**
 * `entries` (paths under `cwd`) into `file` (0600, replaced), then fsynced: the caller renames it into place.
 * `portable` leaves out the owner's user and group names and ids, which say nothing about the charger's health;
 * every entry is stamped `mtime` (portable would leave directories at 1970).
 */
export async function writeTarGz(options: {
  cwd: string;
  entries: string[];
  file: string;
  mtime: Date;
}): Promise<{ size: number; sha256: string }> {
  const tar = await import('tar');
  const hash = createHash('sha256');
  let size = 0;
  const measure = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      hash.update(chunk);
      size += chunk.length;
      callback(null, chunk);
    },
  });
  await pipeline(
    tar.create({ cwd: options.cwd, portable: true, mtime: options.mtime }, options.entries),
    createGzip(),
    measure,
    createWriteStream(options.file, { mode: 0o600 }),
  );
  const handle = await open(options.file, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
  return { size, sha256: hash.digest('hex') };
}
