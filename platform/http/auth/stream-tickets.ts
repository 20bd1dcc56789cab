import { randomBytes } from 'node:crypto';
import { ErrorCode, STREAM_TICKET_TTL_SECONDS, type StreamTicket } from '../../../shared/index.js';
import { ApiError, errors } from '../../domain/api-error.js';
import { FIRST_CLIENT_SECRET_GEN } from '../../domain/client-credentials.js';
import type { OperatorPrincipal } from '../../services/principal.js';
import type { PlatformContext } from '../context.js';
import { admitClient, bearerToken } from './authenticate.js';

/**
 * Stream tickets (docs/api.md, "Live telemetry stream"): a browser cannot set Authorization on a WebSocket, and an
 * access token in the URL ends up in access logs, proxies and history. A ticket goes there instead: signed like
 * the tokens (no storage), valid STREAM_TICKET_TTL_SECONDS, used once — the replay cache remembers it, on every
 * instance when they share Redis — and the connection it opens is the client's, ending when the access token it
 * was asked with would have expired.
 */
export type StreamTicketDeps = Pick<PlatformContext, 'tokens' | 'directory' | 'replayCache' | 'now'>;

/** A ticket for the client whose access token `authorization` carries (already authenticated by the route). */
export function issueStreamTicket(deps: StreamTicketDeps, authorization: unknown): StreamTicket {
  const nowMs = deps.now();
  const verified = deps.tokens.verifyOperatorToken(bearerToken(authorization), nowMs);
  if (!verified.ok) throw errors.unauthorized('Invalid access token');
  const { claims } = verified;
  const iat = Math.floor(nowMs / 1000);
  return {
    ticket: deps.tokens.issueStreamTicket({
      sub: claims.sub,
      scp: claims.scp,
      ops: claims.ops,
      gen: claims.gen ?? FIRST_CLIENT_SECRET_GEN,
      tex: claims.exp,
      jti: randomBytes(16).toString('base64url'),
      iat,
      // Never past the token it stands for.
      exp: Math.min(claims.exp, iat + STREAM_TICKET_TTL_SECONDS),
    }),
    expires_in: STREAM_TICKET_TTL_SECONDS,
  };
}

export interface RedeemedTicket {
  principal: OperatorPrincipal;
  /** When the access token the ticket was asked with expires, ms. */
  expiresMs: number;
  gen: number;
}

/** The connection's principal, once: a used, expired, forged or revoked client's ticket answers 401. */
export async function redeemStreamTicket(deps: StreamTicketDeps, ticket: string): Promise<RedeemedTicket> {
  const nowMs = deps.now();
  const verified = deps.tokens.verifyStreamTicket(ticket, nowMs);
  if (!verified.ok) {
    throw verified.reason === 'expired'
      ? new ApiError(ErrorCode.TOKEN_EXPIRED, 'Stream ticket expired: ask for a new one')
      : errors.unauthorized('Invalid stream ticket');
  }
  const { claims } = verified;
  if (!(await deps.replayCache.remember(`ticket:${claims.jti}`, nowMs)))
    throw errors.unauthorized('Stream ticket already used: ask for a new one');
  const principal = { clientId: claims.sub, scopes: claims.scp, operatorIds: claims.ops };
  return {
    principal: await admitClient(deps, principal, claims.gen, nowMs),
    expiresMs: claims.tex * 1000,
    gen: claims.gen,
  };
}
