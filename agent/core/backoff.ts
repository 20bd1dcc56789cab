/**
 * Retry delays for the agent's platform client: capped exponential backoff with full jitter, so that a
 * fleet that lost the platform together does not come back in lockstep. A server `retry_after` (429,
 * `details.retry_after_seconds`, or the Retry-After header) is a floor, never shortened.
 */

export interface BackoffOptions {
  /** Delay scale of the first retry, ms. */
  baseMs: number;
  /** Upper bound of the exponential part, ms. */
  capMs: number;
  /** Uniform in [0, 1); injectable so tests and simulations are deterministic. */
  random: () => number;
  /** What the server asked for, seconds. */
  retryAfterSeconds?: number;
}

export const DEFAULT_BACKOFF = { baseMs: 1_000, capMs: 5 * 60_000 } as const;

/**
 * The longest server wait honoured, seconds. The platform's own rate windows are at most 60 s; a larger value
 * comes from something in between (a proxy, a gateway) or is garbage, and obeying it blindly (Retry-After:
 * 999999999) would leave the charger deaf to its platform for years.
 */
export const MAX_RETRY_AFTER_SECONDS = 3_600;

/**
 * Delay before retry number `attempt` (0 for the first retry): uniform in [0, min(cap, base × 2^attempt)).
 * With `retryAfterSeconds`, the server's wait plus a jitter of up to one base step: at least what the server
 * asked, and spread so that the clients it told the same thing do not return in the same instant. The cap
 * does not shorten the server's wait; `MAX_RETRY_AFTER_SECONDS` does.
 */
export function nextDelayMs(attempt: number, options: BackoffOptions): number {
  const { baseMs, capMs, random } = options;
  const exponent = Math.min(Math.max(0, Math.floor(attempt)), 52); // 2^53 would lose integer precision
  const ceiling = Math.min(capMs, baseMs * 2 ** exponent);
  const retryAfter = options.retryAfterSeconds;
  if (retryAfter !== undefined && Number.isFinite(retryAfter) && retryAfter > 0) {
    return (
      Math.min(retryAfter, MAX_RETRY_AFTER_SECONDS) * 1000 + Math.floor(random() * Math.min(baseMs, capMs))
    );
  }
  return Math.floor(random() * ceiling);
}
