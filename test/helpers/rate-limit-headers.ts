import type { HttpResult } from './platform.js';

/**
 * The item of one rate class in a `RateLimit` or `RateLimit-Policy` list (IETF httpapi draft syntax): a request
 * may be counted against several classes (the unauthenticated routes' address budget, then a credential's).
 */
export function rateItem(res: HttpResult, header: 'ratelimit' | 'ratelimit-policy', rateClass: string) {
  const value = res.headers[header];
  if (typeof value !== 'string') return undefined;
  return value.split(', ').find((item) => item.startsWith(`"${rateClass}";`));
}
