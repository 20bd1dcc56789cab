import { createHash, createPublicKey, generateKeyPairSync, randomBytes, verify } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { artifactSigningText } from '../../shared/index.js';
import { runCli, runCliJson, type ServeProcess, spawnServe, tempDirs } from '../helpers/cli.js';
import { type HttpClient, httpClient, operatorToken } from '../helpers/platform.js';

/**
 * `charger-platform artifacts sign|add` (DESIGN.md §19), run as the built program: `sign` makes a signature the
 * public key verifies over the manifest's canonical text, and `add` stores the file for an operator, which the
 * running platform then lists on its operator API.
 */
const dirs = tempDirs('cp-admin-artifacts-');
let dir: string;
let files: string;
let keyPath: string;
let rsaPath: string;
let publicPem: string;
let file: string;
let content: Buffer;
let opA: string;
let opB: string;
const cliJson = (...args: string[]) => runCliJson([...args, '--data-dir', dir, '--json']);

beforeAll(async () => {
  dir = await dirs.make();
  files = await dirs.make();
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  keyPath = join(files, 'oem-ed25519.pem');
  await writeFile(keyPath, privateKey.export({ type: 'pkcs8', format: 'pem' }));
  publicPem = publicKey.export({ type: 'spki', format: 'pem' }).toString();
  rsaPath = join(files, 'rsa.pem');
  const rsa = generateKeyPairSync('rsa', { modulusLength: 1024 });
  await writeFile(rsaPath, rsa.privateKey.export({ type: 'pkcs8', format: 'pem' }));
  content = randomBytes(2 * 1024 * 1024 + 777);
  file = join(files, 'firmware.img');
  await writeFile(file, content);
  opA = (await cliJson('operators', 'create', '--name', 'Acme')).operator_id;
  opB = (await cliJson('operators', 'create', '--name', 'Beta')).operator_id;
}, 60_000);
afterAll(async () => {
  await dirs.removeAll();
});

const sign = (...extra: string[]) =>
  runCli([
    'artifacts',
    'sign',
    '--key',
    keyPath,
    '--file',
    file,
    '--kind',
    'firmware',
    '--version',
    '3.0.1',
    ...extra,
  ]);

describe('artifacts sign', () => {
  it('--json prints exactly {sha256, size, signature}, a signature the public key verifies', async () => {
    const res = await sign('--target', 'model-x', '--json');
    expect(res.code, res.stderr).toBe(0);
    const out = JSON.parse(res.stdout);
    const sha256 = createHash('sha256').update(content).digest('hex');
    expect(out).toEqual({
      sha256,
      size: content.length,
      signature: expect.stringMatching(/^[A-Za-z0-9+/]{86}==$/),
    });
    const text = artifactSigningText({
      kind: 'firmware',
      version: '3.0.1',
      target: 'model-x',
      sha256,
      size: content.length,
    });
    const key = createPublicKey(publicPem);
    expect(verify(null, Buffer.from(text), key, Buffer.from(out.signature, 'base64'))).toBe(true);
    // Over another target, it is another text.
    const other = artifactSigningText({
      kind: 'firmware',
      version: '3.0.1',
      target: '',
      sha256,
      size: content.length,
    });
    expect(verify(null, Buffer.from(other), key, Buffer.from(out.signature, 'base64'))).toBe(false);
  });

  it('prints the three values for people without --json', async () => {
    const res = await sign();
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout).toMatch(/^sha256 [0-9a-f]{64}\nsize \d+\nsignature [A-Za-z0-9+/]{86}==\n$/);
  });

  it.each([
    [['--kind', 'bios'], '--kind'],
    [['--version', '-1'], '--version'],
    [['--target', 'a b'], '--target'],
    [['--key', '/nonexistent/key.pem'], 'cannot read --key /nonexistent/key.pem: ENOENT'],
    [['--file', '/nonexistent/f.img'], 'cannot read --file /nonexistent/f.img: ENOENT'],
  ])('refuses %j: exit 1 naming it', async (extra, message) => {
    const res = await sign(...extra, '--json');
    expect(res.code).toBe(1);
    expect(res.stdout).toBe('');
    expect(res.stderr).toContain(`charger-platform: ${message}`);
  });

  it('refuses a key that is not Ed25519, or not a key', async () => {
    const rsa = await sign('--key', rsaPath);
    expect(rsa.code).toBe(1);
    expect(rsa.stderr).toContain(`--key ${rsaPath} is a rsa key; an Ed25519 key is needed`);
    const notKey = await sign('--key', file);
    expect(notKey.code).toBe(1);
    expect(notKey.stderr).toContain(`--key ${file} is not a private key in PEM`);
  });
});

describe('artifacts add', () => {
  let signature: string;
  let serve: ServeProcess | undefined;
  let http: HttpClient | undefined;
  beforeAll(async () => {
    signature = JSON.parse((await sign('--json')).stdout).signature;
  });
  afterAll(async () => {
    await http?.close();
    await serve?.stop();
  });

  const add = (...extra: string[]) =>
    runCli([
      'artifacts',
      'add',
      '--data-dir',
      dir,
      '--operator',
      opA,
      '--file',
      file,
      '--kind',
      'firmware',
      '--version',
      '3.0.1',
      '--signature',
      signature,
      ...extra,
    ]);

  it('--json prints the artifact, which the operator API then lists for its operator only', async () => {
    const res = await add('--json');
    expect(res.code, res.stderr).toBe(0);
    const artifact = JSON.parse(res.stdout);
    expect(artifact).toEqual({
      artifact_id: expect.stringMatching(/^art_[0-9a-f]{20}$/),
      kind: 'firmware',
      version: '3.0.1',
      target: '',
      sha256: createHash('sha256').update(content).digest('hex'),
      size: content.length,
      signature,
      created_at: expect.any(String),
    });

    const clientA = await cliJson('clients', 'create', '--operator', opA, '--scopes', 'read');
    const clientB = await cliJson('clients', 'create', '--operator', opB, '--scopes', 'read');
    serve = await spawnServe(['--data-dir', dir, '--self-signed']);
    http = httpClient(serve.url, await readFile(serve.certPath, 'utf8'));
    const tokenA = await operatorToken(http, clientA.client_id, clientA.client_secret);
    const listed = await http.get('/v1/operator/artifacts', { token: tokenA });
    expect(listed.status, listed.text).toBe(200);
    expect(listed.body.data.items).toEqual([artifact]);
    const tokenB = await operatorToken(http, clientB.client_id, clientB.client_secret);
    expect((await http.get('/v1/operator/artifacts', { token: tokenB })).body.data.items).toEqual([]);
  });

  it('without --json says what it added', async () => {
    const res = await add('--version', '3.0.2', '--target', 'model-x');
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout).toMatch(
      new RegExp(
        `^added artifact art_[0-9a-f]{20} \\(firmware 3\\.0\\.2 for model-x, ${content.length} bytes, sha256 [0-9a-f]{64}\\)\\n$`,
      ),
    );
  });

  it.each([
    [['--version', '3.0.1'], 'This operator already has firmware 3.0.1'],
    [['--operator', 'op_00000000000000000000', '--version', '9'], 'no operator op_00000000000000000000'],
    [['--signature', 'c2lnbmF0dXJl', '--version', '9'], '--signature must be an Ed25519 signature in base64'],
    [['--kind', 'bootloader'], '--kind'],
    [['--file', '/nonexistent/f.img', '--version', '9'], 'cannot read --file /nonexistent/f.img: ENOENT'],
  ])('refuses %j: exit 1 naming it', async (extra, message) => {
    const res = await add(...extra);
    expect(res.code).toBe(1);
    expect(res.stdout).toBe('');
    expect(res.stderr).toContain(`charger-platform: ${message}`);
  });

  it('refuses an empty file', async () => {
    const empty = join(files, 'empty.img');
    await writeFile(empty, '');
    const res = await add('--file', empty, '--version', '9');
    expect(res.code).toBe(1);
    expect(res.stderr).toContain(`charger-platform: --file ${empty} is empty`);
  });
});
