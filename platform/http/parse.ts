import type * as z from 'zod';
import { validate } from '../../shared/index.js';
import { errors } from '../domain/api-error.js';

/** Validate with a shared schema or answer 400/1001 naming the field and value. */
export function parse<S extends z.core.$ZodType>(schema: S, input: unknown): z.infer<S> {
  const result = validate(schema, input);
  if (!result.ok) throw errors.validation(result.error);
  return result.data;
}
