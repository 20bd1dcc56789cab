import { existsSync } from 'node:fs';
import { mkdir, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { createWriteBatcher } from '../../platform/storage/sqlite/write-batcher.js';
import { runCli, runCliJson } from '../helpers/cli.js';
import { createTenant, registerChargers } from '../helpers/fault-chargers.js';
import { mount, run, unmount, unmountAll } from '../helpers/mounts.js';
import { operatorToken } from '../helpers/platform.js';
import { servedPlatforms } from '../helpers/served-platforms.js';
import {
  expectReadsWork,
  expectRefusedWritesLandOnce,
  expectWritesRefused,
  fillDisk,
  integrityCheck,
  prepareCharger,
  STORAGE_FULL,
  STORAGE_READ_ONLY,
  send,
  storageFaultLogs,
  writesOf,
} from '../helpers/storage-fault-checks.js';

/**
 * Faults of the platform's storage (issue 6, item 3, platform side), with REAL processes: the built
 * `charger-platform serve` and admin CLI on real data directories, real mounts (this needs root and mount
 * privileges, as CI has).
 *
 * 1. A full disk (a small tmpfs): writes answer 503/9001 with Retry-After, reads keep working, the process
 *    survives, and writes succeed again once space returns — without a restart.
 * 2. A read-only data directory: `serve` and the admin CLI refuse to start with a clear message naming the
 *    directory; a running platform whose file system turns read-only under it answers writes like a full disk.
 * 3. SQLite's group commit when SQLite rolls a whole transaction back.
 *
 * The faults of the process (SIGKILL under load) are in platform-faults.test.ts.
 */

const { dirs, serve, connect, disconnect, stopServers } = servedPlatforms('cp-faults-');

afterAll(async () => {
  await stopServers();
  unmountAll();
  await dirs.removeAll();
}, 30_000);

describe('a full disk', () => {
  it('refuses writes with 503/9001 and Retry-After, keeps reads and the process, and recovers without a restart', async () => {
    const base = await dirs.make();
    const fsDir = join(base, 'fs');
    await mkdir(fsDir);
    mount(['-t', 'tmpfs', '-o', 'size=16m,mode=0700', 'tmpfs'], fsDir, 'a 16 MiB tmpfs');
    const dir = join(fsDir, 'data');
    const dbPath = join(dir, 'platform.sqlite');

    const srv = await serve(['--data-dir', dir, '--self-signed', '--registration', 'open']);
    const http = await connect(srv);
    const tenant = await createTenant(dir, 'Full Co');
    const opToken = await operatorToken(http, tenant.clientId, tenant.clientSecret);
    const [charger] = await registerChargers(http, dir, tenant, opToken, ['FULL-1']);
    const commandId = await prepareCharger(http, charger!, opToken);

    // Checkpoint the WAL into the database and truncate it, so that no write finds room left in it; then fill
    // the file system to the last byte.
    const admin = new Database(dbPath, { fileMustExist: true });
    const [checkpoint] = admin.pragma('wal_checkpoint(TRUNCATE)') as Array<{ busy: number }>;
    admin.close();
    expect(checkpoint?.busy).toBe(0);
    const filler = join(fsDir, 'filler');
    expect(fillDisk(filler)).toBeGreaterThan(0);

    // Every kind of write: a clear 503, the same contract each time, nothing leaked.
    const writes = writesOf(charger!, opToken, commandId);
    const refused = await expectWritesRefused(http, writes, STORAGE_FULL);
    // Reads keep working; the process is alive; the operator is told once, not once per request.
    await expectReadsWork(http, charger!, opToken, 1);
    expect(srv.child.exitCode).toBeNull();
    const logged = storageFaultLogs(srv);
    expect(logged).toHaveLength(1);
    expect(JSON.parse(logged[0]!)).toMatchObject({ level: 50, storage_fault: 'full', code: 'SQLITE_FULL' });
    expect(logged[0]).toContain('storage full');
    expect(logged[0]).not.toContain('stack');

    // The admin CLI: a clear message naming the directory, a non-zero exit.
    const cli = await runCli(['operators', 'create', '--data-dir', dir, '--name', 'More', '--json']);
    expect(cli.code).not.toBe(0);
    expect(cli.stdout).toBe('');
    expect(cli.stderr).toBe(
      `charger-platform: no space left for the data directory ${dir}: free space on its file system and try again\n`,
    );

    // Space returns: without a restart, the refused writes succeed when sent again, and fresh ones too.
    await unlink(filler);
    await expectRefusedWritesLandOnce(http, refused);
    for (const [name, make] of Object.entries(writes)) {
      const res = await send(http, make());
      expect(res.status, `${name}: ${res.text}`).toBe(200);
    }
    const recordsAfter = await http.get(`/v1/operator/charging-records?device_id=${charger!.deviceId}`, {
      token: opToken,
    });
    expect(recordsAfter.body.data.total).toBe(3);
    const command = await http.get(`/v1/operator/commands/${commandId}`, { token: opToken });
    expect(command.body.data.status).toBe('accepted');
    expect(command.body.data.history.map((h: { status: string }) => h.status)).toEqual([
      'queued',
      'delivered',
      'accepted',
    ]);
    const cliAgain = await runCli(['operators', 'create', '--data-dir', dir, '--name', 'More', '--json']);
    expect(cliAgain.code, cliAgain.stderr).toBe(0);

    await disconnect(http);
    expect((await srv.stop()).code).toBe(0);
    expect(integrityCheck(dbPath)).toEqual({ integrity: 'ok', fk: [] });
    unmount(fsDir);
  }, 40_000);
});

describe('a read-only data directory', () => {
  it('makes serve and the admin CLI fail fast with a message naming it, and they work once it is writable', async () => {
    const dir = await dirs.make();
    const dbPath = join(dir, 'platform.sqlite');
    const serveArgs = ['--data-dir', dir, '--self-signed', '--registration', 'open'];
    let srv = await serve(serveArgs);
    const op = await runCliJson([
      'operators',
      'create',
      '--data-dir',
      dir,
      '--name',
      'Read-only Co',
      '--json',
    ]);
    // Killed, so that the WAL and its index stay behind: SQLite could then open the database read-only.
    srv.kill();
    await srv.exited;
    expect(existsSync(`${dbPath}-wal`)).toBe(true);

    mount(['--bind', dir], dir, 'a bind mount');
    run('mount', ['-o', 'remount,ro,bind', dir]);
    const readOnly = `charger-platform: the data directory ${dir} is read-only: make it writable (remount its file system read-write) and try again\n`;
    const t0 = Date.now();
    const refused = await runCli(['serve', ...serveArgs, '--port', '0'], { timeoutMs: 15_000 });
    expect(Date.now() - t0).toBeLessThan(5_000);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toBe(readOnly);
    expect(refused.stdout).toBe('');
    for (const args of [
      ['operators', 'list', '--json'],
      ['operators', 'create', '--name', 'X', '--json'],
    ]) {
      const res = await runCli([...args, '--data-dir', dir]);
      expect(res.code, args.join(' ')).toBe(1);
      expect(res.stderr, args.join(' ')).toBe(readOnly);
    }
    unmount(dir);

    // The directory is writable but the database file is not (immutable): SQLite would quietly open it
    // read-only; serve must refuse it rather than start and fail every write.
    run('chattr', ['+i', dbPath]);
    try {
      const res = await runCli(['serve', ...serveArgs, '--port', '0'], { timeoutMs: 15_000 });
      expect(res.code).toBe(1);
      expect(res.stderr).toBe(readOnly);
    } finally {
      run('chattr', ['-i', dbPath]);
    }

    // Writable again: it serves and takes writes, with everything stored before.
    srv = await serve(serveArgs);
    const http = await connect(srv);
    const reg = await http.post('/v1/device/register', {
      json: { sn: 'RO-1', model: 'Fault AC', manufacturer: 'Acme', firmware_version: '1.0.0' },
    });
    expect(reg.status, reg.text).toBe(200);
    await disconnect(http);
    expect((await srv.stop()).code).toBe(0);
    const db = new Database(dbPath, { readonly: true, fileMustExist: true });
    try {
      expect(db.prepare('SELECT operator_id FROM operators').pluck().all()).toEqual([op.operator_id]);
    } finally {
      db.close();
    }
    expect(integrityCheck(dbPath)).toEqual({ integrity: 'ok', fk: [] });
  }, 40_000);

  it('turning read-only under a running platform: writes answer 503 like a full disk, reads and the process survive', async () => {
    // A mounted file system with files open for writing cannot be remounted read-only (EBUSY): a data
    // directory turns read-only under a running platform when the kernel forces it, e.g. ext4 with
    // errors=remount-ro after a disk error. That is simulated here on an ext4 image through a loop device.
    const base = await dirs.make();
    const image = join(base, 'ext4.img');
    const fsDir = join(base, 'fs');
    await mkdir(fsDir);
    await writeFile(image, '');
    run('truncate', ['-s', '64M', image]);
    run('mkfs.ext4', ['-q', '-F', image]);
    mount(['-o', 'loop,errors=remount-ro', image], fsDir, 'an ext4 image through a loop device');
    const device = run('findmnt', ['-n', '-o', 'SOURCE', fsDir])
      .trim()
      .replace(/^\/dev\//, '');
    const dir = join(fsDir, 'data');
    const dbPath = join(dir, 'platform.sqlite');
    const serveArgs = ['--data-dir', dir, '--self-signed', '--registration', 'open'];

    let srv = await serve(serveArgs);
    let http = await connect(srv);
    const tenant = await createTenant(dir, 'Remount Co');
    const opToken = await operatorToken(http, tenant.clientId, tenant.clientSecret);
    const [charger] = await registerChargers(http, dir, tenant, opToken, ['REMOUNT-1']);
    const commandId = await prepareCharger(http, charger!, opToken);
    // With synchronous=NORMAL, commits reach the disk at the next checkpoint or writeback; a forced remount,
    // like a power cut, may lose what had not. Write everything back first, so the check below is exact.
    run('sync', []);
    await writeFile(`/sys/fs/ext4/${device}/trigger_fs_error`, '1');

    const refused = await expectWritesRefused(
      http,
      writesOf(charger!, opToken, commandId),
      STORAGE_READ_ONLY,
    );
    await expectReadsWork(http, charger!, opToken, 1);
    expect(srv.child.exitCode).toBeNull();
    expect(storageFaultLogs(srv)).toHaveLength(1);
    const cli = await runCli(['operators', 'create', '--data-dir', dir, '--name', 'More', '--json']);
    expect(cli.code).toBe(1);
    expect(cli.stderr).toContain(`the data directory ${dir} is read-only`);

    // Recovery: the kernel refuses to remount an errored file system read-write while it is in use, so the
    // operator stops the platform, checks the file system, mounts it again and restarts.
    await disconnect(http);
    // SIGTERM still closes it (it cannot save the last-seen times: exit 1, saying why, without a stack).
    const stopped = await srv.stop();
    expect(stopped.signal).toBeNull();
    if (stopped.code !== 0)
      expect(srv.stderr()).toMatch(/charger-platform: closing failed: .*the data directory/);
    expect(srv.stderr()).not.toMatch(/\n\s+at /);
    unmount(fsDir);
    const fsck = run('sh', ['-c', `e2fsck -fy ${image} >/dev/null 2>&1; echo $?`]).trim();
    expect(['0', '1']).toContain(fsck);
    mount(['-o', 'loop,errors=remount-ro', image], fsDir, 'the checked ext4 image');
    srv = await serve(serveArgs);
    http = await connect(srv);
    await expectReadsWork(http, charger!, opToken, 1);
    await expectRefusedWritesLandOnce(http, refused);
    await disconnect(http);
    expect((await srv.stop()).code).toBe(0);
    expect(integrityCheck(dbPath)).toEqual({ integrity: 'ok', fk: [] });
    unmount(fsDir);
  }, 40_000);
});

describe('group commit when SQLite rolls the whole transaction back', () => {
  it('fails every write of the batch and stores none of them: no write commits on its own while reported failed', async () => {
    // SQLITE_FULL or SQLITE_IOERR in the middle of a statement may make SQLite roll back the whole transaction
    // (https://sqlite.org/lang_transaction.html); a ROLLBACK from inside one write does the same here.
    const db = new Database(':memory:');
    try {
      db.exec('CREATE TABLE t (v TEXT)');
      const batcher = createWriteBatcher(db);
      const results = await Promise.allSettled([
        batcher.write(() => db.prepare("INSERT INTO t VALUES ('before')").run()),
        batcher.write(() => {
          db.exec('ROLLBACK');
          throw new Error('database or disk is full');
        }),
        batcher.write(() => db.prepare("INSERT INTO t VALUES ('after')").run()),
      ]);
      expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected', 'rejected']);
      expect(db.prepare('SELECT v FROM t').all()).toEqual([]);
      expect(db.inTransaction).toBe(false);
      // The batcher keeps working afterwards.
      await batcher.write(() => db.prepare("INSERT INTO t VALUES ('later')").run());
      expect(db.prepare('SELECT v FROM t').all()).toEqual([{ v: 'later' }]);
    } finally {
      db.close();
    }
  });
});
