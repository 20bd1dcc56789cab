import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { DATABASE_FILE } from './sqlite/database.js';

/**
 * The platform key lives in DIR/keys/platform.key (0600), or with `--key-file FILE` outside the data directory
 * (a secrets mount), so that a copy of the data directory alone opens no secret (DESIGN.md §18). Two subkeys are
 * derived from it: one signs access tokens, one encrypts stored secrets (AES-256-GCM) so that HMAC request
 * signatures can be verified later.
 */
export interface PlatformKeys {
  tokenKey: Buffer;
  /** Where the key was read from, for messages. */
  path: string;
  sealSecret(plain: string): string;
  openSecret(sealed: string): string;
}

/** A platform key that cannot be used as given; the message says what to do. */
export class PlatformKeyError extends Error {}

/** Where the key is kept in the data directory when no `--key-file` is given. */
export function dataDirKeyPath(dataDir: string): string {
  return join(dataDir, 'keys', 'platform.key');
}

export interface PlatformKeyOptions {
  /** `--key-file FILE`: the key is read from (or first created at) FILE, never written into the data directory. */
  keyFile?: string | undefined;
}

export function loadOrCreatePlatformKeys(dataDir: string, opts: PlatformKeyOptions = {}): PlatformKeys {
  const inDataDir = dataDirKeyPath(dataDir);
  const path = opts.keyFile ? resolve(opts.keyFile) : inDataDir;
  if (opts.keyFile && existsSync(inDataDir)) {
    throw new PlatformKeyError(
      `${inDataDir} is still in the data directory although --key-file ${opts.keyFile} is given, so a copy of ` +
        `the directory would carry the key: check that ${opts.keyFile} holds the same key, then remove ${inDataDir}`,
    );
  }
  if (!opts.keyFile && !existsSync(inDataDir) && existsSync(join(dataDir, DATABASE_FILE))) {
    // A database without its key here was set up with --key-file: a new key would open none of its secrets.
    throw new PlatformKeyError(
      `the data directory ${dataDir} holds a database but no platform key (${inDataDir}): it was set up with ` +
        '--key-file; give the same --key-file FILE',
    );
  }
  const master = readOrCreateKey(path, !opts.keyFile);
  if (master.length !== 32) throw new PlatformKeyError(`platform key at ${path} is not 32 bytes`);
  const derive = (info: string) => Buffer.from(hkdfSync('sha256', master, Buffer.alloc(0), info, 32));
  const tokenKey = derive('charger-platform/token-signing/v1');
  const sealKey = derive('charger-platform/secret-sealing/v1');

  return {
    path,
    tokenKey,
    sealSecret(plain) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', sealKey, iv);
      const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
      return `v1.${iv.toString('base64url')}.${body.toString('base64url')}.${cipher.getAuthTag().toString('base64url')}`;
    },
    openSecret(sealed) {
      const [v, iv, body, tag] = sealed.split('.');
      if (v !== 'v1' || !iv || !body || !tag) throw new Error('unknown sealed secret format');
      const decipher = createDecipheriv('aes-256-gcm', sealKey, Buffer.from(iv, 'base64url'));
      decipher.setAuthTag(Buffer.from(tag, 'base64url'));
      return Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]).toString(
        'utf8',
      );
    },
  };
}

const KEY_CHECK_TEXT = 'charger-platform';

/** A fixed text sealed with this key: a database remembers it and refuses another key (open-store.ts). */
export function sealKeyCheck(keys: PlatformKeys): string {
  return keys.sealSecret(KEY_CHECK_TEXT);
}

/** Whether `sealed` (from `sealKeyCheck`) was sealed with this key. */
export function opensKeyCheck(keys: PlatformKeys, sealed: string): boolean {
  try {
    return keys.openSecret(sealed) === KEY_CHECK_TEXT;
  } catch {
    return false;
  }
}

/** The key at `path`, created there (0600) when missing; `makeDir`: its directory too (the data directory's). */
function readOrCreateKey(path: string, makeDir: boolean): Buffer {
  try {
    return Buffer.from(readFileSync(path, 'utf8').trim(), 'base64');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  if (makeDir) mkdirSync(join(path, '..'), { recursive: true, mode: 0o700 });
  const master = randomBytes(32);
  // 'wx' refuses to overwrite a key another process created meanwhile.
  try {
    writeFileSync(path, `${master.toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
    return master;
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') return Buffer.from(readFileSync(path, 'utf8').trim(), 'base64');
    if (code === 'ENOENT' && !makeDir)
      throw new PlatformKeyError(`cannot create the key file ${path}: its directory does not exist`);
    throw e;
  }
}
