import * as z from 'zod';

/** A JSON Schema object, as the OpenAPI document holds it. */
export type JsonSchema = Record<string, unknown>;

/** A zod schema as JSON Schema draft 2020-12 (OpenAPI 3.1's dialect), for requests (`input`) or answers. */
export function jsonSchema(schema: z.core.$ZodType, io: 'input' | 'output'): JsonSchema {
  const out = z.toJSONSchema(schema, { target: 'draft-2020-12', io, unrepresentable: 'any' }) as JsonSchema;
  delete out.$schema;
  return out;
}
