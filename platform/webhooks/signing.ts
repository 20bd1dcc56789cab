import { createHmac, randomBytes } from 'node:crypto';

/**
 * Standard Webhooks signing (DESIGN.md §14): a secret is `whsec_` + base64 of 32 random bytes; a signature is
 * `v1,` + base64(HMAC-SHA256(secret bytes, `id.timestamp.body`)), space-separated when two secrets sign.
 */
const PREFIX = 'whsec_';

export function newWebhookSecret(): string {
  return PREFIX + randomBytes(32).toString('base64');
}

function secretBytes(secret: string): Buffer {
  return Buffer.from(secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret, 'base64');
}

export function signatureHeader(
  secrets: readonly string[],
  id: string,
  timestampSeconds: number,
  body: string,
): string {
  const content = `${id}.${timestampSeconds}.${body}`;
  return secrets
    .map((s) => `v1,${createHmac('sha256', secretBytes(s)).update(content).digest('base64')}`)
    .join(' ');
}
