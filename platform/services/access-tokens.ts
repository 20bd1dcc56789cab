import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Scope } from '../../shared/index.js';

/**
 * Stateless signed access tokens: `<kind>.<claims>.<mac>` with base64url JSON claims and an HMAC-SHA256 over
 * the first two parts. Verifying one needs no database read (the hot path); tokens are never stored, so there
 * is nothing to leak at rest. A new token never invalidates earlier ones. Device and operator tokens carry
 * their principal's secret generation, so rotating or resetting a secret revokes every token issued with the
 * old one (at the end of a rotation's grace), and revoking a client revokes all of its tokens.
 */
export type TokenKind = 'op' | 'dv' | 'st';

export interface OperatorClaims {
  sub: string;
  scp: Scope[];
  ops: string[];
  /** The client's secret generation; absent from tokens issued before clients had one (read as 1). */
  gen?: number;
  iat: number;
  exp: number;
}
export interface DeviceClaims {
  sub: string;
  gen: number;
  iat: number;
  exp: number;
}

/**
 * A stream ticket (DESIGN.md §8): one WebSocket connection as the client, asked for with an access token whose
 * expiry (`tex`) and secret generation it keeps; `jti` makes it usable once (the replay cache remembers it).
 */
export interface StreamTicketClaims {
  sub: string;
  scp: Scope[];
  ops: string[];
  gen: number;
  /** The access token's expiry, s: the connection closes then (4401), as one opened with the token would. */
  tex: number;
  jti: string;
  iat: number;
  exp: number;
}

export type VerifyResult<C> =
  | { ok: true; claims: C }
  | { ok: false; reason: 'malformed' | 'bad_signature' | 'wrong_kind' | 'expired' };

export function createTokenService(key: Buffer) {
  const mac = (data: string) => createHmac('sha256', key).update(data).digest();

  function sign(kind: TokenKind, claims: OperatorClaims | DeviceClaims | StreamTicketClaims): string {
    const body = `${kind}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}`;
    return `${body}.${mac(body).toString('base64url')}`;
  }

  // Tokens whose MAC was already checked: a charger sends the same token every few seconds for a day, so the
  // hot path skips the HMAC and the JSON parse. Bounded; cleared whole when full (it refills at once).
  const verified = new Map<string, { kind: string; claims: { exp: number } }>();
  const VERIFIED_MAX = 100_000;

  function verify<C extends { exp: number }>(
    token: string,
    kind: TokenKind,
    nowMs: number,
    remember = true,
  ): VerifyResult<C> {
    const hit = verified.get(token);
    if (hit) {
      if (hit.kind !== kind) return { ok: false, reason: 'wrong_kind' };
      if (hit.claims.exp * 1000 <= nowMs) return { ok: false, reason: 'expired' };
      return { ok: true, claims: hit.claims as C };
    }
    const first = token.indexOf('.');
    const last = token.lastIndexOf('.');
    if (first <= 0 || last === first || token.length > 4096) return { ok: false, reason: 'malformed' };
    const body = token.slice(0, last);
    // Compare the MAC's text, not its decoded bytes: the base64url decoder skips characters outside the
    // alphabet and ignores the spare bits of the last one, so many altered tokens would decode to the same MAC.
    const given = Buffer.from(token.slice(last + 1), 'latin1');
    const expected = Buffer.from(mac(body).toString('base64url'), 'latin1');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
      return { ok: false, reason: 'bad_signature' };
    }
    // Kind is checked after the MAC so a device token on an operator route is refused, not mis-read.
    if (token.slice(0, first) !== kind) return { ok: false, reason: 'wrong_kind' };
    let claims: C;
    try {
      claims = JSON.parse(Buffer.from(token.slice(first + 1, last), 'base64url').toString('utf8')) as C;
    } catch {
      return { ok: false, reason: 'malformed' };
    }
    if (typeof claims !== 'object' || claims === null || typeof claims.exp !== 'number') {
      return { ok: false, reason: 'malformed' };
    }
    if (claims.exp * 1000 <= nowMs) return { ok: false, reason: 'expired' };
    if (!remember) return { ok: true, claims };
    if (verified.size >= VERIFIED_MAX) verified.clear();
    verified.set(token, { kind, claims });
    return { ok: true, claims };
  }

  return {
    issueOperatorToken(claims: OperatorClaims): string {
      return sign('op', claims);
    },
    issueDeviceToken(claims: DeviceClaims): string {
      return sign('dv', claims);
    },
    verifyOperatorToken(token: string, nowMs: number): VerifyResult<OperatorClaims> {
      return verify<OperatorClaims>(token, 'op', nowMs);
    },
    verifyDeviceToken(token: string, nowMs: number): VerifyResult<DeviceClaims> {
      return verify<DeviceClaims>(token, 'dv', nowMs);
    },
    issueStreamTicket(claims: StreamTicketClaims): string {
      return sign('st', claims);
    },
    /** Not kept among the verified: a ticket is used once. */
    verifyStreamTicket(ticket: string, nowMs: number): VerifyResult<StreamTicketClaims> {
      return verify<StreamTicketClaims>(ticket, 'st', nowMs, false);
    },
  };
}
export type TokenService = ReturnType<typeof createTokenService>;

/** Constant-time comparison of two secrets of any length. */
/** iat and exp in whole seconds; exp rounds up so a token never lives shorter than its TTL. */
export function tokenTimes(nowMs: number, ttlSeconds: number): { iat: number; exp: number } {
  return { iat: Math.floor(nowMs / 1000), exp: Math.ceil(nowMs / 1000) + ttlSeconds };
}

export function secretsEqual(a: string, b: string): boolean {
  const ha = createHmac('sha256', 'compare').update(a).digest();
  const hb = createHmac('sha256', 'compare').update(b).digest();
  return timingSafeEqual(ha, hb);
}
