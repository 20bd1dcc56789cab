import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Optional HMAC request signing (spec "Optional request signing", DESIGN.md §8):
 * `X-Signature` = lowercase hex HMAC-SHA256, keyed with the client or device secret, over
 * METHOD + path-with-query + X-Timestamp + raw body, concatenated without separators.
 * `X-Timestamp` is Unix seconds, written exactly as `isSignatureTimestamp` accepts.
 */
export const SIGNATURE_HEADER = 'x-signature';
export const TIMESTAMP_HEADER = 'x-timestamp';

/**
 * `X-Timestamp` is exactly ten ASCII digits without a leading zero (DESIGN.md §18): one spelling per second.
 * The signed text concatenates path and stamp without a separator, so a looser rule let a digit move between
 * them (`?size=10` at T signed the same text as `?size=1` at `0T`). Ten digits hold every second from
 * 2001-09-09 to 2286-11-20.
 */
export function isSignatureTimestamp(stamp: string): boolean {
  return /^[1-9][0-9]{9}$/.test(stamp);
}

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
