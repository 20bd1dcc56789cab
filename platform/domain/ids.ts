import { randomBytes } from 'node:crypto';

/** Prefixed random identifiers: the prefix tells a reader what an id names. */
export function newId(
  prefix:
    | 'op'
    | 'site'
    | 'cli'
    | 'dev'
    | 'cmd'
    | 'ctl'
    | 'rec'
    | 'wh'
    | 'msg'
    | 'enr'
    | 'art'
    | 'upd'
    | 'diag',
): string {
  return `${prefix}_${randomBytes(10).toString('hex')}`;
}

/** 32 random bytes, URL-safe: client and device secrets. */
export function newSecret(): string {
  return randomBytes(32).toString('base64url');
}
