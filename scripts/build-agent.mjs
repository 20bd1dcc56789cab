#!/usr/bin/env node
// @ts-check
/**
 * `npm run build:agent [-- --out DIR] [--target TARGET | --native-addon FILE] [--version V] [--archive FILE
 * [--sign-key PRIVATE.pem]] [--quiet]`: the self-contained agent bundle for chargers.
 *
 *   DIR (default dist-agent/)
 *   ├── charger-agent.mjs            launcher (the `bin`): node DIR/charger-agent.mjs run|status|diag|...
 *   ├── charger-agent-launcher.cjs   the A/B launcher, copied to PREFIX/bin/charger-agent by `install`
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
 * `--version V` (default: package.json's) is the bundle's version: its package.json's `version`, and the agent's
 * AGENT_VERSION in the bundled code (what it reports to the platform). `--archive FILE` also writes the bundle as
 * one gzip'd tar and, with `--sign-key`, FILE.sig (scripts/agent-archive.mjs); the manifest's JSON is then
 * stdout's last line. The arguments are checked before anything is built (scripts/agent-bundle-options.mjs).
 *
 * A plain .mjs file (not TypeScript) so that it runs with no compile step: it is tooling, not shipped code,
 * and lives in scripts/ rather than simulators/ (which is compiled into dist/ and holds product code).
 */
import {
  chmodSync,
  copyFileSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';
import { writeAgentArchive } from './agent-archive.mjs';
import { withoutHttp2, writeCompactSources } from './agent-bundle-footprint.mjs';
import { parseOptions, TARGETS } from './agent-bundle-options.mjs';
import { assertInputs, createPackageCopier, licenseText } from './agent-bundle-packages.mjs';
import { buildLauncher } from './agent-launcher.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

const options = await parseOptions(ROOT);
const { out: OUT, target: TARGET, version: VERSION } = options;
const log = (/** @type {string} */ line) => {
  if (!options.quiet) process.stdout.write(`${line}\n`);
};

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

/**
 * agent/version.ts with the bundle's version in AGENT_VERSION, so that the agent reports the version its release
 * carries (registration, boot event, User-Agent), whatever `--version` said.
 * @type {esbuild.Plugin}
 */
const stampVersion = {
  name: 'stamp-version',
  setup(build) {
    build.onLoad({ filter: /[\\/]agent[\\/]version\.ts$/ }, (args) => {
      const source = readFileSync(args.path, 'utf8');
      const stamped = source.replace(
        /(AGENT_VERSION = )'[^']*'/,
        (_, lead) => `${lead}${JSON.stringify(VERSION)}`,
      );
      if (stamped === source) throw new Error(`AGENT_VERSION not found in ${args.path}`);
      return { contents: stamped, loader: 'ts' };
    });
  },
};

function sizeOf(/** @type {string} */ p) {
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
  plugins: [withoutHttp2, stampVersion],
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
const bundled = assertInputs(ROOT, main.metafile, ['agent', 'shared'], 'agent bundle');

const sim = await esbuild.build({
  ...COMMON,
  entryPoints: [path.join(ROOT, 'simulators', 'simulated-hal.ts')],
  outfile: path.join(OUT, 'simulators', 'simulated-hal.js'),
  banner: {
    js: '// Simulated charger hardware for bench rigs (charger-agent run --hal simulated). Not for chargers.',
  },
});
assertInputs(ROOT, sim.metafile, ['simulators', 'agent'], 'simulated HAL');
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

const abLauncher = path.join(OUT, 'charger-agent-launcher.cjs');
await buildLauncher(ROOT, abLauncher);
chmodSync(abLauncher, 0o755);

const { copyPackage, copied } = createPackageCopier(options);
copyPackage('better-sqlite3', ROOT);

const rootManifest = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
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
      version: VERSION,
      description: 'The on-charger agent of the charger platform (self-contained bundle)',
      private: true,
      license: rootManifest.license,
      type: 'module',
      bin: { 'charger-agent': 'charger-agent.mjs' },
      engines: rootManifest.engines,
      bundleDependencies: ['better-sqlite3'],
      chargerAgent: {
        builtAt: options.builtAt.toISOString(),
        betterSqlite3: sqliteVersion,
        // The Node lines the bundle supports (shared/node-support.ts) and the machine its addon is for.
        nodeLines: SUPPORTED_NODE_LINES,
        target: TARGET === undefined ? null : { name: TARGET, ...TARGETS[TARGET] },
        nativeAddon:
          TARGET === undefined
            ? {
                source: path.basename(/** @type {string} */ (options.nativeAddon)),
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

log(`charger-agent ${VERSION} bundle in ${OUT} (${Date.now() - started} ms)`);
for (const entry of readdirSync(OUT).sort()) {
  const size = sizeOf(path.join(OUT, entry));
  log(`  ${entry.padEnd(26)} ${(size / 1024).toFixed(0).padStart(6)} KiB`);
}
log(`  total                      ${(sizeOf(OUT) / 1024).toFixed(0).padStart(6)} KiB`);
log(
  `  bundled: ${[...bundled.keys()].sort().join(', ')}; in node_modules/: ${[...copied.keys()].join(', ')}`,
);

if (options.archive !== undefined) {
  const manifest = await writeAgentArchive({
    root: ROOT,
    bundleDir: OUT,
    archive: options.archive,
    version: VERSION,
    // A bundle with the OEM's own addon names no target: the manifest's empty target (DESIGN.md §19).
    target: TARGET ?? '',
    mtime: options.builtAt,
    signKey: options.signKey,
  });
  log(`  archive: ${options.archive} (${(manifest.size / 1024).toFixed(0)} KiB, sha256 ${manifest.sha256})`);
  if (manifest.signature !== undefined) log(`  signature: ${options.archive}.sig`);
  // The last line, always (even with --quiet): what `charger-platform artifacts add` needs.
  process.stdout.write(`${JSON.stringify(manifest)}\n`);
}
