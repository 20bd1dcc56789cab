import { isUtf8 } from 'node:buffer';
import type { FastifyInstance } from 'fastify';
import { ErrorCode } from '../../shared/index.js';
import { ApiError } from '../domain/api-error.js';

const FORM_ROUTE = '/v1/operator/oauth/token';

/**
 * Bodies are JSON (spec rule 2), read as bytes and kept raw for HMAC request signatures; form bodies only for the
 * OAuth token endpoint.
 */
export function installBodyParsers(app: FastifyInstance): void {
  // Fastify's built-in text/plain parser would let strings through.
  app.removeContentTypeParser('text/plain');
  // Parsing stays Fastify's (prototype-poisoning safe).
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  // Read as bytes: decoding as a string would silently turn invalid UTF-8 into U+FFFD and store corrupted text
  // (RFC 8259 §8.1: JSON exchanged between systems is UTF-8), so such a body is refused like invalid JSON.
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    if (!isUtf8(body as Buffer)) {
      done(new ApiError(ErrorCode.MALFORMED_BODY, 'Request body is not valid UTF-8'));
      return;
    }
    const text = (body as Buffer).toString('utf8');
    request.rawBody = text;
    parseJson(request, text, done);
  });
  // OAuth client libraries send form bodies to the token endpoint; everywhere else only JSON is accepted.
  app.addContentTypeParser(
    'application/x-www-form-urlencoded',
    { parseAs: 'buffer' },
    (request, body, done) => {
      if (request.routeOptions.url !== FORM_ROUTE) {
        done(
          new ApiError(ErrorCode.MALFORMED_BODY, 'Unsupported content type; send application/json', {
            status: 415,
          }),
        );
        return;
      }
      if (!isUtf8(body as Buffer)) {
        done(new ApiError(ErrorCode.MALFORMED_BODY, 'Request body is not valid UTF-8'));
        return;
      }
      done(null, Object.fromEntries(new URLSearchParams((body as Buffer).toString('utf8'))));
    },
  );
}
