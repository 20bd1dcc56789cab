/**
 * A size-capped log file: `agent.log` plus at most `keep` older files (`agent.log.1` newest … `agent.log.N`),
 * so the agent's logs can never fill a charger's flash. Written synchronously, one `write` per log line:
 * simple, nothing buffered is lost in a crash, and the agent logs little (state changes, commands, errors).
 *
 * Written here rather than taken from a library: the whole job is a dozen lines, and pino's rotating
 * transports (pino-roll) run in a worker thread that a 512 MB charger does not need. Files are created 0600.
 */
import {
  closeSync,
  existsSync,
  fstatSync,
  mkdirSync,
  openSync,
  renameSync,
  rmSync,
  writeSync,
} from 'node:fs';
import path from 'node:path';

export interface RotatingFileOptions {
  /** Bytes per file before it rotates; default 5 MiB. */
  maxBytes?: number;
  /** Rotated files kept besides the current one; default 3. */
  keep?: number;
}

export interface RotatingFile {
  write(chunk: string): void;
  close(): void;
  readonly path: string;
}

export function createRotatingFile(file: string, options: RotatingFileOptions = {}): RotatingFile {
  const maxBytes = options.maxBytes ?? 5 * 1024 * 1024;
  const keep = Math.max(0, options.keep ?? 3);
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  let fd = openSync(file, 'a', 0o600);
  let size = fstatSync(fd).size;

  function rotate(): void {
    closeSync(fd);
    if (keep === 0) {
      rmSync(file, { force: true });
    } else {
      rmSync(`${file}.${keep}`, { force: true });
      for (let i = keep - 1; i >= 1; i--) {
        if (existsSync(`${file}.${i}`)) renameSync(`${file}.${i}`, `${file}.${i + 1}`);
      }
      renameSync(file, `${file}.1`);
    }
    fd = openSync(file, 'a', 0o600);
    size = 0;
  }

  return {
    path: file,
    write(chunk) {
      const bytes = Buffer.byteLength(chunk);
      if (size > 0 && size + bytes > maxBytes) rotate();
      writeSync(fd, chunk);
      size += bytes;
    },
    close() {
      try {
        closeSync(fd);
      } catch {
        // closed already
      }
    },
  };
}
