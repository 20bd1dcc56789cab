import type { FastifyReply, FastifyRequest } from 'fastify';
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
  }
}

function bearer(request: FastifyRequest): string {
  const header = request.headers.authorization;
  if (typeof header !== 'string' || header.length < 8 || header.slice(0, 7).toLowerCase() !== 'bearer ') {
    throw errors.unauthorized('Missing bearer token');
  }
  return header.slice(7).trim();
}

/** preHandler for operator routes: a valid operator token holding `scope`. */
export function requireOperator(ctx: PlatformContext, scope: Scope) {
  return async (request: FastifyRequest, _reply: FastifyReply): Promise<void> => {
    const result = ctx.tokens.verifyOperatorToken(bearer(request), Math.floor(ctx.now() / 1000));
    if (!result.ok)
      throw result.reason === 'expired' ? errors.tokenExpired() : errors.unauthorized('Invalid access token');
    const { claims } = result;
    if (!claims.scp.includes(scope)) throw errors.forbidden(`This client lacks the ${scope} scope`);
    request.operator = { clientId: claims.sub, scopes: claims.scp, operatorIds: claims.ops };
  };
}

/** preHandler for charger routes: a valid device token whose secret generation is still current. */
export function requireDevice(ctx: PlatformContext) {
  return async (request: FastifyRequest, _reply: FastifyReply): Promise<void> => {
    const result = ctx.tokens.verifyDeviceToken(bearer(request), Math.floor(ctx.now() / 1000));
    if (!result.ok)
      throw result.reason === 'expired' ? errors.tokenExpired() : errors.unauthorized('Invalid access token');
    const { sub, gen } = result.claims;
    if (ctx.credentials.currentGeneration(sub) !== gen)
      throw errors.unauthorized('Device credentials were revoked');
    request.device = { deviceId: sub };
    ctx.liveness.markSeen(sub);
  };
}
