import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { createHash, generateKeyPairSync, type KeyObject, verify } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { artifactSigningText } from '../../shared/artifact-manifest.js';
import { tempDir, waitFor } from '../helpers/agent.js';
import { buildAgent, filesUnder } from '../helpers/agent-bundle.js';
import { runCli } from '../helpers/cli.js';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';

/**
 * The charger bundle (`npm run build:agent`): agent and shared code only, the native SQLite addon beside it,
 * and it runs on its own — `node BUNDLE/charger-agent.mjs run --hal simulated ...` registers and heartbeats
 * against a real platform.
 *
 * The bundle is built into a temporary directory outside the checkout (`npm run build:agent -- --out DIR`) and
 * run from there: Node resolves packages by walking up from the bundle, so a bundle inside the checkout
 * would silently borrow the checkout's node_modules and hide a missing file. Building outside also leaves the
 * checkout without build output.
 */

let tmp: ReturnType<typeof tempDir>;
let bundle: string;
let tp: TestPlatform;
/** The bundle is also built as a signed release: `--version`, `--archive`, `--sign-key` (DESIGN.md §19). */
let release: { archive: string; stdout: string; publicKey: KeyObject; keyFile: string };
const RELEASE_VERSION = '7.8.9-test.1';
/** A reproducible build: the same sources and this time give the same archive. */
const SOURCE_DATE_EPOCH = '1700000000';
const running: ChildProcess[] = [];

/** ELF e_machine of a shared object: 62 x86-64, 183 AArch64. */
function elfMachine(file: string): number {
  const header = readFileSync(file).subarray(0, 20);
  expect(header.subarray(0, 4).toString('latin1')).toBe('\x7fELF');
  return header.readUInt16LE(18);
}

/** A Node.js older than 22 on this machine (the system Node here is 20), or undefined. */
function oldNode(): string | undefined {
  for (const candidate of ['/usr/bin/node', '/usr/local/bin/node']) {
    if (!existsSync(candidate)) continue;
    const version = execFileSync(candidate, ['-p', 'process.versions.node'], { encoding: 'utf8' }).trim();
    if (Number.parseInt(version, 10) < 22) return candidate;
  }
  return undefined;
}

beforeAll(async () => {
  tmp = tempDir('agent-bundle-');
  bundle = path.join(tmp.dir, 'charger-agent');
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  const keyFile = path.join(tmp.dir, 'release-ed25519.pem');
  writeFileSync(keyFile, privateKey.export({ type: 'pkcs8', format: 'pem' }));
  const archive = path.join(tmp.dir, `charger-agent-${RELEASE_VERSION}.tar.gz`);
  const build = await buildAgent(
    ['--out', bundle, '--version', RELEASE_VERSION, '--archive', archive, '--sign-key', keyFile],
    { SOURCE_DATE_EPOCH },
  );
  if (build.code !== 0) throw new Error(`npm run build:agent failed:\n${build.output}`);
  release = { archive, stdout: build.stdout, publicKey, keyFile };
  tp = await startTestPlatform();
}, 90_000);

afterAll(async () => {
  for (const child of running) child.kill('SIGKILL');
  await tp?.stop();
  tmp?.remove();
});

describe('npm run build:agent', () => {
  it('holds the agent, the native addon, the simulated HAL, a package.json, the unit and the guide', () => {
    for (const file of [
      'charger-agent.mjs',
      'agent/charger-agent.mjs',
      'simulators/simulated-hal.js',
      'sdk/hal.ts',
      'sdk/hal.js',
      'node_modules/better-sqlite3/package.json',
      'node_modules/better-sqlite3/lib/index.js',
      `node_modules/better-sqlite3/prebuilds/linux-${process.arch}.node`,
      'charger-agent.service',
      'oem-guide.md',
      'THIRD_PARTY_LICENSES.txt',
    ]) {
      expect(existsSync(path.join(bundle, file)), file).toBe(true);
    }
    const manifest = JSON.parse(readFileSync(path.join(bundle, 'package.json'), 'utf8'));
    expect(manifest).toMatchObject({ type: 'module', bin: { 'charger-agent': 'charger-agent.mjs' } });
    expect(manifest.engines).toEqual({ node: '>=22' });
    expect(manifest.chargerAgent).toMatchObject({
      nodeLines: [22, 24],
      target: { name: `linux-${process.arch}`, platform: 'linux', arch: process.arch, libc: 'glibc' },
      nativeAddon: { abi: 'N-API' },
    });
    // Only the one addon, and nothing that is only needed to build it.
    expect(readdirSync(path.join(bundle, 'node_modules'))).toEqual(['better-sqlite3']);
    expect(readdirSync(path.join(bundle, 'node_modules', 'better-sqlite3', 'prebuilds'))).toEqual([
      `linux-${process.arch}.node`,
    ]);
    const unit = readFileSync(path.join(bundle, 'charger-agent.service'), 'utf8');
    expect(unit).toMatch(/^RestartPreventExitStatus=3$/m);
    expect(unit).toMatch(/^Restart=on-failure$/m);
  });

  it('contains nothing of the platform', () => {
    const code = filesUnder(bundle).filter(
      (f) => /\.(m?js|ts)$/.test(f) && !f.includes(`${path.sep}node_modules${path.sep}`),
    );
    expect(code.length).toBeGreaterThanOrEqual(4);
    for (const file of code) {
      const text = readFileSync(file, 'utf8');
      // Platform-only symbols and packages: the server factory, its HTTP framework, its storage.
      for (const symbol of [
        'buildPlatform',
        'fastify',
        'createSqliteStore',
        'prom-client',
        '@fastify/websocket',
      ]) {
        expect(text.includes(symbol), `${symbol} in ${path.relative(bundle, file)}`).toBe(false);
      }
    }
    // esbuild names every module it bundles in a `// path` comment: only agent/, shared/ and packages.
    // The entry and its chunks (the technician commands are split out, loaded on use).
    const modules = readdirSync(path.join(bundle, 'agent'))
      .filter((f) => f.endsWith('.mjs'))
      .flatMap((f) => readFileSync(path.join(bundle, 'agent', f), 'utf8').split('\n'))
      .filter((line) => /^\/\/ [\w@.-]+\/\S+\.(c|m)?[jt]s$/.test(line))
      .map((line) => line.slice(3));
    expect(modules).toContain('agent/cli.ts');
    expect(modules).toContain('agent/technician/diag/run-diag.ts');
    expect(modules.filter((m) => !/^(agent|shared|node_modules)\//.test(m))).toEqual([]);
    // What the footprint depends on (docs/benchmarks.md, "Agent footprint"): the shared schemas and the agent
    // validate with zod/mini, never the classic API, and only English messages are in.
    expect(modules).toContain('node_modules/zod/v4/mini/schemas.js');
    expect(modules).toContain('node_modules/zod/v4/locales/en.js');
    expect(modules.filter((m) => /zod\/v4\/(classic\/|locales\/(?!en\.js))/.test(m))).toEqual([]);
  });

  it('keeps its sources in Latin-1, which V8 holds at one byte per character', () => {
    for (const file of readdirSync(path.join(bundle, 'agent')).filter((f) => f.endsWith('.mjs'))) {
      const text = readFileSync(path.join(bundle, 'agent', file), 'utf8');
      expect(/[\u0100-\u{10ffff}]/u.exec(text)?.[0], file).toBeUndefined();
    }
  });

  it('keeps its sources without indentation, except inside template literals', () => {
    const chunks = readdirSync(path.join(bundle, 'agent')).filter((f) => f.endsWith('.mjs'));
    const lines = chunks.flatMap((f) => readFileSync(path.join(bundle, 'agent', f), 'latin1').split('\n'));
    const indented = lines.filter((line) => /^[ \t]/.test(line));
    expect(lines.length).toBeGreaterThan(10_000);
    // What is left indented is the text of multi-line template literals, such as the store's SQL.
    expect(indented.length).toBeLessThan(lines.length / 50);
    expect(indented.some((line) => /^\s+ON CONFLICT \(key\) DO UPDATE/.test(line))).toBe(true);
  });

  it('runs on its own: registers with --hal simulated, heartbeats, reports status, stops cleanly', async () => {
    const ca = path.join(tmp.dir, 'ca.pem');
    writeFileSync(ca, tp.ca);
    const dataDir = path.join(tmp.dir, 'data');
    const sn = `BUNDLE-${process.pid}`;
    const launcher = path.join(bundle, 'charger-agent.mjs');
    const child = spawn(
      process.execPath,
      [
        launcher,
        'run',
        '--data-dir',
        dataDir,
        '--platform-url',
        tp.url,
        '--ca',
        ca,
        '--sn',
        sn,
        '--hal',
        'simulated',
        '--connectors',
        '2',
      ],
      { cwd: tmp.dir, env: { ...process.env, NO_COLOR: '1' }, stdio: ['ignore', 'ignore', 'pipe'] },
    );
    running.push(child);
    let stderr = '';
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    const deviceIdOf = () => {
      const line = stderr
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as { msg?: string; device_id?: string })
        .find((l) => l.msg === 'platform identity ready');
      return line?.device_id;
    };
    const deviceId = await waitFor(deviceIdOf, (id) => id !== undefined, 20_000);
    if (!deviceId) throw new Error(`the bundled agent did not register:\n${stderr}`);
    const device = await waitFor(
      () => tp.store.getDevice(deviceId),
      (d) => d?.last_heartbeat_ms !== null && d?.last_heartbeat_ms !== undefined,
      10_000,
    );
    expect(device).toMatchObject({ sn, registered: true, reported_status: expect.any(String) });
    expect(device?.last_heartbeat_ms).toBeGreaterThan(0);

    const status = await runCli(['status', '--data-dir', dataDir, '--json'], {
      script: launcher,
      cwd: tmp.dir,
    });
    expect(status.code, status.stdout + status.stderr).toBe(0);
    const report = JSON.parse(status.stdout);
    expect(report).toMatchObject({ state: 'healthy', identity: { sn, device_id: deviceId } });
    expect(report.connectors).toHaveLength(2);

    child.kill('SIGTERM');
    expect(await exited, stderr).toBe(0);
    expect((await tp.store.getDevice(deviceId))?.reported_status).toBe('offline');
  });
});

describe('build:agent for another machine, and the launcher on the wrong one', () => {
  const other = process.arch === 'arm64' ? 'x64' : 'arm64';

  it(`--target linux-${other}: that CPU's prebuilt addon, recorded, and refused here with a sentence`, async () => {
    const out = path.join(tmp.dir, `bundle-${other}`);
    const build = await buildAgent(['--out', out, '--target', `linux-${other}`, '--quiet']);
    expect(build.code, build.output).toBe(0);
    const addon = path.join(out, 'node_modules', 'better-sqlite3', 'prebuilds', `linux-${other}.node`);
    expect(elfMachine(addon)).toBe(other === 'arm64' ? 183 : 62);
    const manifest = JSON.parse(readFileSync(path.join(out, 'package.json'), 'utf8'));
    expect(manifest.chargerAgent.target).toEqual({
      name: `linux-${other}`,
      platform: 'linux',
      arch: other,
      libc: 'glibc',
    });
    const run = await runCli(['status', '--data-dir', path.join(tmp.dir, 'none')], {
      script: path.join(out, 'charger-agent.mjs'),
    });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(
      `this bundle was built for linux-${other} (linux ${other} glibc), not this machine`,
    );
  });

  it('--target linuxmusl-x64 takes the musl addon; an unknown target is a usage error naming the choices', async () => {
    const out = path.join(tmp.dir, 'bundle-musl');
    const build = await buildAgent(['--out', out, '--target', 'linuxmusl-x64', '--quiet']);
    expect(build.code, build.output).toBe(0);
    expect(readdirSync(path.join(out, 'node_modules', 'better-sqlite3', 'prebuilds'))).toEqual([
      'linuxmusl-x64.node',
    ]);
    const bad = await buildAgent(['--out', path.join(tmp.dir, 'bundle-bad'), '--target', 'linux-arm']);
    expect(bad.code).toBe(2);
    expect(bad.output).toContain('--target linux-arm: prebuilt addons exist for linux-x64, linux-arm64');
    expect(existsSync(path.join(tmp.dir, 'bundle-bad'))).toBe(false);
  });

  it.skipIf(oldNode() === undefined)(
    'on Node 20 the bundle refuses to start with a sentence, not a segfault',
    async () => {
      const node = oldNode() ?? '';
      const run = await new Promise<{ code: number | null; signal: string | null; stderr: string }>(
        (resolve) => {
          const child = spawn(
            node,
            [path.join(bundle, 'charger-agent.mjs'), 'status', '--data-dir', tmp.dir],
            {
              stdio: ['ignore', 'ignore', 'pipe'],
            },
          );
          let stderr = '';
          child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
            stderr += chunk;
          });
          child.on('close', (code, signal) => resolve({ code, signal, stderr }));
        },
      );
      expect(run.signal).toBeNull();
      expect(run.code).toBe(1);
      expect(run.stderr).toMatch(
        /^charger-agent: Node\.js 2\d\.[\d.]+ is not supported; it needs Node\.js 22 or newer/,
      );
    },
  );
});

describe('build:agent --archive --sign-key: the bundle as a signed release (DESIGN.md §19)', () => {
  const sha256Of = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');

  it("is a gzip'd tar of the bundle's files at its root, unpacking to the same bytes as --out", () => {
    const listed = execFileSync('tar', ['-tzf', release.archive], { encoding: 'utf8' }).trim().split('\n');
    const files = filesUnder(bundle)
      .map((f) => path.relative(bundle, f).split(path.sep).join('/'))
      .sort();
    expect(listed.filter((entry) => !entry.endsWith('/')).sort()).toEqual(files);
    expect(listed).toContain('charger-agent.mjs');
    expect(listed).toContain('agent/charger-agent.mjs');
    const unpacked = path.join(tmp.dir, 'unpacked');
    mkdirSync(unpacked);
    execFileSync('tar', ['-xzf', release.archive, '-C', unpacked]);
    for (const file of files) {
      expect(
        readFileSync(path.join(unpacked, file)).equals(readFileSync(path.join(bundle, file))),
        file,
      ).toBe(true);
    }
    expect(statSync(path.join(unpacked, 'charger-agent.mjs')).mode & 0o111).toBe(0o111);
  });

  it("carries its version: the bundle's package.json and the agent it runs", async () => {
    const manifest = JSON.parse(readFileSync(path.join(bundle, 'package.json'), 'utf8'));
    expect(manifest.version).toBe(RELEASE_VERSION);
    expect(manifest.chargerAgent.builtAt).toBe(new Date(Number(SOURCE_DATE_EPOCH) * 1000).toISOString());
    const version = await runCli(['--version'], { script: path.join(bundle, 'charger-agent.mjs') });
    expect(version.stdout.trim()).toBe(RELEASE_VERSION);
  });

  it("writes FILE.sig: the manifest of the file and its Ed25519 signature, also stdout's last line", () => {
    const sig = JSON.parse(readFileSync(`${release.archive}.sig`, 'utf8'));
    expect(sig).toEqual({
      kind: 'agent',
      version: RELEASE_VERSION,
      target: `linux-${process.arch}`,
      sha256: sha256Of(release.archive),
      size: statSync(release.archive).size,
      signature: expect.stringMatching(/^[A-Za-z0-9+/]{86}==$/),
    });
    expect(JSON.parse(release.stdout.trim().split('\n').at(-1) ?? '')).toEqual(sig);
    const text = Buffer.from(artifactSigningText(sig));
    expect(verify(null, text, release.publicKey, Buffer.from(sig.signature, 'base64'))).toBe(true);
    // Over exactly that manifest: another version does not verify.
    const other = Buffer.from(artifactSigningText({ ...sig, version: '7.8.10' }));
    expect(verify(null, other, release.publicKey, Buffer.from(sig.signature, 'base64'))).toBe(false);
  });

  it('builds the same archive twice from the same sources (SOURCE_DATE_EPOCH); unsigned, no .sig', async () => {
    const again = path.join(tmp.dir, 'again.tar.gz');
    const build = await buildAgent(
      [
        '--out',
        path.join(tmp.dir, 'bundle-again'),
        '--version',
        RELEASE_VERSION,
        '--archive',
        again,
        '--quiet',
      ],
      { SOURCE_DATE_EPOCH },
    );
    expect(build.code, build.output).toBe(0);
    expect(sha256Of(again)).toBe(sha256Of(release.archive));
    expect(existsSync(`${again}.sig`)).toBe(false);
    // --quiet leaves the manifest alone on stdout, without a signature.
    expect(JSON.parse(build.stdout)).toEqual({
      kind: 'agent',
      version: RELEASE_VERSION,
      target: `linux-${process.arch}`,
      sha256: sha256Of(again),
      size: statSync(again).size,
    });
  }, 60_000);

  it('refuses a bad key or --sign-key without --archive with one line, before building anything', async () => {
    const rsa = path.join(tmp.dir, 'rsa.pem');
    writeFileSync(
      rsa,
      generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }),
    );
    const publicOnly = path.join(tmp.dir, 'public.pem');
    writeFileSync(publicOnly, release.publicKey.export({ type: 'spki', format: 'pem' }));
    const out = path.join(tmp.dir, 'bundle-refused');
    const archive = path.join(tmp.dir, 'refused.tar.gz');
    const cases: [string[], string][] = [
      [['--sign-key', release.keyFile], '--sign-key signs the archive: give --archive FILE too'],
      [['--archive', archive, '--sign-key', path.join(tmp.dir, 'missing.pem')], 'cannot read it'],
      [['--archive', archive, '--sign-key', rsa], 'a key of type rsa; artifacts are signed with Ed25519'],
      [['--archive', archive, '--sign-key', publicOnly], 'not a private key in PEM'],
      [['--archive', archive, '--version', 'no/slashes'], '--version no/slashes: letters, digits'],
      [['--archive', path.join(out, 'inside.tar.gz')], "must be outside the bundle's directory"],
    ];
    for (const [args, message] of cases) {
      const build = await buildAgent(['--out', out, ...args]);
      expect(build.code, build.output).toBe(2);
      expect(build.stdout).toBe('');
      expect(build.stderr.trim().split('\n')).toHaveLength(1);
      expect(build.stderr).toContain(message);
      expect(existsSync(out) || existsSync(archive)).toBe(false);
    }
  }, 60_000);
});
