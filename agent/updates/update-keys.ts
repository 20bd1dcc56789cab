/**
 * The OEM public keys the agent trusts for updates (`--update-key FILE`, config `updateKeys`; DESIGN.md §19),
 * read and parsed at start: a missing file or a key of the wrong kind is a configuration error on the first
 * line of the log, not a refused update weeks later.
 */
import { createPrivateKey, createPublicKey, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { ConfigError } from '../agent-config.js';

function isPrivateKey(pem: string): boolean {
  try {
    createPrivateKey(pem);
    return true;
  } catch {
    return false;
  }
}

/** One key file: an Ed25519 public key, PEM (SPKI). Throws `ConfigError` with one line saying what is wrong. */
export function readUpdateKey(file: string): KeyObject {
  let pem: string;
  try {
    pem = readFileSync(file, 'utf8');
  } catch (error) {
    throw new ConfigError(
      `cannot read --update-key ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`,
    );
  }
  // createPublicKey would derive the public half of a private key; the OEM's private key has no place on a
  // charger, so say so instead of quietly accepting it.
  if (isPrivateKey(pem))
    throw new ConfigError(`--update-key ${file} is a private key: give the charger the public key only`);
  let key: KeyObject;
  try {
    key = createPublicKey(pem);
  } catch {
    throw new ConfigError(`--update-key ${file} is not a PEM public key`);
  }
  if (key.asymmetricKeyType !== 'ed25519')
    throw new ConfigError(`--update-key ${file} is not an Ed25519 key (it is ${key.asymmetricKeyType})`);
  return key;
}

/** Every configured key, in order (none: the agent refuses every update). */
export function readUpdateKeys(files: readonly string[]): KeyObject[] {
  return files.map(readUpdateKey);
}
