import type { FastifyRequest } from 'fastify';
import {
  isSignatureTimestamp,
  SIGNATURE_HEADER,
  SIGNATURE_WINDOW_SECONDS,
  signatureMatches,
  signRequest,
  TIMESTAMP_HEADER,
} from '../../../shared/index.js';
import { errors } from '../../domain/api-error.js';
import type { PlatformContext } from '../context.js';

const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * Optional HMAC request signing (DESIGN.md §8). A signature, when present, is always verified; a client or
 * device set to require signatures must sign every write. Runs after authentication, so the principal is known.
 * Synchronous when the replay cache is (the in-memory one): no promise per request on the hot path.
 */
export function verifyRequestSignature(ctx: PlatformContext, request: FastifyRequest): void | Promise<void> {
  const signature = request.headers[SIGNATURE_HEADER];
  let sealed: string | null | undefined;
  let required = false;
  if (request.operator) {
    const client = ctx.directory.client(request.operator.clientId);
    sealed = client?.secret_sealed;
    required = client?.require_signature ?? false;
  } else if (request.device) {
    const device = ctx.directory.device(request.device.deviceId);
    sealed = device?.secret_sealed;
    required = device?.require_signature ?? false;
  } else {
    return;
  }
  if (signature === undefined) {
    if (required && WRITE_METHODS.has(request.method))
      throw errors.unauthorized('This credential must sign write requests');
    return;
  }
  const stamp = request.headers[TIMESTAMP_HEADER];
  if (typeof signature !== 'string' || !sealed) throw errors.unauthorized('Malformed request signature');
  if (typeof stamp !== 'string' || !isSignatureTimestamp(stamp)) {
    throw errors.unauthorized('X-Timestamp must be Unix seconds: exactly ten digits, no leading zero');
  }
  const nowMs = ctx.now();
  if (Math.abs(nowMs / 1000 - Number(stamp)) > SIGNATURE_WINDOW_SECONDS) {
    throw errors.unauthorized('Request signature timestamp outside the allowed window');
  }
  const expected = signRequest(
    ctx.keys.openSecret(sealed),
    request.method,
    request.url,
    stamp,
    request.rawBody ?? '',
  );
  if (!signatureMatches(expected, signature.toLowerCase()))
    throw errors.unauthorized('Invalid request signature');
  const fresh = ctx.replayCache.remember(signature.toLowerCase(), nowMs);
  if (fresh instanceof Promise) return fresh.then(refuseReplayed);
  refuseReplayed(fresh);
}

function refuseReplayed(fresh: boolean): void {
  if (!fresh) throw errors.unauthorized('Request signature replayed');
}
