/**
 * `charger-agent install --bundle FILE.tar.gz --prefix DIR [--version V]` (DESIGN.md §19): the first install of
 * an A/B layout by the OEM or a technician — releases/<version>/ (the archive unpacked), `current` → it, and
 * bin/charger-agent, the launcher taken from the bundle.
 *
 * Into a DIR that already has releases, it adds the new one and switches to it at once, without a trial (the
 * technician is the health check); the release that was current stays as the previous one, older ones go. It
 * refuses while a trial or a rollback is under way, and a bundle whose version is already current. The running
 * agent, if any, keeps its release until it is restarted (`systemctl restart charger-agent`).
 */
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import path from 'node:path';
import { type BundleTarget, checkBundle } from '../core/release-checks.js';
import { releasesToPrune } from '../core/release-trial.js';
import {
  currentVersion,
  fsyncPath,
  installedVersions,
  LAUNCHER_IN_BUNDLE,
  launcherFile,
  pointCurrentAt,
  type ReleaseLayout,
  releaseDir,
  releasesDir,
  removeRelease,
  tempName,
  trialFile,
  writeFileAtomic,
} from './release-files.js';
import { unpackBundle } from './release-unpack.js';

/** This machine as build:agent names targets (the bundle's own entry checks the same, at start). */
export function hostTarget(): BundleTarget {
  let maps = '';
  try {
    maps = readFileSync('/proc/self/maps', 'latin1');
  } catch {
    // Not Linux, or no /proc: glibc is assumed, and a wrong guess fails the name check below.
  }
  const libc = /\/ld-musl-[^/\s]*\.so/.test(maps) ? 'musl' : 'glibc';
  const name = `${libc === 'musl' ? 'linuxmusl' : process.platform}-${process.arch}`;
  return { name, platform: process.platform, arch: process.arch, libc };
}

export type InstallResult =
  | { ok: true; version: string; previous: string | undefined }
  | { ok: false; reason: string };

export async function installBundle(input: {
  bundle: string;
  prefix: string;
  version?: string;
}): Promise<InstallResult> {
  const layout: ReleaseLayout = { prefix: path.resolve(input.prefix) };
  if (!existsSync(input.bundle)) return { ok: false, reason: `no bundle at ${input.bundle}` };
  if (existsSync(trialFile(layout)))
    return { ok: false, reason: 'a trial is under way: let it commit or roll back first' };
  mkdirSync(releasesDir(layout), { recursive: true });
  mkdirSync(path.dirname(launcherFile(layout)), { recursive: true });
  const staging = path.join(releasesDir(layout), `.staging-${path.basename(tempName('install'))}`);
  mkdirSync(staging);
  const refuse = (reason: string): InstallResult => {
    rmSync(staging, { recursive: true, force: true });
    return { ok: false, reason };
  };
  const unpacked = await unpackBundle(input.bundle, staging);
  if (!unpacked.ok) return refuse(unpacked.reason);
  const { manifest } = unpacked;
  const fits = checkBundle(manifest, {
    ...(input.version !== undefined ? { version: input.version } : {}),
    nodeVersion: process.versions.node,
    // A bundle with the OEM's own addon names no target: nothing to compare.
    runningTarget: manifest.target === null ? null : hostTarget(),
  });
  if (!fits.ok) return refuse(fits.reason);
  const launcher = path.join(releaseDir(layout, manifest.version), LAUNCHER_IN_BUNDLE);
  if (!existsSync(path.join(staging, LAUNCHER_IN_BUNDLE)))
    return refuse(`the bundle has no ${LAUNCHER_IN_BUNDLE} (built before A/B releases): rebuild it`);
  const previous = currentVersion(layout);
  if (previous === manifest.version) return refuse(`${manifest.version} is already installed and current`);

  removeRelease(layout, manifest.version);
  renameSync(staging, releaseDir(layout, manifest.version));
  fsyncPath(releasesDir(layout));
  // The launcher is CommonJS without an extension: its package.json says so whatever lies above the prefix.
  writeFileAtomic(path.join(path.dirname(launcherFile(layout)), 'package.json'), '{ "type": "commonjs" }\n');
  writeFileAtomic(launcherFile(layout), readFileSync(launcher, 'utf8'), 0o755);
  pointCurrentAt(layout, manifest.version);
  for (const version of releasesToPrune(installedVersions(layout), manifest.version, previous))
    removeRelease(layout, version);
  return { ok: true, version: manifest.version, previous };
}
