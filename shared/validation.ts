import * as z from 'zod/mini';

export interface ValidationFailure {
  /** Dotted path of the offending parameter, e.g. `time_slots.0.start`; `body` when the whole input is wrong. */
  field: string;
  /** The offending value as received (long strings cut, big structures summarised). */
  value: unknown;
  message: string;
}

export type ValidationResult<T> = { ok: true; data: T } | { ok: false; error: ValidationFailure };

const MAX_ECHO_CHARS = 200;

/** Keep the echoed value small: a client must never get a megabyte back, nor its own secret. */
function echo(value: unknown): unknown {
  if (typeof value === 'string')
    return value.length > MAX_ECHO_CHARS ? `${value.slice(0, MAX_ECHO_CHARS)}…` : value;
  if (Array.isArray(value)) return `[array of ${value.length}]`;
  if (value !== null && typeof value === 'object') return '[object]';
  return value;
}

function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let cur: unknown = input;
  for (const key of path) {
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = (cur as Record<PropertyKey, unknown>)[key];
  }
  return cur;
}

const SECRET_FIELDS = /secret|password|token/i;

/** Validate `input` with a shared schema; on failure, name the first offending field and its value. */
export function validate<S extends z.core.$ZodType>(schema: S, input: unknown): ValidationResult<z.infer<S>> {
  const result = z.safeParse(schema, input);
  if (result.success) return { ok: true, data: result.data };
  const issue = result.error.issues[0]!;
  let path: PropertyKey[] = [...issue.path];
  // Unknown keys are reported on the object; name the first unknown key instead.
  if (issue.code === 'unrecognized_keys' && issue.keys.length > 0) path = [...path, issue.keys[0]!];
  const fullField = path.length > 0 ? path.map(String).join('.') : 'body';
  const raw = valueAt(input, path);
  const value = SECRET_FIELDS.test(fullField) ? '[redacted]' : echo(raw);
  // The name is the client's input too (an unknown key can be 60 KB long): cut like a value, never echoed whole.
  const field = fullField.length > MAX_ECHO_CHARS ? `${fullField.slice(0, MAX_ECHO_CHARS)}…` : fullField;
  const message = issue.code === 'unrecognized_keys' ? 'unknown field' : issue.message;
  return { ok: false, error: { field, value: value === undefined ? null : value, message } };
}
