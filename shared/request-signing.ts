import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Optional HMAC request signing (spec "Optional request signing", DESIGN.md §8):
 * `X-Signature` = lowercase hex HMAC-SHA256, keyed with the client or device secret, over
 * METHOD + path-with-query + X-Timestamp + raw body, concatenated without separators.
 * `X-Timestamp` is Unix seconds.
 */
export const SIGNATURE_HEADER = 'x-signature';
export const TIMESTAMP_HEADER = 'x-timestamp';

export function signRequest(
  secret: string,
  method: string,
  pathWithQuery: string,
  timestampSeconds: number | string,
  body: string | Buffer,
): string {
  return createHmac('sha256', secret)
    .update(method.toUpperCase())
    .update(pathWithQuery)
    .update(String(timestampSeconds))
    .update(body)
    .digest('hex');
}

/** Constant-time check of a hex signature. */
export function signatureMatches(expectedHex: string, givenHex: string): boolean {
  if (!/^[0-9a-f]{64}$/.test(givenHex)) return false;
  return timingSafeEqual(Buffer.from(expectedHex, 'hex'), Buffer.from(givenHex, 'hex'));
}
