// @ts-check
/**
 * The command line of `build:agent` (scripts/build-agent.mjs), checked before anything is built: a wrong target,
 * version or signing key costs the OEM one clear line (exit 2), not a bundle built for nothing.
 */
import { createPrivateKey } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { loadArtifactManifest } from './agent-archive.mjs';

/** The targets better-sqlite3 ships a prebuilt addon for (its `prebuilds/TARGET.node`) that a charger runs. */
export const TARGETS = {
  'linux-x64': { platform: 'linux', arch: 'x64', libc: 'glibc' },
  'linux-arm64': { platform: 'linux', arch: 'arm64', libc: 'glibc' },
  'linuxmusl-x64': { platform: 'linux', arch: 'x64', libc: 'musl' },
  'linuxmusl-arm64': { platform: 'linux', arch: 'arm64', libc: 'musl' },
};

/**
 * @typedef {object} BuildOptions
 * @property {string} out the bundle's directory
 * @property {string | undefined} target the prebuilt addon's target; undefined when the OEM gives their own addon
 * @property {string | undefined} nativeAddon the OEM's own addon (`--native-addon FILE`)
 * @property {string} version the bundle's version (package.json's, the agent's AGENT_VERSION, the manifest's)
 * @property {string | undefined} archive where the gzip'd tar goes (`--archive FILE`)
 * @property {import('node:crypto').KeyObject | undefined} signKey the OEM's Ed25519 private key
 * @property {Date} builtAt the build's time: now, or SOURCE_DATE_EPOCH for a reproducible build
 * @property {boolean} quiet
 */

/** @param {string} message @returns {never} */
export function usage(message) {
  process.stderr.write(`build:agent: ${message}\n`);
  process.exit(2);
}

/** This machine's target name, as better-sqlite3 names its prebuilds. */
function hostTarget() {
  const maps = process.platform === 'linux' ? readFileSync('/proc/self/maps', 'latin1') : '';
  const musl = /\/ld-musl-[^/\s]*\.so/.test(maps);
  return `${musl ? 'linuxmusl' : process.platform}-${process.arch}`;
}

/** The OEM's Ed25519 private key, or a usage error naming what is wrong with the file. */
function readSigningKey(/** @type {string} */ file) {
  let pem;
  try {
    pem = readFileSync(file);
  } catch (error) {
    usage(`--sign-key ${file}: cannot read it (${error instanceof Error ? error.message : String(error)})`);
  }
  let key;
  try {
    key = createPrivateKey(pem);
  } catch {
    if (pem.includes('ENCRYPTED'))
      usage(`--sign-key ${file}: the key is encrypted; build:agent takes an unencrypted PKCS#8 PEM`);
    usage(
      `--sign-key ${file}: not a private key in PEM (see oem-guide.md, "Building and signing a release")`,
    );
  }
  if (key.asymmetricKeyType !== 'ed25519')
    usage(`--sign-key ${file}: a key of type ${key.asymmetricKeyType}; artifacts are signed with Ed25519`);
  return key;
}

/** The build's time: SOURCE_DATE_EPOCH (seconds, the reproducible-builds convention) when set, else now. */
function buildTime() {
  const epoch = process.env.SOURCE_DATE_EPOCH;
  if (epoch === undefined || epoch === '') return new Date();
  if (!/^\d+$/.test(epoch)) usage(`SOURCE_DATE_EPOCH=${epoch}: expected whole seconds since 1970`);
  return new Date(Number(epoch) * 1000);
}

/**
 * Parses and checks the arguments.
 * @param {string} root the checkout
 * @returns {Promise<BuildOptions>}
 */
export async function parseOptions(root) {
  /** @type {{ out?: string, target?: string, 'native-addon'?: string, version?: string, archive?: string, 'sign-key'?: string, quiet?: boolean }} */
  let args = {};
  try {
    args = parseArgs({
      options: {
        out: { type: 'string', default: path.join(root, 'dist-agent') },
        target: { type: 'string' },
        'native-addon': { type: 'string' },
        version: { type: 'string' },
        archive: { type: 'string' },
        'sign-key': { type: 'string' },
        quiet: { type: 'boolean', default: false },
      },
    }).values;
  } catch (error) {
    usage(error instanceof Error ? error.message : String(error));
  }
  if (args.target !== undefined && args['native-addon'] !== undefined)
    usage('give --target (a prebuilt addon) or --native-addon FILE (your own build), not both');
  const target = args['native-addon'] === undefined ? (args.target ?? hostTarget()) : undefined;
  if (target !== undefined && !Object.hasOwn(TARGETS, target))
    usage(
      `--target ${target}: prebuilt addons exist for ${Object.keys(TARGETS).join(', ')}; ` +
        'for another CPU build better_sqlite3.node on it and pass --native-addon FILE',
    );
  const out = path.resolve(/** @type {string} */ (args.out));

  const { ARTIFACT_NAME } = await loadArtifactManifest(root);
  const version = args.version ?? JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')).version;
  if (!ARTIFACT_NAME.test(version))
    usage(`--version ${version}: letters, digits and . _ + - (starting with a letter or digit), at most 64`);

  const archive = args.archive === undefined ? undefined : path.resolve(args.archive);
  if (archive !== undefined && !path.relative(out, archive).startsWith('..'))
    usage(`--archive ${args.archive}: must be outside the bundle's directory ${out}`);
  if (args['sign-key'] !== undefined && archive === undefined)
    usage('--sign-key signs the archive: give --archive FILE too');
  const signKey = args['sign-key'] === undefined ? undefined : readSigningKey(args['sign-key']);

  return {
    out,
    target,
    nativeAddon: args['native-addon'] === undefined ? undefined : path.resolve(args['native-addon']),
    version,
    archive,
    signKey,
    builtAt: buildTime(),
    quiet: args.quiet === true,
  };
}
