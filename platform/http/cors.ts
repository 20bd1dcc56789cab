import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ErrorCode, type ErrorResponse } from '../../shared/index.js';

/**
 * CORS for browser integrations (DESIGN.md §15): only for the origins `serve --cors-origin` names, compared
 * exactly. Off by default, and then nothing of this is registered (the ingest path pays nothing for it).
 *
 * - An allowed origin's preflight (`OPTIONS` with `Origin` and `Access-Control-Request-Method`, any path) answers
 *   204 with the methods, headers and max-age below, before any authentication or rate limit.
 * - Every response to an allowed origin carries `Access-Control-Allow-Origin` (that origin) and exposes the
 *   headers below; every response carries `Vary: Origin` while CORS is on, for caches.
 * - Any other origin gets no `Access-Control-*` header. Its preflight answers 403 with an ErrorResponse (2003),
 *   also while CORS is off (`http-errors.ts`), rather than a 404 that would send the integrator looking for a
 *   wrong path; the browser then refuses the request it wanted to send.
 */
export const CORS_ALLOW_METHODS = 'GET, POST, PUT, PATCH, DELETE';
// An artifact upload sends its signature in a header; a download may be conditional or ranged (diagnostics,
// artifacts), and its answer's ETag, Content-Range and file name are what a page needs to read.
export const CORS_ALLOW_HEADERS =
  'Authorization, Content-Type, X-Signature, X-Timestamp, X-Request-Id, X-Artifact-Signature, If-None-Match, If-Range, Range';
export const CORS_EXPOSE_HEADERS =
  'RateLimit, RateLimit-Policy, Retry-After, X-Request-Id, X-API-Version, ETag, Content-Range, Content-Disposition';
export const CORS_MAX_AGE_SECONDS = 600;

/**
 * Checks one `--cors-origin` value: a serialized origin (`scheme://host[:port]`, no path, no trailing slash), as
 * browsers send it in `Origin`. Returns it, or throws with the reason.
 */
export function parseCorsOrigin(value: string): string {
  const text = value.trim();
  if (text === '*' || text === 'null')
    throw new Error(`${JSON.stringify(text)} is not allowed: name each origin exactly`);
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new Error(`${JSON.stringify(text)} is not an origin such as https://app.example.com`);
  }
  if ((url.protocol !== 'https:' && url.protocol !== 'http:') || url.origin !== text)
    throw new Error(
      `${JSON.stringify(text)} is not an origin: give scheme://host[:port] with no path or trailing slash ` +
        `(${url.protocol === 'https:' || url.protocol === 'http:' ? url.origin : 'https://app.example.com'})`,
    );
  return text;
}

/** A CORS preflight: what a browser sends before a cross-origin request that is not "simple". */
export function isPreflight(request: FastifyRequest): boolean {
  return (
    request.method === 'OPTIONS' &&
    typeof request.headers.origin === 'string' &&
    request.headers['access-control-request-method'] !== undefined
  );
}

/** The answer to a preflight from an origin that is not allowed (or while CORS is off). */
export function refusePreflight(request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const body: ErrorResponse = {
    code: ErrorCode.FORBIDDEN,
    message: 'Cross-origin requests from this origin are not allowed',
    details: { field: 'origin', value: String(request.headers.origin).slice(0, 200) },
  };
  return reply.code(403).send(body);
}

export function installCors(app: FastifyInstance, origins: readonly string[]): void {
  const allowed = new Set(origins);
  // A callback hook, not an async one: no promise per request.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('vary', 'Origin');
    const origin = request.headers.origin;
    if (origin !== undefined && allowed.has(origin)) {
      reply
        .header('access-control-allow-origin', origin)
        .header('access-control-expose-headers', CORS_EXPOSE_HEADERS);
    }
    done();
  });
  // Every path, including those with path parameters: the API has no OPTIONS route of its own. Answered here,
  // before any authentication or rate limit (a browser sends no credentials with a preflight).
  app.options('/*', (request, reply) => {
    if (!isPreflight(request)) return reply.callNotFound();
    if (!allowed.has(request.headers.origin as string)) return refusePreflight(request, reply);
    return reply
      .code(204)
      .header('access-control-allow-methods', CORS_ALLOW_METHODS)
      .header('access-control-allow-headers', CORS_ALLOW_HEADERS)
      .header('access-control-max-age', String(CORS_MAX_AGE_SECONDS))
      .header('content-length', '0')
      .send();
  });
}
