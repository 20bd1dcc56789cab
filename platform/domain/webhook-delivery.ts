import type { DeliveryErrorCategory } from '../../shared/index.js';

/**
 * What happens after a webhook delivery attempt (DESIGN.md §14), as pure rules: the retry schedule, the
 * receiver's `Retry-After`, a 410 and the endpoint that has done nothing but fail for five days.
 */

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

/** Waits after the first, second, … failed attempt (Standard Webhooks' schedule); then the delivery fails. */
export const RETRY_DELAYS_MS: readonly number[] = [
  5 * SECOND,
  5 * MINUTE,
  30 * MINUTE,
  2 * HOUR,
  5 * HOUR,
  10 * HOUR,
  10 * HOUR,
];
/** An endpoint with nothing but failures for this long is disabled. */
export const DISABLE_AFTER_FAILING_MS = 5 * 24 * HOUR;
/** The longest a receiver's Retry-After may push the next attempt: the schedule's own longest wait. */
export const MAX_RETRY_WAIT_MS = Math.max(...RETRY_DELAYS_MS);

export type AttemptResult =
  | { kind: 'delivered'; status: number }
  /** Any other answer, or none (refused, timed out, blocked address): `status` null then. */
  | { kind: 'failed'; status: number | null; error: DeliveryErrorCategory; retryAfterSeconds?: number };

export interface AfterAttempt {
  state: 'pending' | 'succeeded' | 'failed';
  /** When to try again (pending only). */
  nextAttemptMs: number | null;
  /** The endpoint's first failure since its last success; null once it succeeds. */
  failingSinceMs: number | null;
  /** The endpoint is to be disabled, and why. */
  disable?: 'gone' | 'failing';
}

/**
 * The delivery's next state after attempt number `attempt` (1 for the first) ended with `result` at `nowMs`,
 * and what becomes of its endpoint, which has been failing since `failingSinceMs` (null: it was not).
 */
export function afterAttempt(
  attempt: number,
  result: AttemptResult,
  nowMs: number,
  failingSinceMs: number | null,
): AfterAttempt {
  if (result.kind === 'delivered') return { state: 'succeeded', nextAttemptMs: null, failingSinceMs: null };
  const since = failingSinceMs ?? nowMs;
  if (result.status === 410) {
    return { state: 'failed', nextAttemptMs: null, failingSinceMs: since, disable: 'gone' };
  }
  const disable = nowMs - since >= DISABLE_AFTER_FAILING_MS ? ('failing' as const) : undefined;
  const wait = RETRY_DELAYS_MS[attempt - 1];
  if (wait === undefined || disable) {
    return { state: 'failed', nextAttemptMs: null, failingSinceMs: since, ...(disable ? { disable } : {}) };
  }
  const asked = result.retryAfterSeconds !== undefined ? result.retryAfterSeconds * SECOND : 0;
  return {
    state: 'pending',
    nextAttemptMs: nowMs + Math.min(Math.max(wait, asked), MAX_RETRY_WAIT_MS),
    failingSinceMs: since,
  };
}

/** A `Retry-After` header as seconds (delta or HTTP date), or undefined when absent or unreadable. */
export function retryAfterSeconds(header: string | undefined, nowMs: number): number | undefined {
  const text = header?.trim();
  if (!text) return undefined;
  if (/^\d{1,10}$/.test(text)) return Number(text);
  // Only an HTTP date (RFC 9110 §5.6.7, in GMT): Date.parse would read "-1" as a year.
  if (!/ GMT$/.test(text)) return undefined;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - nowMs) / SECOND));
}
