// @ts-check
/**
 * `build:agent --archive FILE [--sign-key PRIVATE.pem]` (DESIGN.md §19, "Artifacts"): the bundle as one gzip'd
 * tar, its files at the root exactly as `--out` lays them out, and with a key FILE.sig beside it, holding the
 * manifest and its Ed25519 signature: what `charger-platform artifacts add` takes.
 *
 * The archive is deterministic where that is cheap: entries sorted, every mtime the build's time, no owners. With
 * SOURCE_DATE_EPOCH set, the same sources give the same sha256.
 */
import { createHash, sign } from 'node:crypto';
import { createReadStream, readdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import * as esbuild from 'esbuild';

/**
 * shared/artifact-manifest.ts, the one definition of the manifest and of the text its signature covers, loaded
 * from its TypeScript source (build:agent runs with no compile step; the module imports nothing).
 * @param {string} root the checkout
 * @returns {Promise<{ ARTIFACT_NAME: RegExp, artifactSigningText: (m: ArtifactManifest) => string }>}
 */
export async function loadArtifactManifest(root) {
  const file = path.join(root, 'shared', 'artifact-manifest.ts');
  const built = await esbuild.build({
    entryPoints: [file],
    bundle: true,
    write: false,
    format: 'esm',
    platform: 'node',
    logLevel: 'silent',
  });
  const code = built.outputFiles[0]?.text ?? '';
  return import(`data:text/javascript;base64,${Buffer.from(code).toString('base64')}#${pathToFileURL(file)}`);
}

/** @typedef {{ kind: 'agent' | 'firmware', version: string, target: string, sha256: string, size: number }} ArtifactManifest */

/** Every directory and file under `dir`, relative to it, sorted by code unit (a directory before its contents). */
function entriesUnder(/** @type {string} */ dir, prefix = '') {
  /** @type {string[]} */
  const entries = [];
  for (const name of readdirSync(path.join(dir, prefix))) {
    const rel = prefix === '' ? name : `${prefix}/${name}`;
    entries.push(rel);
    if (statSync(path.join(dir, rel)).isDirectory()) entries.push(...entriesUnder(dir, rel));
  }
  return entries.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

/** sha256 (hex) and size of a file, streamed. */
async function digestOf(/** @type {string} */ file) {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk);
  return { sha256: hash.digest('hex'), size: statSync(file).size };
}

/**
 * Writes the archive (through a temporary name, so a failed build leaves no half file) and, with a key, FILE.sig;
 * a stale FILE.sig from an earlier build is removed when there is no key. Returns the manifest, signed or not.
 * @param {{ root: string, bundleDir: string, archive: string, version: string, target: string, mtime: Date,
 *   signKey: import('node:crypto').KeyObject | undefined }} options
 * @returns {Promise<ArtifactManifest & { signature?: string }>}
 */
export async function writeAgentArchive(options) {
  const { bundleDir, archive, signKey } = options;
  // Loaded here, so that a build without --archive needs nothing beyond what it always needed.
  const tar = await import('tar');
  const partial = `${archive}.partial`;
  rmSync(partial, { force: true });
  await tar.create(
    {
      file: partial,
      cwd: bundleDir,
      gzip: { level: 9 },
      // No uid, gid, owner names, atime or ctime; modes normalised (the launcher stays executable).
      portable: true,
      mtime: options.mtime,
      // The list below is complete and sorted; tar's own walk would follow readdir's order.
      noDirRecurse: true,
    },
    entriesUnder(bundleDir),
  );
  renameSync(partial, archive);

  /** @type {ArtifactManifest} */
  const manifest = {
    kind: 'agent',
    version: options.version,
    target: options.target,
    ...(await digestOf(archive)),
  };
  const sigFile = `${archive}.sig`;
  if (signKey === undefined) {
    rmSync(sigFile, { force: true });
    return manifest;
  }
  const { artifactSigningText } = await loadArtifactManifest(options.root);
  const signature = sign(null, Buffer.from(artifactSigningText(manifest), 'utf8'), signKey).toString(
    'base64',
  );
  const signed = { ...manifest, signature };
  writeFileSync(sigFile, `${JSON.stringify(signed, null, 2)}\n`);
  return signed;
}
