import type { FastifyRequest } from 'fastify';
import type { Scope } from '../../shared/index.js';
import { errors } from '../api-error.js';
import type { PlatformContext } from '../context.js';

export interface OperatorPrincipal {
  clientId: string;
  scopes: readonly Scope[];
  operatorIds: readonly string[];
}
export interface DevicePrincipal {
  deviceId: string;
}

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

/** Verifies an operator token (no database read) and returns its principal. */
export function verifyOperatorToken(ctx: PlatformContext, token: string): OperatorPrincipal {
  const result = ctx.tokens.verifyOperatorToken(token, ctx.now());
  if (!result.ok)
    throw result.reason === 'expired' ? errors.tokenExpired() : errors.unauthorized('Invalid access token');
  const { claims } = result;
  // A client removed from the platform loses access at once, even with unexpired tokens.
  if (!ctx.directory.client(claims.sub)) throw errors.unauthorized('Client credentials were revoked');
  return { clientId: claims.sub, scopes: claims.scp, operatorIds: claims.ops };
}

export function authenticateOperator(ctx: PlatformContext, request: FastifyRequest, scope: Scope): void {
  const principal = verifyOperatorToken(ctx, bearerToken(request.headers.authorization));
  if (!principal.scopes.includes(scope)) throw errors.forbidden(`This client lacks the ${scope} scope`);
  request.operator = principal;
}

/** A valid device token whose secret generation is still current (reset or rotation revokes it). */
export function authenticateDevice(ctx: PlatformContext, request: FastifyRequest): void {
  const result = ctx.tokens.verifyDeviceToken(bearerToken(request.headers.authorization), ctx.now());
  if (!result.ok)
    throw result.reason === 'expired' ? errors.tokenExpired() : errors.unauthorized('Invalid access token');
  const { sub, gen } = result.claims;
  if (ctx.directory.device(sub)?.secret_gen !== gen)
    throw errors.unauthorized('Device credentials were revoked');
  request.device = { deviceId: sub };
  ctx.liveness.markSeen(sub);
}

/** preHandler forms, for routes registered directly on Fastify. */
export function requireOperator(ctx: PlatformContext, scope: Scope) {
  return async (request: FastifyRequest): Promise<void> => authenticateOperator(ctx, request, scope);
}
export function requireDevice(ctx: PlatformContext) {
  return async (request: FastifyRequest): Promise<void> => authenticateDevice(ctx, request);
}
