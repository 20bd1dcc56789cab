import type { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import * as z from 'zod';
import { ErrorCode, ok, RATE_LIMIT_MESSAGE, type Scope } from '../../shared/index.js';
import { ApiError } from '../domain/api-error.js';
import { authenticateDevice, authenticateOperator } from './auth/authenticate.js';
import { verifyRequestSignature } from './auth/request-signature.js';
import type { PlatformContext } from './context.js';
import { parse } from './parse.js';
import { addressKey } from './rate-limit/address-key.js';
import { type RateClass, type RateDecision, rateLimitHeader } from './rate-limit/rate-limiter.js';
import { registerStreamedRoute, requireOctetStream } from './streamed-body.js';

/**
 * One declaration per endpoint: method, path, who may call it, its rate-limit class and its shared zod
 * schemas. The same table registers the Fastify routes (auth → rate limit → signature → validation → handler,
 * in that order, for every route alike) and generates the OpenAPI document, so the two cannot drift apart.
 */
export type RouteAuth = { kind: 'none' } | { kind: 'operator'; scope: Scope } | { kind: 'device' };

type Schema = z.core.$ZodType;
type Infer<S> = S extends z.core.$ZodType ? z.infer<S> : undefined;

export interface RouteInput<B, Q, P> {
  body: Infer<B>;
  query: Infer<Q>;
  params: Infer<P>;
  request: FastifyRequest;
  reply: FastifyReply;
}

export interface RouteSpec<
  B extends Schema | undefined = Schema | undefined,
  Q extends Schema | undefined = Schema | undefined,
  P extends Schema | undefined = Schema | undefined,
  R extends Schema = Schema,
> {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** Fastify syntax: `/v1/operator/devices/:device_id`. */
  url: string;
  summary: string;
  description?: string;
  tag: 'operator' | 'device' | 'system';
  auth: RouteAuth;
  rate?: RateClass;
  body?: B;
  /**
   * A cheaper check of the body for the hottest routes (flat-body-check.ts): it accepts only what `body`
   * accepts and answers what `body`'s parse would; what it leaves (undefined) is parsed by `body`.
   */
  quickBody?: (input: unknown) => Infer<B> | undefined;
  /** Builds the input to validate from the request (the token endpoint merges HTTP Basic credentials). */
  prepareBody?: (request: FastifyRequest) => unknown;
  /** The body may be left out entirely (validated as `{}`). */
  bodyOptional?: boolean;
  bodyLimit?: number;
  /**
   * The body is a file (`application/octet-stream`, any other type answers 415), handed to the handler unread as
   * the request stream (streamed-body.ts): never buffered, whatever its size, so the handler enforces its limit.
   * `description` documents it.
   */
  streamed?: { description: string };
  /**
   * The answer is a file, not JSON: the handler returns a `BinaryAnswer` (status, headers, a stream) and
   * `response` is not used. `description` documents it; `partial` says it answers ranges (206, 416);
   * `contentType` is its media type (default `application/octet-stream`); `headers` documents further headers
   * of the answer, by name.
   */
  binary?: {
    description: string;
    partial?: boolean;
    contentType?: string;
    headers?: Record<string, { description: string }>;
  };
  /** Request headers to validate before the handler runs (and to document), by lower-case name. */
  headers?: Schema;
  query?: Q;
  params?: P;
  /** Schema of `data` (or of the whole body when `raw`). */
  response: R;
  /** Not enveloped (the operator token response). */
  raw?: boolean;
  /**
   * Error statuses this route answers besides those the OpenAPI generator derives from the declaration
   * (openapi.ts `statusesOf`: 400, 401, 403, 404, 413, 415, 429, 500, 503).
   */
  errors?: number[];
  /** Reshapes every error this route answers, however raised (the token endpoint's RFC 6749 errors). */
  mapError?: (err: ApiError) => ApiError;
  /**
   * For the OpenAPI document, when the request as a client sends it differs from what `body` validates after
   * `prepareBody`: `body` documents the body sent, `security` the alternative ways to authenticate (the token
   * endpoint: client credentials in the body, or as HTTP Basic).
   */
  documented?: { body?: Schema; security?: Array<Record<string, string[]>> };
  /** This route's error answers at some statuses, when not the plain ErrorResponse (for the OpenAPI document). */
  errorBody?: {
    /** Name of the schema in the document's components. */
    name: string;
    schema: Schema;
    responses: Readonly<Record<number, { description: string; headers?: Record<string, unknown> }>>;
  };
  handler(input: RouteInput<B, Q, P>): Promise<z.infer<R>>;
}

/** What a `binary` route's handler returns: sent as it is. */
export interface BinaryAnswer {
  status: number;
  headers: Record<string, string>;
  body: Readable;
}

/** The `response` of a `binary` route: what its handler returns, never validated or documented as JSON. */
export const BinaryResponse = z.custom<BinaryAnswer>();

export function route<
  B extends Schema | undefined,
  Q extends Schema | undefined,
  P extends Schema | undefined,
  R extends Schema,
>(spec: RouteSpec<B, Q, P, R>): RouteSpec<B, Q, P, R> {
  return spec;
}

// biome-ignore lint/suspicious/noExplicitAny: a heterogeneous table of routes, each typed where it is declared
export type AnyRoute = RouteSpec<any, any, any, any>;

function subjectOf(request: FastifyRequest): string | undefined {
  return request.operator?.clientId ?? request.device?.deviceId;
}

function refuse(
  ctx: PlatformContext,
  rate: RateClass,
  decision: RateDecision,
  headers: Record<string, string>,
) {
  ctx.metrics.rateLimited(rate);
  return new ApiError(ErrorCode.RATE_LIMITED, RATE_LIMIT_MESSAGE, {
    details: { retry_after_seconds: decision.resetSeconds },
    headers: { ...headers, 'retry-after': String(decision.resetSeconds) },
  });
}

/**
 * Adds `rate`'s item to a RateLimit header list (several classes may apply to one request: the address budget
 * and a credential's), replacing an item of the same class from earlier in this request.
 */
function withItem(reply: FastifyReply, name: string, rate: RateClass, item: string): string {
  const prev = reply.getHeader(name);
  if (typeof prev !== 'string' || prev === '') return item;
  const own = `"${rate}";`;
  return [...prev.split(', ').filter((i) => !i.startsWith(own)), item].join(', ');
}

/** Counts the request against `subject`'s budget, sets the RateLimit headers, and refuses (429) past it. */
export function applyDecision(
  ctx: PlatformContext,
  rate: RateClass,
  decision: RateDecision,
  reply: FastifyReply,
) {
  const policy = withItem(reply, 'ratelimit-policy', rate, ctx.rateLimiter.policyHeader(rate));
  const current = withItem(reply, 'ratelimit', rate, rateLimitHeader(rate, decision));
  reply.header('ratelimit-policy', policy).header('ratelimit', current);
  // The 429's own headers repeat them: that object is built only for a refusal.
  if (!decision.allowed)
    throw refuse(ctx, rate, decision, { 'ratelimit-policy': policy, ratelimit: current });
}

/** Synchronous when the limiter's store is (the in-memory one): no promise per request on the hot path. */
function enforceRateLimit(
  ctx: PlatformContext,
  rate: RateClass,
  subject: string,
  reply: FastifyReply,
): void | Promise<void> {
  const decision = ctx.rateLimiter.check(rate, subject);
  if (decision instanceof Promise) return decision.then((d) => applyDecision(ctx, rate, d, reply));
  applyDecision(ctx, rate, decision, reply);
}

export { enforceRateLimit };

/**
 * A route without query parameters refuses any, as routes with some refuse unknown ones (docs/api.md, "Unknown
 * query parameters"): a mistyped parameter never passes silently.
 */
const NO_QUERY = z.strictObject({});
function refuseAnyQuery(query: unknown): undefined {
  if (query !== null && typeof query === 'object') {
    for (const _ in query) {
      parse(NO_QUERY, query);
      break;
    }
  }
  return undefined;
}

export function registerRoutes(
  app: FastifyInstance,
  ctx: PlatformContext,
  routes: readonly AnyRoute[],
): void {
  for (const spec of routes) {
    const options: RouteOptions = {
      method: spec.method,
      url: spec.url,
      ...(spec.bodyLimit ? { bodyLimit: spec.bodyLimit } : {}),
      ...(spec.mapError ? { config: { mapError: spec.mapError } } : {}),
      handler: async (request, reply) => {
        const authenticated =
          spec.auth.kind === 'operator'
            ? authenticateOperator(ctx, request, spec.auth.scope)
            : spec.auth.kind === 'device'
              ? authenticateDevice(ctx, request)
              : undefined;
        if (authenticated) await authenticated;
        // An unauthenticated route's budget is its caller's address (DESIGN.md §18; IPv6 per /64).
        const subject = spec.auth.kind === 'none' ? addressKey(request.ip) : subjectOf(request);
        if (spec.rate && subject) {
          const limited = enforceRateLimit(ctx, spec.rate, subject, reply);
          if (limited) await limited;
        }
        // A present signature is verified on reads too (docs/api.md); only writes can be made to require one.
        if (spec.auth.kind !== 'none') {
          const verified = verifyRequestSignature(ctx, request);
          if (verified) await verified;
        }

        const params = spec.params ? parse(spec.params, request.params) : undefined;
        const query = spec.query ? parse(spec.query, request.query ?? {}) : refuseAnyQuery(request.query);
        if (spec.headers) parse(spec.headers, request.headers);
        // A file's type is checked once the request around it is known to be good (streamed-body.ts).
        if (spec.streamed) requireOctetStream(request);
        const given = spec.prepareBody ? spec.prepareBody(request) : request.body;
        const rawBody = given === undefined && spec.bodyOptional ? {} : given;
        const body = spec.body ? (spec.quickBody?.(rawBody) ?? parse(spec.body, rawBody)) : undefined;
        const data = await spec.handler({ body, query, params, request, reply });
        if (spec.binary) {
          const answer = data as BinaryAnswer;
          return reply.code(answer.status).headers(answer.headers).send(answer.body);
        }
        return spec.raw ? data : ok(data);
      },
    };
    if (spec.streamed) registerStreamedRoute(app, options);
    else app.route(options);
  }
}
