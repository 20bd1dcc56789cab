#!/usr/bin/env node
// @ts-check
/**
 * `npm run build:agent [-- --out DIR] [-- --target TARGET | --native-addon FILE]`: the self-contained agent
 * bundle for chargers.
 *
 *   DIR (default dist-agent/)
 *   ├── charger-agent.mjs            launcher (the `bin`): node DIR/charger-agent.mjs run|status|diag|...
 *   │                                (checks the Node line and the target before it loads the agent)
 *   ├── agent/charger-agent.mjs      agent/ + shared/ + zod, undici, pino, commander, bundled by esbuild; the
 *   │                                technician commands in chunks beside it (agent/*-HASH.mjs), loaded on use
 *   ├── simulators/simulated-hal.js  the simulated HAL for bench rigs (`--hal simulated`); delete it on chargers
 *   ├── sdk/hal.ts, sdk/hal.js       the HAL interface for OEM modules (types, HalError)
 *   ├── node_modules/better-sqlite3  lib/, package.json and prebuilds/TARGET.node (N-API: any Node >= 22)
 *   ├── package.json                 type module, bin, engines, the target and the Node lines it supports
 *   ├── charger-agent.service        example systemd unit
 *   ├── oem-guide.md                 the OEM guide
 *   └── THIRD_PARTY_LICENSES.txt     licences of everything bundled
 *
 * TARGET is linux-x64, linux-arm64, linuxmusl-x64 or linuxmusl-arm64 (default: this machine's): better-sqlite3
 * 13 ships an N-API addon for each inside its npm package, so an ARM image is built on an x64 host with no
 * compiler and no download. For a CPU it has no prebuild for (32-bit ARM, say), build the addon on the target
 * and pass `--native-addon FILE` (see docs/oem-guide.md).
 *
 * Nothing of platform/ may enter the bundle: the build fails if esbuild's metafile lists a file outside agent/
 * and shared/ (or any package that is not one of the agent's). The main bundle lives one level down
 * (agent/) because the agent finds the simulated HAL at `../simulators/simulated-hal.js` from its own module
 * — the same layout as dist/.
 *
 * A plain .mjs file (not TypeScript) so that it runs with no compile step: it is tooling, not shipped code,
 * and lives in scripts/ rather than simulators/ (which is compiled into dist/ and holds product code).
 */
import {
  chmodSync,
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import * as esbuild from 'esbuild';
import { withoutHttp2, writeCompactSources } from './agent-bundle-footprint.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** The targets better-sqlite3 ships a prebuilt addon for (its `prebuilds/TARGET.node`) that a charger runs. */
const TARGETS = {
  'linux-x64': { platform: 'linux', arch: 'x64', libc: 'glibc' },
  'linux-arm64': { platform: 'linux', arch: 'arm64', libc: 'glibc' },
  'linuxmusl-x64': { platform: 'linux', arch: 'x64', libc: 'musl' },
  'linuxmusl-arm64': { platform: 'linux', arch: 'arm64', libc: 'musl' },
};

/** @param {string} message */
function usage(message) {
  process.stderr.write(`build:agent: ${message}\n`);
  process.exit(2);
}

/** This machine's target name, as better-sqlite3 names its prebuilds. */
function hostTarget() {
  const maps = process.platform === 'linux' ? readFileSync('/proc/self/maps', 'latin1') : '';
  const musl = /\/ld-musl-[^/\s]*\.so/.test(maps);
  return `${musl ? 'linuxmusl' : process.platform}-${process.arch}`;
}

/** @type {{ values: { out?: string, target?: string, 'native-addon'?: string, quiet?: boolean } }} */
let parsed;
try {
  parsed = parseArgs({
    options: {
      out: { type: 'string', default: path.join(ROOT, 'dist-agent') },
      target: { type: 'string' },
      'native-addon': { type: 'string' },
      quiet: { type: 'boolean', default: false },
    },
  });
} catch (error) {
  usage(error instanceof Error ? error.message : String(error));
}
const args = parsed.values;
if (args.target !== undefined && args['native-addon'] !== undefined)
  usage('give --target (a prebuilt addon) or --native-addon FILE (your own build), not both');
/** The prebuilt addon's target, or undefined when the OEM gives their own addon. */
const TARGET = args['native-addon'] === undefined ? (args.target ?? hostTarget()) : undefined;
if (TARGET !== undefined && !Object.hasOwn(TARGETS, TARGET))
  usage(
    `--target ${TARGET}: prebuilt addons exist for ${Object.keys(TARGETS).join(', ')}; ` +
      'for another CPU build better_sqlite3.node on it and pass --native-addon FILE',
  );
const OUT = path.resolve(/** @type {string} */ (args.out));
const log = (/** @type {string} */ line) => {
  if (!args.quiet) process.stdout.write(`${line}\n`);
};

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
]);
/** Dependencies of better-sqlite3 that are only needed to build it from source (C++ headers), not to run it. */
const INSTALL_ONLY = new Set(['node-addon-api']);

/** `node_modules/@scope/name/...` → `@scope/name`. */
function packageOf(input) {
  const parts = input.split('/');
  const at = parts.lastIndexOf('node_modules');
  if (at < 0) return undefined;
  const first = parts[at + 1] ?? '';
  return first.startsWith('@') ? `${first}/${parts[at + 2]}` : first;
}

/**
 * Fails the build when the bundle holds anything but `allowedDirs` and the agent's packages; returns the
 * bundled packages and their directories.
 */
function assertInputs(metafile, allowedDirs, what) {
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
      packages.set(pkg, path.join(ROOT, ...parts.slice(0, at + 1), ...pkg.split('/')));
    } else if (!allowedDirs.some((dir) => input.startsWith(`${dir}/`))) {
      throw new Error(`${what}: ${input} must not be in the bundle (only ${allowedDirs.join(', ')})`);
    }
  }
  return packages;
}

const BANNER = [
  '// charger-agent bundle, built by scripts/build-agent.mjs; edit the sources in agent/ and shared/.',
  // CommonJS packages inside an ES module bundle call require() for Node built-ins.
  "import { createRequire as __agentCreateRequire } from 'node:module';",
  "import { fileURLToPath as __agentFileURLToPath } from 'node:url';",
  'const require = __agentCreateRequire(import.meta.url);',
  'const __filename = __agentFileURLToPath(import.meta.url);',
  "const __dirname = __agentFileURLToPath(new URL('.', import.meta.url));",
].join('\n');

/** @type {esbuild.BuildOptions} */
const COMMON = {
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node22',
  // Not minified: a stack trace from a charger in the field must be readable as it is.
  minify: false,
  keepNames: true,
  legalComments: 'none',
  metafile: true,
  logLevel: 'warning',
  absWorkingDir: ROOT,
};

/** Node's lookup of a package directory: `node_modules/NAME` in `fromDir` or the nearest parent. */
function findPackageDir(name, fromDir) {
  for (let dir = fromDir; ; dir = path.dirname(dir)) {
    const candidate = path.join(dir, 'node_modules', name);
    if (existsSync(path.join(candidate, 'package.json'))) return candidate;
    if (path.dirname(dir) === dir) throw new Error(`package ${name} not found from ${fromDir}`);
  }
}

/** @type {Map<string, string>} copied runtime packages and where they came from */
const copied = new Map();

function copyPackage(name, fromDir) {
  if (copied.has(name) || INSTALL_ONLY.has(name)) return;
  const dir = findPackageDir(name, fromDir);
  copied.set(name, dir);
  const pkgJson = path.join(dir, 'package.json');
  const target = path.join(OUT, 'node_modules', name);
  const manifest = JSON.parse(readFileSync(pkgJson, 'utf8'));
  mkdirSync(target, { recursive: true });
  if (name === 'better-sqlite3') {
    copyFileSync(pkgJson, path.join(target, 'package.json'));
    cpSync(path.join(dir, 'lib'), path.join(target, 'lib'), { recursive: true });
    // lib/binding.js loads build/Release/better_sqlite3.node if present, else prebuilds/<host target>.node.
    const [addon, into] =
      TARGET === undefined
        ? [
            path.resolve(/** @type {string} */ (args['native-addon'])),
            ['build', 'Release', 'better_sqlite3.node'],
          ]
        : [path.join(dir, 'prebuilds', `${TARGET}.node`), ['prebuilds', `${TARGET}.node`]];
    if (!existsSync(addon)) throw new Error(`better-sqlite3 native addon not found at ${addon}`);
    mkdirSync(path.join(target, ...into.slice(0, -1)), { recursive: true });
    copyFileSync(addon, path.join(target, ...into));
  } else {
    // Small pure-JS packages: everything but tests, docs and nested installs.
    for (const entry of readdirSync(dir)) {
      if (
        entry.startsWith('.') ||
        ['node_modules', 'test', 'tests'].includes(entry) ||
        /\.(md|d\.ts)$/i.test(entry)
      )
        continue;
      cpSync(path.join(dir, entry), path.join(target, entry), { recursive: true });
    }
  }
  for (const license of readdirSync(dir).filter((f) => /^licen[cs]e/i.test(f))) {
    copyFileSync(path.join(dir, license), path.join(target, license));
  }
  for (const dep of Object.keys(manifest.dependencies ?? {})) copyPackage(dep, dir);
}

function licenseText(name, dir) {
  const manifest = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8'));
  const file = readdirSync(dir).find((f) => /^licen[cs]e/i.test(f));
  const text = file
    ? readFileSync(path.join(dir, file), 'utf8').trim()
    : `(no licence file; package.json says ${manifest.license ?? 'nothing'})`;
  return `${'='.repeat(78)}\n${name}@${manifest.version} — ${manifest.license ?? '?'}\n${'='.repeat(78)}\n${text}\n`;
}

function sizeOf(p) {
  const st = statSync(p);
  if (!st.isDirectory()) return st.size;
  return readdirSync(p).reduce((sum, entry) => sum + sizeOf(path.join(p, entry)), 0);
}

const started = Date.now();
rmSync(OUT, { recursive: true, force: true });
mkdirSync(OUT, { recursive: true });

const main = await esbuild.build({
  ...COMMON,
  write: false,
  plugins: [withoutHttp2],
  entryPoints: { 'charger-agent': path.join(ROOT, 'agent', 'cli.ts') },
  outdir: path.join(OUT, 'agent'),
  outExtension: { '.js': '.mjs' },
  // The technician commands (diag brings all of undici) are imported when one runs: split into chunks of their
  // own, `run` never loads them (docs/benchmarks.md, "Agent footprint"). Chunks sit beside the entry, so that
  // any of them finds ../simulators/ and ../node_modules/ as the entry does.
  splitting: true,
  chunkNames: '[name]-[hash]',
  // The native addon is copied beside the bundle; pino-pretty is optional (pretty logs on a terminal).
  external: ['better-sqlite3', 'pino-pretty'],
  banner: { js: BANNER },
});
writeCompactSources(main.outputFiles);
const bundled = assertInputs(main.metafile, ['agent', 'shared'], 'agent bundle');

const sim = await esbuild.build({
  ...COMMON,
  entryPoints: [path.join(ROOT, 'simulators', 'simulated-hal.ts')],
  outfile: path.join(OUT, 'simulators', 'simulated-hal.js'),
  banner: {
    js: '// Simulated charger hardware for bench rigs (charger-agent run --hal simulated). Not for chargers.',
  },
});
assertInputs(sim.metafile, ['simulators', 'agent'], 'simulated HAL');
for (const input of Object.keys(sim.metafile.inputs)) {
  if (input.startsWith('agent/') && input !== 'agent/hal.ts')
    throw new Error(`simulated HAL pulls in ${input}`);
}

// The HAL interface for OEM modules: the TypeScript source, and HalError/isHalError as JavaScript.
mkdirSync(path.join(OUT, 'sdk'), { recursive: true });
copyFileSync(path.join(ROOT, 'agent', 'hal.ts'), path.join(OUT, 'sdk', 'hal.ts'));
await esbuild.build({
  ...COMMON,
  bundle: false,
  metafile: false,
  entryPoints: [path.join(ROOT, 'agent', 'hal.ts')],
  outfile: path.join(OUT, 'sdk', 'hal.js'),
});

const launcher = path.join(OUT, 'charger-agent.mjs');
// Plain JavaScript that any Node runs: it refuses a bundle built for another machine with a sentence (instead
// of better-sqlite3's "cannot find module .../prebuilds/...") before it loads the agent, whose first module
// refuses an unsupported Node line (agent/supported-node.ts).
writeFileSync(
  launcher,
  `#!/usr/bin/env node
// charger-agent: see oem-guide.md. The agent is in agent/charger-agent.mjs (it finds
// simulators/simulated-hal.js and node_modules/better-sqlite3 relative to itself).
import { readFileSync } from 'node:fs';

const { chargerAgent } = JSON.parse(readFileSync(new URL('./package.json', import.meta.url), 'utf8'));
const want = chargerAgent.target;
if (want !== null) {
  let maps = '';
  try {
    maps = readFileSync('/proc/self/maps', 'latin1');
  } catch {}
  const libc = /\\/ld-musl-[^/\\s]*\\.so/.test(maps) ? 'musl' : 'glibc';
  if (want.platform !== process.platform || want.arch !== process.arch || want.libc !== libc) {
    process.stderr.write(
      \`charger-agent: this bundle was built for \${want.name} (\${want.platform} \${want.arch} \${want.libc}), \` +
        \`not this machine (\${process.platform} \${process.arch} \${libc}): rebuild it with \` +
        \`npm run build:agent -- --target <target> (see oem-guide.md)\\n\`,
    );
    process.exit(1);
  }
}
await import('./agent/charger-agent.mjs');
`,
);
chmodSync(launcher, 0o755);

copyPackage('better-sqlite3', ROOT);

const rootManifest = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
const versionSource = readFileSync(path.join(ROOT, 'agent', 'version.ts'), 'utf8');
const agentVersion = /AGENT_VERSION = '([^']+)'/.exec(versionSource)?.[1] ?? rootManifest.version;
const nodeSupportSource = readFileSync(path.join(ROOT, 'shared', 'node-support.ts'), 'utf8');
const SUPPORTED_NODE_LINES = JSON.parse(
  /SUPPORTED_NODE_LINES: readonly number\[\] = (\[[\d, ]+\])/.exec(nodeSupportSource)?.[1] ?? 'null',
);
if (!Array.isArray(SUPPORTED_NODE_LINES))
  throw new Error('SUPPORTED_NODE_LINES not found in shared/node-support.ts');
const sqliteVersion = JSON.parse(
  readFileSync(path.join(OUT, 'node_modules', 'better-sqlite3', 'package.json'), 'utf8'),
).version;
writeFileSync(
  path.join(OUT, 'package.json'),
  `${JSON.stringify(
    {
      name: 'charger-agent',
      version: agentVersion,
      description: 'The on-charger agent of the charger platform (self-contained bundle)',
      private: true,
      license: rootManifest.license,
      type: 'module',
      bin: { 'charger-agent': 'charger-agent.mjs' },
      engines: rootManifest.engines,
      bundleDependencies: ['better-sqlite3'],
      chargerAgent: {
        builtAt: new Date().toISOString(),
        betterSqlite3: sqliteVersion,
        // The Node lines the bundle supports (shared/node-support.ts) and the machine its addon is for.
        nodeLines: SUPPORTED_NODE_LINES,
        target: TARGET === undefined ? null : { name: TARGET, ...TARGETS[TARGET] },
        nativeAddon:
          TARGET === undefined
            ? {
                source: path.basename(/** @type {string} */ (args['native-addon'])),
                note: 'given with --native-addon',
              }
            : { prebuilt: `better-sqlite3@${sqliteVersion} prebuilds/${TARGET}.node`, abi: 'N-API' },
      },
    },
    null,
    2,
  )}\n`,
);

copyFileSync(path.join(ROOT, 'docs', 'charger-agent.service'), path.join(OUT, 'charger-agent.service'));
copyFileSync(path.join(ROOT, 'docs', 'oem-guide.md'), path.join(OUT, 'oem-guide.md'));

const licensed = new Map([...bundled, ...copied]);
writeFileSync(
  path.join(OUT, 'THIRD_PARTY_LICENSES.txt'),
  `Third-party software in this bundle (bundled into agent/*.mjs, or in node_modules/).\n\n${[...licensed]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([name, dir]) => licenseText(name, dir))
    .join('\n')}`,
);

log(`charger-agent ${agentVersion} bundle in ${OUT} (${Date.now() - started} ms)`);
for (const entry of readdirSync(OUT).sort()) {
  const size = sizeOf(path.join(OUT, entry));
  log(`  ${entry.padEnd(26)} ${(size / 1024).toFixed(0).padStart(6)} KiB`);
}
log(`  total                      ${(sizeOf(OUT) / 1024).toFixed(0).padStart(6)} KiB`);
log(
  `  bundled: ${[...bundled.keys()].sort().join(', ')}; in node_modules/: ${[...copied.keys()].join(', ')}`,
);
