import type { FastifyRequest } from 'fastify';
import { OperatorTokenRequest, OperatorTokenResponse, type Scope } from '../../shared/index.js';
import { errors } from '../api-error.js';
import { secretsEqual, tokenTimes } from '../auth/access-tokens.js';
import type { PlatformContext } from '../context.js';
import { enforceRateLimit, route } from '../route-spec.js';

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

export function operatorTokenRoute(ctx: PlatformContext) {
  return route({
    method: 'POST',
    url: '/v1/operator/oauth/token',
    summary: 'Exchange client credentials for an access token (OAuth 2.0 client credentials)',
    description:
      'JSON or application/x-www-form-urlencoded body; client credentials in the body or as HTTP Basic. ' +
      'The response is not enveloped.',
    tag: 'operator',
    auth: { kind: 'none' },
    body: OperatorTokenRequest,
    prepareBody: (request) => {
      const body = request.body;
      const basic = basicCredentials(request);
      if (!basic || typeof body !== 'object' || body === null || Array.isArray(body))
        return basic ? { ...basic } : body;
      const fromBody = body as Record<string, unknown>;
      if (fromBody.client_id !== undefined && fromBody.client_id !== basic.client_id) {
        throw errors.unauthorized('client_id in the body and in the Authorization header differ');
      }
      return { ...fromBody, ...basic };
    },
    response: OperatorTokenResponse,
    raw: true,
    errors: [403],
    handler: async ({ body: input, reply }) => {
      // Keyed by the client_id asked for, so guessing one client's secret is throttled (spec: 10/min).
      await enforceRateLimit(ctx, 'operatorToken', input.client_id, reply);
      const client = await ctx.store.getClient(input.client_id);
      const stored = client ? ctx.keys.openSecret(client.secret_sealed) : DUMMY_SECRET;
      if (!secretsEqual(input.client_secret, stored) || !client)
        throw errors.unauthorized('Invalid client credentials');
      await ctx.directory.refreshClient(client.client_id);
      let scopes: Scope[] = client.scopes;
      if (input.scope !== undefined) {
        const asked = input.scope.split(' ').filter(Boolean);
        if (asked.length === 0 || asked.some((s) => !client.scopes.includes(s as Scope))) {
          throw errors.forbidden('Requested scope is not granted to this client');
        }
        scopes = [...new Set(asked)] as Scope[];
      }
      const times = tokenTimes(ctx.now(), ctx.options.tokenTtlSeconds);
      const ttl = ctx.options.tokenTtlSeconds;
      const access_token = ctx.tokens.issueOperatorToken({
        sub: client.client_id,
        scp: scopes,
        ops: client.operator_ids,
        ...times,
      });
      // Never cached (RFC 6749 §5.1).
      reply.header('cache-control', 'no-store').header('pragma', 'no-cache');
      return { access_token, token_type: 'Bearer' as const, expires_in: ttl, scope: scopes.join(' ') };
    },
  });
}
