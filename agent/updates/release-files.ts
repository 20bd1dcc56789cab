/**
 * The files of an A/B install (DESIGN.md §19) and the power-cut-safe ways to change them. Node built-ins only:
 * the launcher (release-launcher.ts), which updates never replace, bundles this module.
 *
 *   PREFIX/releases/<version>/   an unpacked bundle; `.staging-*` and `.trash-*` beside them are half-done work
 *   PREFIX/current               symlink → releases/<version>, swapped by rename
 *   PREFIX/bin/charger-agent     the launcher
 *   PREFIX/trial.json            the trial under way (its presence is the trial), with a rollback once decided
 *   PREFIX/store-snapshot.sqlite the store as it was before the trial
 *   PREFIX/rollback.json         a rollback the launcher performed, until the old release has reported it
 *
 * Every file is written to a temporary name, fsynced and renamed over, and the directory fsynced: after a power
 * cut a name holds either its old content or its new, never a part.
 */
import { randomBytes } from 'node:crypto';
import {
  closeSync,
  existsSync,
  fsyncSync,
  openSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeSync,
} from 'node:fs';
import path from 'node:path';

export interface ReleaseLayout {
  prefix: string;
}

/** The environment variable through which the launcher tells the agent where its A/B install is. */
export const PREFIX_ENV = 'CHARGER_AGENT_PREFIX';
/** Test seam: `CHARGER_AGENT_TEST_KILL_AT=<step>` SIGKILLs the process at that step (a power cut there). */
export const KILL_AT_ENV = 'CHARGER_AGENT_TEST_KILL_AT';
/** The launcher's file in a bundle, copied to PREFIX/bin/charger-agent at install. */
export const LAUNCHER_IN_BUNDLE = 'charger-agent-launcher.cjs';

export const releasesDir = (l: ReleaseLayout) => path.join(l.prefix, 'releases');
export const releaseDir = (l: ReleaseLayout, version: string) => path.join(releasesDir(l), version);
export const currentLink = (l: ReleaseLayout) => path.join(l.prefix, 'current');
export const trialFile = (l: ReleaseLayout) => path.join(l.prefix, 'trial.json');
export const rollbackFile = (l: ReleaseLayout) => path.join(l.prefix, 'rollback.json');
export const snapshotFile = (l: ReleaseLayout) => path.join(l.prefix, 'store-snapshot.sqlite');
export const launcherFile = (l: ReleaseLayout) => path.join(l.prefix, 'bin', 'charger-agent');

/** Dies here, as a power cut would, when the test seam names this step. */
export function killPoint(step: string): void {
  if (process.env[KILL_AT_ENV] === step) process.kill(process.pid, 'SIGKILL');
}

export function fsyncPath(file: string): void {
  const fd = openSync(file, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

export const tempName = (file: string) => `${file}.tmp-${randomBytes(4).toString('hex')}`;

/** Writes `text` to `file` through a temporary name, fsynced, renamed over, the directory fsynced. */
export function writeFileAtomic(file: string, text: string, mode = 0o644): void {
  const tmp = tempName(file);
  const fd = openSync(tmp, 'w', mode);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, file);
  fsyncPath(path.dirname(file));
}

export function writeJsonAtomic(file: string, value: unknown): void {
  writeFileAtomic(file, `${JSON.stringify(value, null, 2)}\n`);
}

/** Removes a file if present and makes the removal durable. */
export function removeDurably(file: string): void {
  if (!existsSync(file)) return;
  rmSync(file, { force: true });
  fsyncPath(path.dirname(file));
}

/** `current` → releases/<version>, atomically: a new symlink under a temporary name renamed over the old. */
export function pointCurrentAt(layout: ReleaseLayout, version: string): void {
  const link = currentLink(layout);
  const tmp = tempName(link);
  symlinkSync(path.join('releases', version), tmp);
  renameSync(tmp, link);
  fsyncPath(layout.prefix);
}

/** The version `current` points at, or undefined when there is no such link. */
export function currentVersion(layout: ReleaseLayout): string | undefined {
  try {
    return path.basename(readlinkSync(currentLink(layout)));
  } catch {
    return undefined;
  }
}

/** The installed releases' versions (directories under releases/, without half-done work). */
export function installedVersions(layout: ReleaseLayout): string[] {
  try {
    return readdirSync(releasesDir(layout), { withFileTypes: true })
      .filter((e) => e.isDirectory() && !e.name.startsWith('.'))
      .map((e) => e.name)
      .sort();
  } catch {
    return [];
  }
}

/** Deletes a release directory: renamed aside first, so a cut never leaves a half-deleted release in place. */
export function removeRelease(layout: ReleaseLayout, version: string): void {
  const dir = releaseDir(layout, version);
  if (!existsSync(dir)) return;
  const trash = path.join(releasesDir(layout), `.trash-${version}-${randomBytes(4).toString('hex')}`);
  renameSync(dir, trash);
  fsyncPath(releasesDir(layout));
  rmSync(trash, { recursive: true, force: true });
}

/** JSON of a file, undefined when it is absent; `malformed` when it cannot be parsed. */
export function readJsonFile(file: string): { value: unknown } | undefined | 'malformed' {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
  try {
    return { value: JSON.parse(text) };
  } catch {
    return 'malformed';
  }
}

/** A file that cannot be parsed is kept aside under `.bad-<time>` for a person to look at, never deleted. */
export function setAside(file: string): void {
  if (existsSync(file)) renameSync(file, `${file}.bad-${Date.now()}`);
}
