/**
 * How a failed request is classified, from the agent's point of view (what counts as an error: `fleet-stats.ts`):
 * outage, aborted, rate limited, transient, refused.
 */
export type FailureClass = 'outage' | 'aborted' | 'rate_limited' | 'transient' | 'refused';

/** Thrown into a request by a charger's simulated network outage. */
export class SimulatedOutageError extends Error {
  readonly code = 'ECONNREFUSED';
  constructor() {
    super('simulated network outage');
    this.name = 'SimulatedOutageError';
  }
}

/** How a request failed: an HTTP status that is not 2xx, or an error without an answer. Pure. */
export function classifyFailure(failure: { status?: number; error?: unknown }, out: boolean): FailureClass {
  const { status, error } = failure;
  if (error instanceof SimulatedOutageError || (out && status === undefined)) return 'outage';
  if (status === undefined) {
    const e = error as { name?: unknown; code?: unknown } | undefined;
    // Aborted by the agent (its long poll when it stops), or by the fleet closing its long-poll pool at the stop.
    if (e?.name === 'AbortError' || e?.code === 'UND_ERR_ABORTED' || e?.code === 'UND_ERR_DESTROYED')
      return 'aborted';
    return 'transient';
  }
  if (status === 429) return 'rate_limited';
  if (status >= 500 || status === 401 || status === 408) return 'transient';
  return 'refused';
}

/** `http_<status>`, or the error's code, or its name. Pure. */
export function failureCauseOf(failure: { status?: number; error?: unknown }): string {
  if (failure.status !== undefined) return `http_${failure.status}`;
  const e = failure.error as { code?: unknown; name?: unknown } | undefined;
  if (typeof e?.code === 'string') return e.code;
  return typeof e?.name === 'string' ? e.name : 'unknown';
}

export const zeroFailures = (): Record<FailureClass, number> => ({
  outage: 0,
  aborted: 0,
  rate_limited: 0,
  transient: 0,
  refused: 0,
});
