/**
 * Keeping secrets out of a diagnostics archive (DESIGN.md §18, §20). Two independent guards, pure functions:
 * - `redactSecrets`: a configuration (or command parameters) with every secret-like key's value censored, except
 *   what cannot be a credential: a file path (the `clientKey`, `updateKeys` paths), a switch, a quantity
 *   (`secretRotationDays`). PEM content (a certificate or private key) is censored under any key.
 * - `scrubText`: the charger's own secrets (device secret, pending secret, access token), known by value, replaced
 *   wherever they appear in any text that goes into the archive, logs included.
 */
import path from 'node:path';
import type { Identity, StoredToken } from '../store/agent-store.js';

export const REDACTED = '[redacted]';

/** Keys whose values may be credentials. */
export const SECRET_KEY = /secret|password|passphrase|token|key|credential|authorization|cookie/i;

/** A secret-like key that names a number of something (a period, a size) holds a setting, not a credential. */
const QUANTITY_KEY = /(?:days|hours|minutes|seconds|ms|count|bytes|size|length|interval|version)$/i;

const PEM = /-----BEGIN [A-Z0-9 ]+-----/;

// biome-ignore lint/suspicious/noControlCharactersInRegex: a path has none; a secret blob may
const CONTROL = /[\u0000-\u001f]/;

/** An absolute file path on one line, not PEM content: what the agent keeps of key and certificate files. */
export function isFilePath(value: string): boolean {
  return value.length <= 4096 && path.isAbsolute(value) && !CONTROL.test(value) && !PEM.test(value);
}

function clean(value: unknown, key: string, secret: boolean): unknown {
  if (typeof value === 'string') {
    if (PEM.test(value)) return REDACTED;
    return secret && !isFilePath(value) ? REDACTED : value;
  }
  if (typeof value === 'boolean' || value === null) return value;
  if (typeof value === 'number') return secret && !QUANTITY_KEY.test(key) ? REDACTED : value;
  if (Array.isArray(value)) return value.map((item) => clean(item, key, secret));
  if (typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = clean(v, k, secret || SECRET_KEY.test(k));
    return out;
  }
  // undefined, functions, symbols, bigints: not JSON, nothing to keep.
  return undefined;
}

/** A copy of a JSON value with secret-like keys censored (see the file comment); the input is not changed. */
export function redactSecrets(value: unknown): unknown {
  return clean(value, '', false);
}

/** Shorter strings are no credential the platform issues, and replacing them would mangle unrelated text. */
const MIN_SECRET_LENGTH = 8;

/** The secrets the store holds, by value. */
export function knownSecrets(identity: Identity | undefined, token: StoredToken | undefined): string[] {
  const all = [identity?.secret, identity?.pendingSecret, token?.accessToken];
  return all.filter((s): s is string => typeof s === 'string' && s.length >= MIN_SECRET_LENGTH);
}

/** `text` with every occurrence of each secret, as is or JSON-escaped, replaced by REDACTED. */
export function scrubText(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const secret of secrets) {
    if (secret.length < MIN_SECRET_LENGTH) continue;
    out = out.replaceAll(secret, REDACTED);
    const escaped = JSON.stringify(secret).slice(1, -1);
    if (escaped !== secret) out = out.replaceAll(escaped, REDACTED);
  }
  return out;
}
