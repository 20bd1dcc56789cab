import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyRequest, RouteOptions } from 'fastify';
import { ErrorCode } from '../../shared/index.js';
import { ApiError } from '../domain/api-error.js';

const OCTET_STREAM = 'application/octet-stream';

/**
 * Registers a route whose body is a file (route-spec.ts `streamed`) in a context of its own, where every body is
 * handed to the handler unread, as the request stream: never buffered, whatever its size or type, so that a
 * JSON body sent there is not read into memory either. The handler checks the type once the caller is known.
 */
export function registerStreamedRoute(app: FastifyInstance, options: RouteOptions): void {
  app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (_request, payload, done) => done(null, payload));
    // Answered before the body was read to its end (a refusal): close the connection rather than let the
    // client send the rest of a file of up to 512 MiB, which Node would read and throw away to keep it alive.
    scope.addHook('onSend', (request, reply, _payload, done) => {
      if (!request.raw.complete) reply.header('connection', 'close');
      done();
    });
    scope.route(options);
  });
}

/** Only `application/octet-stream` (415 otherwise, as for a JSON route sent something else). */
export function requireOctetStream(request: FastifyRequest): void {
  const type = request.headers['content-type']?.split(';')[0]?.trim().toLowerCase();
  if (type !== OCTET_STREAM) {
    throw new ApiError(ErrorCode.MALFORMED_BODY, `Unsupported content type; send ${OCTET_STREAM}`, {
      status: 415,
    });
  }
}

/** The request stream of a streamed route; an empty one when the request has no body at all. */
export function streamedBody(request: FastifyRequest): Readable {
  return request.body instanceof Readable ? request.body : Readable.from([]);
}
