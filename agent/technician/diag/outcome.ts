/**
 * What a diag check answers (`pass`, `warn`, `fail` or `skip`, with a hint a technician can act on), and the
 * helpers every check family shares: timing a check, bounding a network step, naming an error.
 */
export type CheckStatus = 'pass' | 'warn' | 'fail' | 'skip';

export interface Check {
  name: string;
  status: CheckStatus;
  detail: string;
  /** What to do about it; null when there is nothing to do. */
  hint: string | null;
  duration_ms: number;
  /** Measured values for scripts (addresses, TLS version, days to expiry, skew...). */
  data?: Record<string, unknown>;
}

export type Outcome = Omit<Check, 'name' | 'duration_ms'>;

export const pass = (detail: string, data?: Record<string, unknown>): Outcome => ({
  status: 'pass',
  detail,
  hint: null,
  ...(data ? { data } : {}),
});

export const warn = (detail: string, hint: string, data?: Record<string, unknown>): Outcome => ({
  status: 'warn',
  detail,
  hint,
  ...(data ? { data } : {}),
});

export const fail = (detail: string, hint: string, data?: Record<string, unknown>): Outcome => ({
  status: 'fail',
  detail,
  hint,
  ...(data ? { data } : {}),
});

export const skip = (detail: string): Outcome => ({ status: 'skip', detail, hint: null });

export function errorText(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const code = (error as { code?: unknown }).code;
  const cause = error.cause instanceof Error ? ` (${error.cause.message})` : '';
  return `${typeof code === 'string' && !error.message.includes(code) ? `${code} ` : ''}${error.message}${cause}`;
}

export function codeOf(error: unknown): string | undefined {
  for (let e: unknown = error; e instanceof Error; e = e.cause) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return code;
  }
  return undefined;
}

export function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(Object.assign(new Error(`${what} timed out after ${ms} ms`), { code: 'ETIMEDOUT' })),
      ms,
    );
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

export async function timed(name: string, run: () => Outcome | Promise<Outcome>): Promise<Check> {
  const started = performance.now();
  let outcome: Outcome;
  try {
    outcome = await run();
  } catch (error) {
    outcome = fail(
      `the check itself failed: ${errorText(error)}`,
      'report this with the output of diag --json',
    );
  }
  return { name, ...outcome, duration_ms: Math.round(performance.now() - started) };
}
