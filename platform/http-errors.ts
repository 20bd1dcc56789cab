import type { FastifyError, FastifyInstance } from 'fastify';
import { ErrorCode, type ErrorResponse } from '../shared/index.js';
import { ApiError } from './api-error.js';

/** Fastify's own client errors (body parsing, content type, size) mapped to the spec's codes (DESIGN.md §4). */
function fromFastify(err: FastifyError): ApiError | undefined {
  switch (err.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new ApiError(ErrorCode.MALFORMED_BODY, 'Unsupported content type; send application/json', {
        status: 415,
      });
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ApiError(ErrorCode.MALFORMED_BODY, 'Request body too large', { status: 413 });
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new ApiError(ErrorCode.MALFORMED_BODY, 'Request body is empty; send a JSON object');
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new ApiError(ErrorCode.MALFORMED_BODY, 'Request body is not valid JSON');
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new ApiError(ErrorCode.MALFORMED_BODY, 'Content-Length does not match the body');
    default:
      break;
  }
  if (err instanceof SyntaxError || err.name === 'SyntaxError') {
    return new ApiError(ErrorCode.MALFORMED_BODY, 'Request body is not valid JSON');
  }
  if (typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500) {
    return new ApiError(ErrorCode.MALFORMED_BODY, 'Malformed request', { status: err.statusCode });
  }
  return undefined;
}

export function installErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError, request, reply) => {
    const api = err instanceof ApiError ? err : fromFastify(err);
    if (api) {
      if (api.headers) reply.headers(api.headers);
      return reply.code(api.status).send(api.toBody());
    }
    // Never leak stack traces, SQL or paths: log them, answer a bare 9001.
    request.log.error({ err }, 'internal error');
    const body: ErrorResponse = { code: ErrorCode.INTERNAL, message: 'Internal error' };
    return reply.code(500).send(body);
  });

  app.setNotFoundHandler((request, reply) => {
    const body: ErrorResponse = {
      code: ErrorCode.NOT_FOUND,
      message: `Route ${request.method} ${request.url.split('?')[0]} not found`,
    };
    return reply.code(404).send(body);
  });
}
