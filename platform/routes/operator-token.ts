import type { FastifyInstance, FastifyRequest } from 'fastify';
import { OperatorTokenRequest, type OperatorTokenResponse, type Scope } from '../../shared/index.js';
import { errors } from '../api-error.js';
import { secretsEqual } from '../auth/access-tokens.js';
import type { PlatformContext } from '../context.js';
import { parse } from '../parse.js';

/** RFC 6749 §2.3.1: HTTP Basic with form-urlencoded client_id and client_secret. */
function basicCredentials(request: FastifyRequest): { client_id: string; client_secret: string } | undefined {
  const header = request.headers.authorization;
  if (typeof header !== 'string' || header.slice(0, 6).toLowerCase() !== 'basic ') return undefined;
  const decoded = Buffer.from(header.slice(6).trim(), 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) throw errors.unauthorized('Malformed Basic credentials');
  try {
    return {
      client_id: decodeURIComponent(decoded.slice(0, colon).replace(/\+/g, ' ')),
      client_secret: decodeURIComponent(decoded.slice(colon + 1).replace(/\+/g, ' ')),
    };
  } catch {
    throw errors.unauthorized('Malformed Basic credentials');
  }
}

// Compared against when the client is unknown, so the answer takes as long either way.
const DUMMY_SECRET = 'x'.repeat(43);

export function operatorTokenRoutes(app: FastifyInstance, ctx: PlatformContext): void {
  app.post('/v1/operator/oauth/token', async (request, reply) => {
    const body = (request.body ?? {}) as Record<string, unknown>;
    const basic = basicCredentials(request);
    if (basic && typeof body === 'object' && body !== null) {
      if (body.client_id !== undefined && body.client_id !== basic.client_id) {
        throw errors.unauthorized('client_id in the body and in the Authorization header differ');
      }
    }
    const input = parse(
      OperatorTokenRequest,
      basic && typeof body === 'object' ? { ...body, ...basic } : body,
    );

    const client = await ctx.store.getClient(input.client_id);
    const stored = client ? ctx.keys.openSecret(client.secret_sealed) : DUMMY_SECRET;
    if (!secretsEqual(input.client_secret, stored) || !client) {
      throw errors.unauthorized('Invalid client credentials');
    }
    let scopes: Scope[] = client.scopes;
    if (input.scope !== undefined) {
      const asked = input.scope.split(' ').filter(Boolean);
      if (asked.length === 0 || asked.some((s) => !client.scopes.includes(s as Scope))) {
        throw errors.forbidden('Requested scope is not granted to this client');
      }
      scopes = asked as Scope[];
    }
    const nowSec = Math.floor(ctx.now() / 1000);
    const ttl = ctx.options.tokenTtlSeconds;
    const access_token = ctx.tokens.issueOperatorToken({
      sub: client.client_id,
      scp: scopes,
      ops: client.operator_ids,
      iat: nowSec,
      exp: nowSec + ttl,
    });
    const response: OperatorTokenResponse = {
      access_token,
      token_type: 'Bearer',
      expires_in: ttl,
      scope: scopes.join(' '),
    };
    // Not enveloped (spec); never cached (RFC 6749 §5.1).
    reply.header('cache-control', 'no-store').header('pragma', 'no-cache');
    return response;
  });
}
