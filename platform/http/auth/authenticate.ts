import type { FastifyRequest } from 'fastify';
import type { Scope } from '../../../shared/index.js';
import { errors } from '../../domain/api-error.js';
import { FIRST_CLIENT_SECRET_GEN, operatorTokenLive } from '../../domain/client-credentials.js';
import { liveGeneration } from '../../domain/secret-rotation.js';
import type { DevicePrincipal, OperatorPrincipal } from '../../services/principal.js';
import type { PlatformContext } from '../context.js';

declare module 'fastify' {
  interface FastifyRequest {
    operator: OperatorPrincipal | null;
    device: DevicePrincipal | null;
    rawBody: string | null;
  }
}

export function bearerToken(header: unknown): string {
  if (typeof header !== 'string' || header.length < 8 || header.slice(0, 7).toLowerCase() !== 'bearer ') {
    throw errors.unauthorized('Missing bearer token');
  }
  return header.slice(7).trim();
}

/*
 * The principal directory is a cache. Another instance may have created a client or a device, or rotated its
 * secret, a moment before this one hears of it (DESIGN.md §13): a valid token whose subject the cache does not
 * know, or whose secret generation is newer than the cached one, is checked against the database once before
 * it is refused. Known subjects are answered from memory, synchronously: no promise on the hot path.
 */

/** What checking an operator token needs: the stream checks them too, outside any route. */
export type OperatorTokenDeps = Pick<PlatformContext, 'tokens' | 'directory' | 'now'>;

/**
 * Verifies an operator token and returns its principal (from memory unless the client is not cached, or the
 * token's generation is newer than the cached one). A revoked client, or a generation a rotation's grace no
 * longer covers, is refused (domain/client-credentials.ts).
 */
export function verifyOperatorToken(
  ctx: OperatorTokenDeps,
  token: string,
): OperatorPrincipal | Promise<OperatorPrincipal> {
  const nowMs = ctx.now();
  const result = ctx.tokens.verifyOperatorToken(token, nowMs);
  if (!result.ok)
    throw result.reason === 'expired' ? errors.tokenExpired() : errors.unauthorized('Invalid access token');
  const { claims } = result;
  const principal = { clientId: claims.sub, scopes: claims.scp, operatorIds: claims.ops };
  return admitClient(ctx, principal, claims.gen ?? FIRST_CLIENT_SECRET_GEN, nowMs);
}

/**
 * `principal` if its client still holds secret generation `gen` (a token's or a stream ticket's): not revoked,
 * and not past a rotation's grace.
 */
export function admitClient(
  ctx: Pick<OperatorTokenDeps, 'directory'>,
  principal: OperatorPrincipal,
  gen: number,
  nowMs: number,
): OperatorPrincipal | Promise<OperatorPrincipal> {
  const admit = () => {
    const entry = ctx.directory.client(principal.clientId);
    if (!entry || !operatorTokenLive(entry, gen, nowMs))
      throw errors.unauthorized('Client credentials were revoked');
    return principal;
  };
  const cached = ctx.directory.client(principal.clientId);
  // An unknown client, or a newer generation than the cached one, may be news from another instance.
  if (cached && cached.secret_gen >= gen) return admit();
  return ctx.directory.refreshClient(principal.clientId).then(admit);
}

export function authenticateOperator(
  ctx: PlatformContext,
  request: FastifyRequest,
  scope: Scope,
): void | Promise<void> {
  const admit = (principal: OperatorPrincipal) => {
    if (!principal.scopes.includes(scope)) throw errors.forbidden(`This client lacks the ${scope} scope`);
    request.operator = principal;
  };
  const principal = verifyOperatorToken(ctx, bearerToken(request.headers.authorization));
  if (principal instanceof Promise) return principal.then(admit);
  admit(principal);
}

/**
 * A valid device token whose secret generation is still live: a reset or a completed rotation revokes it, and
 * so does the end of a rotation's grace, even before storage has promoted the pending secret.
 */
export function authenticateDevice(ctx: PlatformContext, request: FastifyRequest): void | Promise<void> {
  const nowMs = ctx.now();
  const result = ctx.tokens.verifyDeviceToken(bearerToken(request.headers.authorization), nowMs);
  if (!result.ok)
    throw result.reason === 'expired' ? errors.tokenExpired() : errors.unauthorized('Invalid access token');
  const { sub, gen } = result.claims;
  const admit = () => {
    const entry = ctx.directory.device(sub);
    if (!entry || liveGeneration(entry, nowMs) !== gen)
      throw errors.unauthorized('Device credentials were revoked');
    request.device = { deviceId: sub };
    ctx.liveness.markSeen(sub);
  };
  const cached = ctx.directory.device(sub);
  // An older generation than the cached one is revoked for certain; a newer one or none may be news.
  if (cached && cached.secret_gen >= gen) return admit();
  return ctx.directory.refreshDevice(sub).then(admit);
}

/** preHandler forms, for routes registered directly on Fastify. */
export function requireOperator(ctx: PlatformContext, scope: Scope) {
  return async (request: FastifyRequest): Promise<void> => authenticateOperator(ctx, request, scope);
}
export function requireDevice(ctx: PlatformContext) {
  return async (request: FastifyRequest): Promise<void> => authenticateDevice(ctx, request);
}
