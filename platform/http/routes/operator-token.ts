import type { FastifyRequest } from 'fastify';
import {
  ErrorCode,
  type OAuthErrorCode,
  OAuthErrorResponse,
  OperatorTokenRequest,
  OperatorTokenRequestBody,
  OperatorTokenResponse,
} from '../../../shared/index.js';
import { ApiError, errors } from '../../domain/api-error.js';
import type { PlatformContext } from '../context.js';
import { enforceRateLimit, route } from '../route-spec.js';
import { beginCredentialAttempt } from './credential-attempts.js';

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

/** The RFC 6749 §5.2 `error` of a refusal; none for 429, 500 and 503, which RFC 6749 has no code for. */
function oauthErrorOf(err: ApiError): OAuthErrorCode | undefined {
  if (err.oauth) return err.oauth;
  if (err.code === ErrorCode.UNAUTHORIZED) return 'invalid_client';
  if (err.code === ErrorCode.MALFORMED_BODY) return 'invalid_request';
  if (err.code !== ErrorCode.VALIDATION) return undefined;
  const field = err.details?.field;
  const value = err.details?.value;
  // A grant_type given but not client_credentials; a missing one is an invalid request.
  if (field === 'grant_type' && typeof value === 'string' && value !== '') return 'unsupported_grant_type';
  if (field === 'scope') return 'invalid_scope';
  return 'invalid_request';
}

/**
 * The challenge of an `invalid_client` answer: RFC 6749 §5.2's Basic challenge, with the OAuth error as auth
 * parameters (RFC 7235 §2.1 allows them; RFC 6750 §3 names them so for Bearer). OAuth libraries read the
 * challenge before the body: oauth4webapi and openid-client then surface `invalid_client` in their typed
 * WWWAuthenticateChallengeError itself, without a second read of the body.
 */
export const INVALID_CLIENT_CHALLENGE =
  'Basic realm="charger-platform", error="invalid_client", error_description="Invalid client credentials"';

/**
 * Every answer of the token endpoint other than 200 keeps the ErrorResponse and is never cached (RFC 6749
 * §5.1); its 4xx refusals add RFC 6749's `error` and `error_description` (DESIGN.md §15), `invalid_client` with
 * the `WWW-Authenticate` challenge RFC 6749 §5.2 asks for.
 */
export function tokenEndpointError(err: ApiError): ApiError {
  const oauth = oauthErrorOf(err);
  const message =
    oauth === 'unsupported_grant_type'
      ? 'Unsupported grant_type: only client_credentials is supported'
      : err.status === 415
        ? 'Unsupported content type; send application/x-www-form-urlencoded or application/json'
        : err.message;
  return new ApiError(err.code, message, {
    status: err.status,
    ...(err.details ? { details: err.details } : {}),
    headers: {
      ...err.headers,
      'cache-control': 'no-store',
      pragma: 'no-cache',
      ...(oauth === 'invalid_client' ? { 'www-authenticate': INVALID_CLIENT_CHALLENGE } : {}),
    },
    ...(oauth ? { oauth } : {}),
  });
}

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
    rate: 'unauthenticated',
    body: OperatorTokenRequest,
    documented: { body: OperatorTokenRequestBody, security: [{}, { clientBasic: [] }] },
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
    // Answered by the handler: wrong client or secret, and its own limits (failures per client_id and address,
    // issuance per client_id).
    errors: [401, 429],
    mapError: tokenEndpointError,
    errorBody: {
      name: 'OAuthErrorResponse',
      schema: OAuthErrorResponse,
      responses: {
        400: {
          description:
            '`invalid_request` (1001: a field missing or invalid; 1002: a malformed body), ' +
            '`unsupported_grant_type` (1001, `details.field` `grant_type`) or `invalid_scope` (1001, ' +
            '`details.field` `scope`: a scope the client is not granted)',
        },
        401: {
          description:
            '`invalid_client` (2001): unknown or revoked client, wrong secret (or one rotated out, past its grace) or malformed Basic credentials',
          headers: {
            'WWW-Authenticate': { schema: { type: 'string', const: INVALID_CLIENT_CHALLENGE } },
          },
        },
        413: { description: '`invalid_request` (1002): body too large' },
        415: {
          description:
            '`invalid_request` (1002): neither application/json nor application/x-www-form-urlencoded',
        },
      },
    },
    handler: async ({ body: input, request, reply }) => {
      // Failures count per client_id and address (DESIGN.md §18); issuance per client_id (spec: 10/min), spent
      // only by a caller that proved the secret, so nobody else can exhaust it.
      const attempt = await beginCredentialAttempt(
        ctx,
        'operatorTokenFailures',
        input.client_id,
        request.ip,
        reply,
      );
      const authenticated = await ctx.clientTokens.authenticate(input.client_id, input.client_secret);
      if (!authenticated) {
        await attempt.failed();
        throw errors.unauthorized('Invalid client credentials');
      }
      await enforceRateLimit(ctx, 'operatorToken', input.client_id, reply);
      const token = await ctx.clientTokens.issue(authenticated, input.scope);
      // Never cached (RFC 6749 §5.1).
      reply.header('cache-control', 'no-store').header('pragma', 'no-cache');
      return token;
    },
  });
}
