// @ts-check
/**
 * The npm packages in the agent bundle (scripts/build-agent.mjs): the check that esbuild bundled nothing but the
 * agent's own code and packages, the copy of the packages that stay files (better-sqlite3 and its native addon),
 * and the licence text of each.
 */
import { copyFileSync, cpSync, existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

/** npm packages the agent may bundle (anything else — fastify above all — means platform code leaked in). */
const ALLOWED_PACKAGES = new Set([
  'commander',
  'zod',
  'undici',
  'pino',
  'pino-std-serializers',
  '@pinojs/redact',
  'quick-format-unescaped',
  'atomic-sleep',
  'sonic-boom',
  'on-exit-leak-free',
  'thread-stream',
  'safe-stable-stringify',
  'real-require',
  'process-warning',
  'fast-redact',
  // tar and its dependencies unpack a release (agent/updates/release-unpack.ts), in a chunk of their own.
  'tar',
  'minipass',
  'minizlib',
  '@isaacs/fs-minipass',
  'chownr',
  'yallist',
]);
/** Dependencies of better-sqlite3 that are only needed to build it from source (C++ headers), not to run it. */
const INSTALL_ONLY = new Set(['node-addon-api']);

/** `node_modules/@scope/name/...` → `@scope/name`. */
function packageOf(/** @type {string} */ input) {
  const parts = input.split('/');
  const at = parts.lastIndexOf('node_modules');
  if (at < 0) return undefined;
  const first = parts[at + 1] ?? '';
  return first.startsWith('@') ? `${first}/${parts[at + 2]}` : first;
}

/**
 * Fails the build when the bundle holds anything but `allowedDirs` and the agent's packages; returns the
 * bundled packages and their directories.
 * @param {string} root the checkout, which esbuild's input paths are relative to
 * @param {import('esbuild').Metafile} metafile
 * @param {string[]} allowedDirs
 * @param {string} what
 */
export function assertInputs(root, metafile, allowedDirs, what) {
  /** @type {Map<string, string>} */
  const packages = new Map();
  for (const input of Object.keys(metafile.inputs)) {
    // The one-line stand-in for node:http2 (withoutHttp2, agent-bundle-footprint.mjs).
    if (input.startsWith('without-http2:')) continue;
    const pkg = packageOf(input);
    if (pkg !== undefined) {
      if (!ALLOWED_PACKAGES.has(pkg))
        throw new Error(`${what}: unexpected package in the bundle: ${pkg} (${input})`);
      const parts = input.split('/');
      const at = parts.lastIndexOf('node_modules');
      packages.set(pkg, path.join(root, ...parts.slice(0, at + 1), ...pkg.split('/')));
    } else if (!allowedDirs.some((dir) => input.startsWith(`${dir}/`))) {
      throw new Error(`${what}: ${input} must not be in the bundle (only ${allowedDirs.join(', ')})`);
    }
  }
  return packages;
}

/** Node's lookup of a package directory: `node_modules/NAME` in `fromDir` or the nearest parent. */
function findPackageDir(/** @type {string} */ name, /** @type {string} */ fromDir) {
  for (let dir = fromDir; ; dir = path.dirname(dir)) {
    const candidate = path.join(dir, 'node_modules', name);
    if (existsSync(path.join(candidate, 'package.json'))) return candidate;
    if (path.dirname(dir) === dir) throw new Error(`package ${name} not found from ${fromDir}`);
  }
}

/**
 * Copies runtime packages into `out`/node_modules with their dependencies; `copied` lists them and where they
 * came from. better-sqlite3 takes the prebuilt addon of `target`, or `nativeAddon` when the OEM built their own.
 * @param {{ out: string, target: string | undefined, nativeAddon: string | undefined }} options
 */
export function createPackageCopier({ out, target, nativeAddon }) {
  /** @type {Map<string, string>} */
  const copied = new Map();

  /** @param {string} dir @param {string} into */
  function copyBetterSqlite3(dir, into) {
    copyFileSync(path.join(dir, 'package.json'), path.join(into, 'package.json'));
    cpSync(path.join(dir, 'lib'), path.join(into, 'lib'), { recursive: true });
    // lib/binding.js loads build/Release/better_sqlite3.node if present, else prebuilds/<host target>.node.
    const [addon, as] =
      target === undefined
        ? [/** @type {string} */ (nativeAddon), ['build', 'Release', 'better_sqlite3.node']]
        : [path.join(dir, 'prebuilds', `${target}.node`), ['prebuilds', `${target}.node`]];
    if (!existsSync(addon)) throw new Error(`better-sqlite3 native addon not found at ${addon}`);
    mkdirSync(path.join(into, ...as.slice(0, -1)), { recursive: true });
    copyFileSync(addon, path.join(into, ...as));
  }

  /** @param {string} name @param {string} fromDir */
  function copyPackage(name, fromDir) {
    if (copied.has(name) || INSTALL_ONLY.has(name)) return;
    const dir = findPackageDir(name, fromDir);
    copied.set(name, dir);
    const into = path.join(out, 'node_modules', name);
    const manifest = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8'));
    mkdirSync(into, { recursive: true });
    if (name === 'better-sqlite3') {
      copyBetterSqlite3(dir, into);
    } else {
      // Small pure-JS packages: everything but tests, docs and nested installs.
      for (const entry of readdirSync(dir)) {
        if (
          entry.startsWith('.') ||
          ['node_modules', 'test', 'tests'].includes(entry) ||
          /\.(md|d\.ts)$/i.test(entry)
        )
          continue;
        cpSync(path.join(dir, entry), path.join(into, entry), { recursive: true });
      }
    }
    for (const license of readdirSync(dir).filter((f) => /^licen[cs]e/i.test(f))) {
      copyFileSync(path.join(dir, license), path.join(into, license));
    }
    for (const dep of Object.keys(manifest.dependencies ?? {})) copyPackage(dep, dir);
  }

  return { copyPackage, copied };
}

/** A package's licence as it goes into THIRD_PARTY_LICENSES.txt. */
export function licenseText(/** @type {string} */ name, /** @type {string} */ dir) {
  const manifest = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8'));
  const file = readdirSync(dir).find((f) => /^licen[cs]e/i.test(f));
  const text = file
    ? readFileSync(path.join(dir, file), 'utf8').trim()
    : `(no licence file; package.json says ${manifest.license ?? 'nothing'})`;
  return `${'='.repeat(78)}\n${name}@${manifest.version} — ${manifest.license ?? '?'}\n${'='.repeat(78)}\n${text}\n`;
}
