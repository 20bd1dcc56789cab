import type { IncomingMessage } from 'node:http';
import type { FastifyBaseLogger, FastifyError, FastifyInstance } from 'fastify';
import { ErrorCode, type ErrorResponse } from '../../shared/index.js';
import { ApiError } from '../domain/api-error.js';
import { type StorageFault, type StorageFaultKind, storageFaultOf } from '../storage/storage-faults.js';
import { isPreflight, refusePreflight } from './cors.js';

/** How long a client should wait before retrying a write refused by a storage fault. */
export const STORAGE_RETRY_AFTER_SECONDS = 30;

const STORAGE_MESSAGE: Record<StorageFaultKind, string> = {
  full: 'Storage is full; try again later',
  read_only: 'Storage is read-only; try again later',
  unavailable: 'Storage is unavailable; try again later',
};

/** What the operator must do, logged (never sent): the client only learns to come back later. */
const OPERATOR_ACTION: Record<StorageFaultKind, string> = {
  full:
    'storage full: the file system of the data directory has no space left; writes answer 503 until space is ' +
    'freed there, then resume by themselves',
  read_only:
    'storage read-only: SQLite cannot write to the data directory; writes answer 503 until it is writable ' +
    'again (a file system remounted read-only needs a restart of the platform after it is fixed)',
  unavailable:
    'storage I/O error: SQLite cannot write to (or read) the data directory; check its disk and that its file ' +
    'system is mounted read-write (after a forced read-only remount, restart the platform once it is fixed)',
};

/** The same for the PostgreSQL server (`--database postgres://…`). */
const POSTGRES_ACTION: Record<StorageFaultKind, string> = {
  full: 'storage full: the PostgreSQL server has no disk space left; writes answer 503 until it has, then resume',
  read_only:
    'storage read-only: the PostgreSQL server accepts no writes (a read-only or standby server?); writes answer ' +
    '503 until --database names a writable one',
  unavailable:
    'storage unavailable: the PostgreSQL server cannot be reached or is shutting down; requests that need it ' +
    'answer 503 until it is back, then resume by themselves',
};

/**
 * A storage fault (disk full, read-only or failing data directory) answers 503 with Retry-After and code 9001:
 * the request was fine, the platform cannot store it now. Nothing of the request was stored (its transaction
 * rolled back), so the client retries the same request later.
 */
export function storageFaultError(fault: StorageFault): ApiError {
  return new ApiError(ErrorCode.INTERNAL, STORAGE_MESSAGE[fault.kind], {
    status: 503,
    headers: { 'retry-after': String(STORAGE_RETRY_AFTER_SECONDS) },
  });
}

/**
 * Logs a storage fault as an operator-actionable error once, then at most once per `everyMs` per kind while
 * it lasts, instead of a stack trace per refused request.
 */
export function createStorageFaultLog(everyMs = 60_000, now: () => number = Date.now) {
  const last = new Map<StorageFaultKind, number>();
  return (log: FastifyBaseLogger, fault: StorageFault): void => {
    const t = now();
    const prev = last.get(fault.kind);
    if (prev !== undefined && t - prev < everyMs) return;
    last.set(fault.kind, t);
    const action = fault.postgres ? POSTGRES_ACTION : OPERATOR_ACTION;
    log.error({ storage_fault: fault.kind, code: fault.code }, action[fault.kind]);
  };
}
export type StorageFaultLog = ReturnType<typeof createStorageFaultLog>;

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

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * Reshapes every error a route answers, whatever raised it (body parsing, validation, handler): the
     * operator token endpoint adds RFC 6749's `error` (route-spec.ts `mapError`).
     */
    mapError?: (err: ApiError) => ApiError;
  }
}

/** The client closed the connection before its request was read whole. */
function clientWentAway(raw: IncomingMessage): boolean {
  return raw.destroyed && !raw.complete;
}

export function installErrorHandling(
  app: FastifyInstance,
  logStorageFault: StorageFaultLog = createStorageFaultLog(),
): void {
  app.setErrorHandler((err: FastifyError, request, reply) => {
    const fault = err instanceof ApiError ? undefined : storageFaultOf(err);
    if (fault) logStorageFault(request.log, fault);
    else if (clientWentAway(request.raw)) {
      // The client cut its request (an upload mid-body, a closed long poll): nothing of ours failed, and
      // nobody is left to answer. Not an error of the platform, still worth a line.
      request.log.info({ code: (err as { code?: unknown }).code }, 'request aborted by the client');
      return reply.code(400).send();
    }
    let api = err instanceof ApiError ? err : fault ? storageFaultError(fault) : fromFastify(err);
    if (!api) {
      // Never leak stack traces, SQL or paths: log them, answer a bare 9001.
      request.log.error({ err }, 'internal error');
      api = new ApiError(ErrorCode.INTERNAL, 'Internal error');
    }
    const mapError = request.routeOptions.config?.mapError;
    if (mapError) api = mapError(api);
    if (api.headers) reply.headers(api.headers);
    return reply.code(api.status).send(api.toBody());
  });

  app.setNotFoundHandler((request, reply) => {
    // While CORS is off, a browser's preflight is refused as such (cors.ts), not as a request for a wrong path.
    if (isPreflight(request)) return refusePreflight(request, reply);
    const body: ErrorResponse = {
      code: ErrorCode.NOT_FOUND,
      message: `Route ${request.method} ${request.url.split('?')[0]} not found`,
    };
    return reply.code(404).send(body);
  });
}
