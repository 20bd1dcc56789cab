import { DeliveryErrorCategory } from '../../shared/index.js';

/**
 * What a failed delivery attempt records as `last_error` (DESIGN.md §18): a category, never the socket's own
 * message, which names the address and port tried (`ECONNREFUSED 127.0.0.1:18099`) and would let any operator
 * probe the platform's network through the deliveries log.
 */

const DNS_CODES = new Set(['ENOTFOUND', 'EAI_AGAIN', 'EAI_FAIL', 'EAI_NONAME', 'EAI_NODATA', 'ENODATA']);
const TIMEOUT_CODES = new Set([
  'ETIMEDOUT',
  'ESOCKETTIMEDOUT',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'ABORT_ERR',
]);
/** OpenSSL's certificate verdicts, as Node names them in `err.code`. */
const TLS_CODE = /^(ERR_TLS_|ERR_SSL_|EPROTO$)|CERT|UNABLE_TO_|SELF_SIGNED|HOSTNAME_MISMATCH/;

type ErrorLike = { code?: unknown; name?: unknown; cause?: unknown };

function codeOf(e: ErrorLike): string {
  return typeof e.code === 'string' ? e.code : '';
}

/** The category of an error thrown by the attempt (connecting, TLS, the request, its time limit). */
export function attemptErrorCategory(err: unknown): DeliveryErrorCategory {
  // undici wraps the socket's error in `cause`; look at every layer, outermost first.
  const layers: ErrorLike[] = [];
  for (let e: unknown = err; e && typeof e === 'object' && layers.length < 5; e = (e as ErrorLike).cause)
    layers.push(e as ErrorLike);
  for (const e of layers) {
    const code = codeOf(e);
    if (code === 'WEBHOOK_ADDRESS_BLOCKED') return 'address_not_allowed';
    if (DNS_CODES.has(code)) return 'dns_error';
    if (TIMEOUT_CODES.has(code) || e.name === 'TimeoutError' || e.name === 'AbortError') return 'timeout';
    if (TLS_CODE.test(code)) return 'tls_error';
  }
  // Refused, reset, unreachable, closed mid-answer: the receiver could not be talked to.
  return 'connection_refused';
}

const CATEGORIES: ReadonlySet<string> = new Set(DeliveryErrorCategory.options);

/**
 * `last_error` as stored, read as a category. Rows written before categories hold the raw text (`HTTP 500`,
 * `ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:18099`, `… a non-public address`): mapped here on every read
 * rather than rewritten by a migration, so no code path can show one, whatever the backend or its age.
 */
export function storedErrorCategory(stored: string | null): DeliveryErrorCategory | null {
  if (stored === null) return null;
  if (CATEGORIES.has(stored)) return stored as DeliveryErrorCategory;
  if (/^HTTP \d{3}$/.test(stored)) return 'http_status';
  if (/non-public address|not a public address|localhost is not allowed/.test(stored))
    return 'address_not_allowed';
  const code = /^([A-Z][A-Z0-9_]+):/.exec(stored)?.[1] ?? '';
  if (code) return attemptErrorCategory({ code });
  if (/timeout|timed out|aborted/i.test(stored)) return 'timeout';
  return 'connection_refused';
}
