import { generateKeyPairSync } from 'node:crypto';
import { existsSync, mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The sandbox's own update key (DESIGN.md §19): an Ed25519 pair in `DIR/keys/`, made once per data directory.
 * The sandbox's simulated fleet trusts its public half, so that a newcomer can sign an agent bundle or a firmware
 * with the private half (`npm run build:agent -- --sign-key DIR/keys/update-ed25519.pem`, or
 * `charger-platform artifacts sign --key ...`) and watch an update reach the fleet. A production platform has no
 * such key: the OEM keeps its own.
 */
export const SANDBOX_UPDATE_KEY = join('keys', 'update-ed25519.pem');
export const SANDBOX_UPDATE_PUBLIC_KEY = join('keys', 'update-ed25519.pub.pem');

export function ensureSandboxUpdateKey(dataDir: string): { privateKey: string; publicKey: string } {
  const privatePath = join(dataDir, SANDBOX_UPDATE_KEY);
  const publicPath = join(dataDir, SANDBOX_UPDATE_PUBLIC_KEY);
  if (!existsSync(privatePath) || !existsSync(publicPath)) {
    mkdirSync(join(dataDir, 'keys'), { recursive: true, mode: 0o700 });
    const { privateKey, publicKey } = generateKeyPairSync('ed25519');
    // The public half first: a key pair is complete once the private half is in place.
    writeFileSync(`${publicPath}.tmp`, publicKey.export({ type: 'spki', format: 'pem' }), { mode: 0o644 });
    renameSync(`${publicPath}.tmp`, publicPath);
    writeFileSync(`${privatePath}.tmp`, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
    renameSync(`${privatePath}.tmp`, privatePath);
  }
  return { privateKey: privatePath, publicKey: publicPath };
}
