/**
 * Unpacks an agent bundle (a gzip'd tar, DESIGN.md §19) into a directory, safely: a first pass lists every
 * entry and refuses the archive when one would land outside the release (absolute path, `..`, a link out) or
 * is not a file, directory or link, and counts the bytes to check the disk has room; the second pass extracts
 * with the same check as a filter, then every file and directory is fsynced.
 *
 * `tar` is imported when a bundle is unpacked, never by `run` at cadence (the bundle puts it in a chunk).
 */
import { readdirSync, statfsSync } from 'node:fs';
import path from 'node:path';
import {
  type BundleManifest,
  type Check,
  checkArchiveEntry,
  checkRoom,
  parseBundleManifest,
} from '../core/release-checks.js';
import { fsyncPath, killPoint, readJsonFile } from './release-files.js';

/** Files every bundle has at its root (scripts/build-agent.mjs). */
const REQUIRED = ['package.json', 'charger-agent.mjs'];

/** Lists the archive: its bytes once unpacked, or why it is refused. */
async function survey(archive: string): Promise<{ ok: true; bytes: number } | { ok: false; reason: string }> {
  const tar = await import('tar');
  let bytes = 0;
  let refusal: string | undefined;
  const seen = new Set<string>();
  try {
    await tar.t({
      file: archive,
      strict: true,
      onReadEntry: (entry) => {
        const check = checkArchiveEntry({
          path: entry.path,
          type: entry.type,
          ...(entry.linkpath !== undefined ? { linkpath: entry.linkpath } : {}),
        });
        if (!check.ok) refusal ??= check.reason;
        bytes += entry.size ?? 0;
        seen.add(entry.path.replace(/^\.\//, ''));
      },
    });
  } catch (error) {
    return { ok: false, reason: `not a readable gzip'd tar (${(error as Error).message})` };
  }
  if (refusal !== undefined) return { ok: false, reason: refusal };
  const missing = REQUIRED.filter((f) => !seen.has(f));
  if (missing.length > 0) return { ok: false, reason: `not an agent bundle: no ${missing.join(', ')}` };
  return { ok: true, bytes };
}

function freeBytes(dir: string): number {
  const s = statfsSync(dir);
  return s.bavail * s.bsize;
}

/** fsyncs every file and directory under `dir` (depth first), so the rename that publishes it is durable. */
function fsyncTree(dir: string): void {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) fsyncTree(full);
    else if (entry.isFile()) fsyncPath(full);
  }
  fsyncPath(dir);
}

/**
 * Unpacks `archive` into the empty directory `into` (which must exist) and returns the bundle's manifest, or
 * why not. On a refusal `into` may hold part of the archive: the caller removes it.
 */
export async function unpackBundle(
  archive: string,
  into: string,
): Promise<{ ok: true; manifest: BundleManifest } | { ok: false; reason: string }> {
  const surveyed = await survey(archive);
  if (!surveyed.ok) return surveyed;
  const room: Check = checkRoom(surveyed.bytes, freeBytes(into));
  if (!room.ok) return room;
  const tar = await import('tar');
  let entries = 0;
  try {
    await tar.x({
      file: archive,
      cwd: into,
      strict: true,
      preservePaths: false,
      // An agent running as root must not hand files to the uids the archive names.
      preserveOwner: false,
      filter: (entryPath, entry) => {
        entries += 1;
        if (entries === 10) killPoint('stage-unpacking');
        const type = 'type' in entry ? entry.type : 'File';
        const linkpath = 'linkpath' in entry ? entry.linkpath : undefined;
        return checkArchiveEntry({ path: entryPath, type, ...(linkpath ? { linkpath } : {}) }).ok;
      },
    });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return {
      ok: false,
      reason:
        code === 'ENOSPC' ? 'no room to unpack the release' : `cannot unpack: ${(error as Error).message}`,
    };
  }
  fsyncTree(into);
  const read = readJsonFile(path.join(into, 'package.json'));
  const manifest =
    read === undefined || read === 'malformed'
      ? { error: 'unreadable package.json' }
      : parseBundleManifest(read.value);
  if ('error' in manifest) return { ok: false, reason: `not an agent bundle: ${manifest.error}` };
  return { ok: true, manifest };
}
