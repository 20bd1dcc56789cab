import { errors } from 'undici';
import { describe, expect, it } from 'vitest';
import { BlockedAddressError } from '../../../platform/webhooks/address-policy.js';
import { attemptErrorCategory, storedErrorCategory } from '../../../platform/webhooks/delivery-errors.js';

/** A socket error as Node raises it (`code`, `syscall`, the address in the message). */
function sysError(code: string, message = `connect ${code} 127.0.0.1:18099`): NodeJS.ErrnoException {
  return Object.assign(new Error(message), { code, syscall: 'connect' });
}
/** How undici's `request` rejects on a socket failure: its own error, the socket's as `cause`. */
function wrapped(cause: Error): Error {
  return Object.assign(new TypeError('fetch failed'), { cause });
}

describe('attemptErrorCategory', () => {
  it.each([
    ['ECONNREFUSED', sysError('ECONNREFUSED'), 'connection_refused'],
    ['ECONNREFUSED in cause', wrapped(sysError('ECONNREFUSED')), 'connection_refused'],
    ['ECONNRESET', sysError('ECONNRESET', 'read ECONNRESET'), 'connection_refused'],
    ['EHOSTUNREACH', sysError('EHOSTUNREACH'), 'connection_refused'],
    ['ENETUNREACH', sysError('ENETUNREACH'), 'connection_refused'],
    ['undici SocketError', new errors.SocketError('other side closed'), 'connection_refused'],
    ['a plain Error', new Error('something'), 'connection_refused'],
    ['not an error at all', 'boom', 'connection_refused'],
    ['ETIMEDOUT', sysError('ETIMEDOUT'), 'timeout'],
    ['undici ConnectTimeoutError', new errors.ConnectTimeoutError(), 'timeout'],
    ['undici HeadersTimeoutError', new errors.HeadersTimeoutError(), 'timeout'],
    ['undici BodyTimeoutError', new errors.BodyTimeoutError(), 'timeout'],
    ['AbortSignal.timeout reason', new DOMException('The operation timed out', 'TimeoutError'), 'timeout'],
    ['an abort', new DOMException('aborted', 'AbortError'), 'timeout'],
    ['ENOTFOUND', sysError('ENOTFOUND', 'getaddrinfo ENOTFOUND hooks.invalid'), 'dns_error'],
    ['EAI_AGAIN in cause', wrapped(sysError('EAI_AGAIN', 'getaddrinfo EAI_AGAIN x')), 'dns_error'],
    ['self-signed', sysError('DEPTH_ZERO_SELF_SIGNED_CERT', 'self-signed certificate'), 'tls_error'],
    ['unknown issuer', sysError('UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'unable to verify'), 'tls_error'],
    ['expired', sysError('CERT_HAS_EXPIRED', 'certificate has expired'), 'tls_error'],
    ['wrong name', sysError('ERR_TLS_CERT_ALTNAME_INVALID', 'Hostname/IP does not match'), 'tls_error'],
    ['protocol', sysError('ERR_SSL_WRONG_VERSION_NUMBER', 'wrong version number'), 'tls_error'],
    ['EPROTO', sysError('EPROTO', 'write EPROTO'), 'tls_error'],
    [
      'a name resolving to loopback',
      wrapped(new BlockedAddressError('x resolves to 127.0.0.1, a non-public address')),
      'address_not_allowed',
    ],
  ])('%s → %s', (_what, err, expected) => {
    expect(attemptErrorCategory(err)).toBe(expected);
  });
});

describe('storedErrorCategory: what rows written before categories show', () => {
  it.each([
    [null, null],
    ['timeout', 'timeout'],
    ['connection_refused', 'connection_refused'],
    ['tls_error', 'tls_error'],
    ['dns_error', 'dns_error'],
    ['address_not_allowed', 'address_not_allowed'],
    ['http_status', 'http_status'],
    ['HTTP 500', 'http_status'],
    ['HTTP 410', 'http_status'],
    ['ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:18099', 'connection_refused'],
    ['ECONNRESET: read ECONNRESET', 'connection_refused'],
    ['UND_ERR_CONNECT_TIMEOUT: Connect Timeout Error (attempted address: 10.0.0.1:443)', 'timeout'],
    ['UND_ERR_HEADERS_TIMEOUT: Headers Timeout Error', 'timeout'],
    ['ENOTFOUND: getaddrinfo ENOTFOUND hooks.invalid', 'dns_error'],
    ['DEPTH_ZERO_SELF_SIGNED_CERT: self-signed certificate', 'tls_error'],
    ['WEBHOOK_ADDRESS_BLOCKED: x resolves to 127.0.0.1, a non-public address', 'address_not_allowed'],
    ['host.example resolves to 10.0.0.1, a non-public address', 'address_not_allowed'],
    ['10.0.0.7 is not a public address', 'address_not_allowed'],
    ['localhost is not allowed', 'address_not_allowed'],
    ['This operation was aborted', 'timeout'],
    ['The operation was aborted due to timeout', 'timeout'],
    ['other side closed 127.0.0.1:18099', 'connection_refused'],
  ])('%s → %s', (stored, expected) => {
    expect(storedErrorCategory(stored)).toBe(expected);
  });
});
