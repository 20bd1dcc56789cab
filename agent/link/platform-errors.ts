/**
 * How the agent classifies a failed platform call, once, so that every loop treats failures alike: network
 * errors, timeouts, 5xx, 429 and malformed answers are retryable (429 carries the server's `retry_after`);
 * other 4xx are permanent for that request when they are the platform's own refusal (its error envelope, with
 * a code documented for the status). A 3xx or a 4xx page from a proxy in between is malformed, hence retried.
 */
import { ErrorResponse } from '../../shared/envelope.js';
import { ERROR_HTTP_STATUS, ErrorCode } from '../../shared/error-codes.js';

export type FailureKind =
  /** No HTTP answer: DNS, TCP, TLS, reset, timeout. */
  | 'network'
  /** 5xx. */
  | 'server'
  /** 429. */
  | 'rate_limited'
  /**
   * A 2xx whose body is not the documented envelope, or an error that is not the platform's: a 3xx, or a 4xx
   * without an ErrorResponse carrying a code documented for its status (see `failureOf`).
   */
  | 'malformed'
  /** 401 that survived a token renewal (or on the credential endpoints). */
  | 'unauthorized'
  /** 403. */
  | 'forbidden'
  /** 404. */
  | 'not_found'
  /** 409. */
  | 'conflict'
  /** Any other 4xx: the request itself is wrong and will not get better by repeating it. */
  | 'rejected';

const RETRYABLE: ReadonlySet<FailureKind> = new Set(['network', 'server', 'rate_limited', 'malformed']);

export class PlatformError extends Error {
  readonly kind: FailureKind;
  readonly retryable: boolean;
  readonly status?: number;
  readonly code?: number;
  /** What the server asked us to wait, seconds (429). */
  readonly retryAfterSeconds?: number;
  readonly details?: Record<string, unknown>;
  constructor(
    kind: FailureKind,
    message: string,
    extra: {
      status?: number;
      code?: number;
      retryAfterSeconds?: number;
      details?: Record<string, unknown>;
      cause?: unknown;
    } = {},
  ) {
    super(message, extra.cause === undefined ? undefined : { cause: extra.cause });
    this.name = 'PlatformError';
    this.kind = kind;
    this.retryable = RETRYABLE.has(kind);
    if (extra.status !== undefined) this.status = extra.status;
    if (extra.code !== undefined) this.code = extra.code;
    if (extra.retryAfterSeconds !== undefined) this.retryAfterSeconds = extra.retryAfterSeconds;
    if (extra.details !== undefined) this.details = extra.details;
  }
}

export function isPlatformError(error: unknown): error is PlatformError {
  return error instanceof PlatformError;
}

/** `Retry-After`: delta-seconds or an HTTP date. */
export function parseRetryAfter(value: string | string[] | undefined, nowMs: number): number | undefined {
  const raw = Array.isArray(value) ? value[0] : value;
  if (raw === undefined || raw.trim() === '') return undefined;
  if (/^\d+$/.test(raw.trim())) return Number(raw.trim());
  const at = Date.parse(raw);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, Math.ceil((at - nowMs) / 1000));
}

function kindOfStatus(status: number): FailureKind {
  if (status === 429) return 'rate_limited';
  if (status >= 500) return 'server';
  if (status === 401) return 'unauthorized';
  if (status === 403) return 'forbidden';
  if (status === 404) return 'not_found';
  if (status === 409) return 'conflict';
  if (status === 408) return 'network';
  return 'rejected';
}

/** Whether `code` is one the platform documents for `status` (DESIGN.md §4; 1002 also comes as 413 and 415). */
function documentedFor(status: number, code: number): boolean {
  const usual = (ERROR_HTTP_STATUS as Record<number, number | undefined>)[code];
  return usual === status || (code === ErrorCode.MALFORMED_BODY && (status === 413 || status === 415));
}

/**
 * The error a non-2xx answer stands for. Pure, for tests.
 *
 * A refusal counts as the platform's word — permanent for a 4xx, which makes the uplink drop what it sent —
 * only when it carries the platform's error envelope with a code documented for that status. Anything else
 * outside 5xx, 429 and 408 (a 3xx, a proxy's or captive portal's 4xx page, an envelope whose code does not
 * belong to its status) is `malformed`, and retried: it says nothing about the request.
 */
export function failureOf(
  status: number,
  body: unknown,
  headers: Record<string, string | string[] | undefined>,
  nowMs: number,
): PlatformError {
  const parsed = ErrorResponse.safeParse(body);
  const fromHeader = parseRetryAfter(headers['retry-after'], nowMs);
  const ownKind = kindOfStatus(status);
  const speaks = parsed.success && documentedFor(status, parsed.data.code);
  const kind = speaks || RETRYABLE.has(ownKind) ? ownKind : 'malformed';
  if (!parsed.success) {
    return new PlatformError(kind, `HTTP ${status} without an error envelope`, {
      status,
      ...(fromHeader !== undefined ? { retryAfterSeconds: fromHeader } : {}),
    });
  }
  const { code, message, details } = parsed.data;
  const fromBody = details?.retry_after_seconds;
  const retryAfterSeconds =
    typeof fromBody === 'number' && Number.isFinite(fromBody) && fromBody >= 0 ? fromBody : fromHeader;
  return new PlatformError(kind, `HTTP ${status} code ${code}: ${message}`, {
    status,
    code,
    ...(retryAfterSeconds !== undefined ? { retryAfterSeconds } : {}),
    ...(details !== undefined ? { details } : {}),
  });
}
