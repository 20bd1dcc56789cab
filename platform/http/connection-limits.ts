/** How long a connection may take, and how many an instance holds (DESIGN.md §18 "Connections are bounded"). */
export interface ConnectionLimits {
  /** A request's headers and body must have arrived within this (ms); the answer may take longer (long poll). */
  requestMs: number;
  /**
   * A long upload's body (an artifact, `request-times.ts` LONG_UPLOADS) must have arrived within this (ms), with
   * no pause of `requestMs`.
   */
  uploadMs: number;
  /**
   * From the TCP accept to the first request's headers (ms): a connection that sends no PROXY header, no TLS
   * handshake or no request within this is closed.
   */
  firstRequestMs: number;
  /**
   * An idle keep-alive connection is closed after this (ms): above the agent's 60 s, so the agent, which knows
   * when it will send next, closes first.
   */
  keepAliveMs: number;
  /** Connections one instance holds at once; more are closed as they arrive. */
  maxConnections: number;
}

export const DEFAULT_CONNECTION_LIMITS: Readonly<ConnectionLimits> = Object.freeze({
  requestMs: 30_000,
  // 512 MiB in an hour: about 150 kB/s at the least.
  uploadMs: 3_600_000,
  firstRequestMs: 10_000,
  keepAliveMs: 75_000,
  maxConnections: 20_000,
});

/** Upper bound of `--max-connections`: far past what one process's file descriptors allow. */
export const MAX_CONNECTIONS_LIMIT = 1_000_000;

/**
 * How often Node looks for requests past `requestMs` (its default is 30 s, which would let a request last up to
 * twice the limit): a tenth of the limit, at most a second.
 */
export function connectionsCheckingMs(limits: Pick<ConnectionLimits, 'requestMs'>): number {
  return Math.max(10, Math.min(1_000, Math.ceil(limits.requestMs / 10)));
}

/** Every HTTPS answer carries it (DESIGN.md §18): browsers keep to HTTPS for this host for two years. */
export const STRICT_TRANSPORT_SECURITY = 'max-age=63072000';
