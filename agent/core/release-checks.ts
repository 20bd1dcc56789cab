/**
 * Whether an agent bundle may be installed as a release, pure: each archive entry stays inside the release
 * directory, and the bundle's package.json names the expected version, a Node line this charger runs and the
 * target of the bundle it replaces.
 */
import path from 'node:path';
import { ARTIFACT_NAME } from '../../shared/artifact-manifest.js';

export type Check = { ok: true } | { ok: false; reason: string };

/** Entry types a bundle may hold; devices, FIFOs and the like never belong in one. */
const ENTRY_TYPES = new Set(['File', 'OldFile', 'ContiguousFile', 'Directory', 'SymbolicLink', 'Link']);

/** An entry's own path: relative, no `..` segment, nothing a file system would read differently. */
function isPlainRelative(p: string): boolean {
  return (
    p !== '' && !p.startsWith('/') && !p.includes('\\') && !p.includes('\0') && !p.split('/').includes('..')
  );
}

/** A tar entry of a bundle: `path` and, for links, `linkpath` as the archive holds them. */
export function checkArchiveEntry(entry: { path: string; type: string; linkpath?: string }): Check {
  const where = JSON.stringify(entry.path);
  if (!ENTRY_TYPES.has(entry.type)) return { ok: false, reason: `entry ${where} is a ${entry.type}` };
  if (!isPlainRelative(entry.path)) return { ok: false, reason: `entry ${where} points outside the release` };
  if (entry.type === 'SymbolicLink' || entry.type === 'Link') {
    const target = entry.linkpath ?? '';
    // A symbolic link is relative to its own directory; a hard link names a path from the archive's root.
    const resolved = path.posix.normalize(
      entry.type === 'SymbolicLink' ? path.posix.join(path.posix.dirname(entry.path), target) : target,
    );
    if (target === '' || target.startsWith('/') || resolved === '..' || resolved.startsWith('../'))
      return { ok: false, reason: `link ${where} → ${JSON.stringify(target)} points outside the release` };
  }
  return { ok: true };
}

export interface BundleTarget {
  name: string;
  platform: string;
  arch: string;
  libc: string;
}

/** What the charger checks in a bundle's package.json. */
export interface BundleManifest {
  version: string;
  nodeLines: number[];
  /** null: a bundle with the OEM's own addon (`--native-addon`). */
  target: BundleTarget | null;
}

/** package.json of a bundle → its manifest, or why it is not one. */
export function parseBundleManifest(value: unknown): BundleManifest | { error: string } {
  const v = (typeof value === 'object' && value !== null ? value : {}) as Record<string, unknown>;
  const agent = (
    typeof v.chargerAgent === 'object' && v.chargerAgent !== null ? v.chargerAgent : {}
  ) as Record<string, unknown>;
  if (typeof v.version !== 'string' || !ARTIFACT_NAME.test(v.version))
    return { error: 'its package.json has no valid version' };
  const lines = agent.nodeLines;
  if (!Array.isArray(lines) || !lines.every((n) => Number.isInteger(n)))
    return { error: 'its package.json lists no Node lines (chargerAgent.nodeLines)' };
  const t = agent.target as Record<string, unknown> | null | undefined;
  if (t === undefined) return { error: 'its package.json names no target (chargerAgent.target)' };
  if (t !== null && !['name', 'platform', 'arch', 'libc'].every((k) => typeof t[k] === 'string'))
    return { error: 'its package.json has a malformed chargerAgent.target' };
  return { version: v.version, nodeLines: lines as number[], target: t as BundleTarget | null };
}

const targetName = (t: BundleTarget | null) => (t === null ? 'its own addon (no target)' : t.name);

function sameTarget(a: BundleTarget | null, b: BundleTarget | null): boolean {
  if (a === null || b === null) return a === b;
  return a.name === b.name && a.platform === b.platform && a.arch === b.arch && a.libc === b.libc;
}

/**
 * A bundle fits when its version is the one announced, the running Node's major line is one of its lines, and
 * it is built for the same target as `runningTarget` (the release it replaces, or this machine at install).
 */
export function checkBundle(
  bundle: BundleManifest,
  expect: { version?: string; nodeVersion: string; runningTarget: BundleTarget | null },
): Check {
  if (expect.version !== undefined && bundle.version !== expect.version)
    return { ok: false, reason: `the bundle is version ${bundle.version}, not ${expect.version}` };
  const major = Number.parseInt(expect.nodeVersion, 10);
  if (!bundle.nodeLines.includes(major))
    return {
      ok: false,
      reason: `the bundle supports Node ${bundle.nodeLines.join(' and ')}, not this charger's ${expect.nodeVersion}`,
    };
  if (!sameTarget(bundle.target, expect.runningTarget))
    return {
      ok: false,
      reason: `the bundle is built for ${targetName(bundle.target)}, not ${targetName(expect.runningTarget)}`,
    };
  return { ok: true };
}

/** Room to unpack `needBytes`, keeping a margin so the store's own writes never meet a full disk. */
export const ROOM_MARGIN_BYTES = 8 * 1024 * 1024;

export function checkRoom(needBytes: number, freeBytes: number): Check {
  if (freeBytes >= needBytes + ROOM_MARGIN_BYTES) return { ok: true };
  const mib = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MiB`;
  return {
    ok: false,
    reason: `no room: the release needs ${mib(needBytes)} plus ${mib(ROOM_MARGIN_BYTES)} spare, ${mib(freeBytes)} free`,
  };
}
