import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The platform key lives in DIR/keys/platform.key (0600). Two subkeys are derived from it: one signs access
 * tokens, one encrypts stored secrets (AES-256-GCM) so that HMAC request signatures can be verified later.
 */
export interface PlatformKeys {
  tokenKey: Buffer;
  sealSecret(plain: string): string;
  openSecret(sealed: string): string;
}

export function loadOrCreatePlatformKeys(dataDir: string): PlatformKeys {
  const dir = join(dataDir, 'keys');
  const path = join(dir, 'platform.key');
  let master: Buffer;
  try {
    master = Buffer.from(readFileSync(path, 'utf8').trim(), 'base64');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    master = randomBytes(32);
    // 'wx' refuses to overwrite a key another process created meanwhile.
    try {
      writeFileSync(path, `${master.toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      master = Buffer.from(readFileSync(path, 'utf8').trim(), 'base64');
    }
  }
  if (master.length !== 32) throw new Error(`platform key at ${path} is not 32 bytes`);
  const derive = (info: string) => Buffer.from(hkdfSync('sha256', master, Buffer.alloc(0), info, 32));
  const tokenKey = derive('charger-platform/token-signing/v1');
  const sealKey = derive('charger-platform/secret-sealing/v1');

  return {
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
