import { chmod, cp, mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { databaseForDataDir, TEST_BACKEND } from '../helpers/backends.js';
import { runCli, runCliJson, type ServeProcess, spawnServe, tempDirs } from '../helpers/cli.js';
import { type HttpClient, httpClient } from '../helpers/platform.js';

/**
 * The platform's files (DESIGN.md §18): the data directory 0700 and everything secret in it 0600, a wider
 * directory refused with a sentence, and `--key-file` keeping the platform key out of the data directory, so a
 * copy of the directory alone opens no secret. The real CLI (dist/), on either backend.
 */
const dirs = tempDirs('cp-files-');
const running: ServeProcess[] = [];
const clients: HttpClient[] = [];

async function serve(args: string[]): Promise<ServeProcess> {
  const s = await spawnServe(['--self-signed', '--registration', 'open', ...args]);
  running.push(s);
  return s;
}
async function connect(s: ServeProcess): Promise<HttpClient> {
  const http = httpClient(s.url, await readFile(s.certPath, 'utf8'));
  clients.push(http);
  return http;
}
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  for (const s of running) s.kill();
  await Promise.all(running.map((s) => s.exited));
  await dirs.removeAll();
});

const modeOf = async (path: string) => ((await stat(path)).mode & 0o777).toString(8);

/** Every file under `dir`, recursively. */
async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries.filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name));
}

async function registerCharger(http: HttpClient, sn: string): Promise<{ deviceId: string; token: string }> {
  const reg = await http.post('/v1/device/register', {
    json: {
      sn,
      model: 'M',
      manufacturer: 'Acme',
      firmware_version: '1.0.0',
      connectors: [{ connector_id: 1, max_power_kw: 22, v2g_capable: false }],
    },
  });
  expect(reg.status, reg.text).toBe(200);
  const { device_id, device_secret } = reg.body.data;
  const tok = await http.post('/v1/device/token', {
    json: { device_id, device_secret, grant_type: 'client_credentials' },
  });
  expect(tok.status, tok.text).toBe(200);
  return { deviceId: device_id, token: tok.body.data.access_token };
}

describe('a fresh deployment', () => {
  it('creates its data directory 0700 and its database, WAL, SHM and keys 0600', async () => {
    const dir = join(await dirs.make(), 'data');
    const s = await serve(['--data-dir', dir]);
    const http = await connect(s);
    await registerCharger(http, 'FILES-1');
    expect(await modeOf(dir)).toBe('700');
    expect(await modeOf(join(dir, 'keys'))).toBe('700');
    expect(await modeOf(join(dir, 'keys', 'platform.key'))).toBe('600');
    expect(await modeOf(join(dir, 'tls', 'key.pem'))).toBe('600');
    if (TEST_BACKEND === 'sqlite') {
      // While it runs: the WAL and its index exist.
      for (const f of ['platform.sqlite', 'platform.sqlite-wal', 'platform.sqlite-shm'])
        expect({ f, mode: await modeOf(join(dir, f)) }).toEqual({ f, mode: '600' });
    }
    // Nothing in the directory is readable by anyone but its owner, except the public certificate.
    for (const f of await filesUnder(dir)) {
      if (f.endsWith('cert.pem')) continue;
      expect({ f, open: (await stat(f)).mode & 0o077 }).toEqual({ f, open: 0 });
    }
    await s.stop();
  });

  it.runIf(TEST_BACKEND === 'sqlite')('narrows a database file an earlier version left 0644', async () => {
    const dir = await dirs.make();
    await runCliJson(['operators', 'create', '--data-dir', dir, '--name', 'Old Co', '--json']);
    await chmod(join(dir, 'platform.sqlite'), 0o644);
    await runCliJson(['operators', 'list', '--data-dir', dir, '--json']);
    expect(await modeOf(join(dir, 'platform.sqlite'))).toBe('600');
  });
});

describe('a data directory open to other users', () => {
  it.each([
    [0o755, '0755'],
    [0o750, '0750'],
    [0o701, '0701'],
  ])('%s is refused by serve and the admin commands, saying what to run', async (mode, octal) => {
    const dir = join(await dirs.make(), 'wide');
    await mkdir(dir);
    await chmod(dir, mode);
    const expected = `the data directory ${dir} is open to other users (mode ${octal}); only its owner may use it: run \`chmod 700 ${dir}\` and try again`;
    const started = await spawnServe(['--data-dir', dir, '--self-signed']).catch((e: unknown) => e);
    expect(String(started)).toContain(expected);
    const admin = await runCli(['operators', 'create', '--data-dir', dir, '--name', 'X', '--json']);
    expect(admin.code).toBe(1);
    expect(admin.stderr).toBe(`charger-platform: ${expected}\n`);
    // Nothing was created in it.
    expect(await readdir(dir)).toEqual([]);
    await chmod(dir, 0o700);
    const fixed = await runCli(['operators', 'create', '--data-dir', dir, '--name', 'X', '--json']);
    expect(fixed.code, fixed.stderr).toBe(0);
  });
});

describe('serve --key-file', () => {
  it('keeps the key outside the data directory; a copy of the directory alone opens nothing', async () => {
    const secrets = await dirs.make();
    const keyFile = join(secrets, 'platform.key');
    const dir = join(await dirs.make(), 'data');
    const first = await serve(['--data-dir', dir, '--key-file', keyFile]);
    const charger = await registerCharger(await connect(first), 'KEYFILE-1');
    const key = (await readFile(keyFile, 'utf8')).trim();
    expect(Buffer.from(key, 'base64')).toHaveLength(32);
    expect(await modeOf(keyFile)).toBe('600');
    // Not in the data directory, under any name.
    for (const f of await filesUnder(dir)) expect((await readFile(f)).includes(key), f).toBe(false);
    // Admin commands take the same option.
    const op = await runCliJson([
      'operators',
      'create',
      '--data-dir',
      dir,
      '--key-file',
      keyFile,
      '--name',
      'Key Co',
      '--json',
    ]);
    expect(op.operator_id).toMatch(/^op_/);
    await first.stop();

    // Restarted with the same key file: the charger's token still works.
    const second = await serve(['--data-dir', dir, '--key-file', keyFile]);
    const http = await connect(second);
    const polled = await http.get('/v1/device/commands?wait=0', { token: charger.token });
    expect(polled.status, polled.text).toBe(200);
    await second.stop();

    // The data directory alone (a copy, or the same without the option) has no key.
    const copy = join(await dirs.make(), 'copy');
    await cp(dir, copy, { recursive: true });
    const database = TEST_BACKEND === 'postgres' ? ['--database', await databaseForDataDir(dir)] : [];
    const alone = await spawnServe(['--data-dir', copy, '--self-signed', ...database]).catch(
      (e: unknown) => e,
    );
    expect(String(alone)).toMatch(
      TEST_BACKEND === 'sqlite'
        ? /holds a database but no platform key .*: it was set up with --key-file; give the same --key-file FILE/
        : /the database was set up with another platform key than/,
    );
    if (TEST_BACKEND === 'sqlite') {
      const admin = await runCli(['operators', 'list', '--data-dir', dir, '--json']);
      expect(admin.code).toBe(1);
      expect(admin.stderr).toContain('give the same --key-file FILE');
    }
  });

  it('refuses to start while the data directory still holds a key', async () => {
    const dir = await dirs.make();
    await runCliJson(['operators', 'create', '--data-dir', dir, '--name', 'Moving Co', '--json']);
    const keyFile = join(await dirs.make(), 'platform.key');
    await writeFile(keyFile, await readFile(join(dir, 'keys', 'platform.key')), { mode: 0o600 });
    const res = await spawnServe(['--data-dir', dir, '--self-signed', '--key-file', keyFile]).catch(
      (e: unknown) => e,
    );
    expect(String(res)).toContain(
      `${join(dir, 'keys', 'platform.key')} is still in the data directory although --key-file ${keyFile} is given`,
    );
  });

  it('refuses a key file whose directory does not exist, and one that is not a key', async () => {
    const dir = await dirs.make();
    const missing = join(await dirs.make(), 'no-such-dir', 'platform.key');
    const res = await runCli([
      'operators',
      'create',
      '--data-dir',
      dir,
      '--key-file',
      missing,
      '--name',
      'X',
    ]);
    expect(res.code).toBe(1);
    expect(res.stderr).toContain(`cannot create the key file ${missing}: its directory does not exist`);
    const bad = join(await dirs.make(), 'bad.key');
    await writeFile(bad, 'not a key\n');
    const res2 = await runCli(['operators', 'create', '--data-dir', dir, '--key-file', bad, '--name', 'X']);
    expect(res2.code).toBe(1);
    expect(res2.stderr).toContain(`platform key at ${bad} is not 32 bytes`);
  });
});
