import * as z from 'zod/mini';

/**
 * A cheaper first check for the hottest bodies (a telemetry record, a batch of them), compiled once from the
 * shared schema's own JSON Schema, so that it cannot drift from it: a plain object whose every field the schema
 * states by type and bounds, an enum or a pattern. What it accepts it answers as it is, which is what the
 * schema's parse answers for it; anything else (an unknown key, a field it does not know how to check, a bad
 * value) it leaves to zod, which gives the error or accepts what this does not cover. It only ever saves work:
 * accepting no more than the schema is what its tests hold it to (test/unit/platform/flat-body-check.test.ts).
 *
 * zod spends about 4 µs on a telemetry record (a tenth of a POST's platform CPU beyond Fastify's): this,
 * about a tenth of that.
 */
export type FlatCheck<T> = (input: unknown) => T | undefined;

/** Compiles `schema` (a flat object) into a check; `refinements` state each of its object-level refinements. */
export function compileFlatCheck<S extends z.core.$ZodType>(
  schema: S,
  refinements: ReadonlyArray<(value: z.infer<S>) => boolean> = [],
): FlatCheck<z.infer<S>> {
  // A refinement is not in the JSON Schema: each must be stated here, or this would accept what it refuses.
  const declared = (schema as z.core.$ZodType)._zod.def.checks?.length ?? 0;
  if (declared !== refinements.length)
    throw new Error(`schema has ${declared} refinement(s); the flat check states ${refinements.length}`);
  const json = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as JsonObject;
  if (json.type !== 'object' || json.properties === undefined) throw new Error('not an object schema');
  const fields = new Map<string, FieldCheck | undefined>();
  for (const [name, spec] of Object.entries(json.properties)) fields.set(name, fieldCheck(spec));
  const required = json.required ?? [];
  return (input) => {
    if (typeof input !== 'object' || input === null || Array.isArray(input)) return undefined;
    const record = input as Record<string, unknown>;
    for (const name of required) if (!(name in record)) return undefined;
    for (const name in record) {
      if (!Object.hasOwn(record, name)) return undefined;
      const check = fields.get(name);
      // An unknown key (zod strips or refuses it) or a field not checkable here: zod decides.
      if (check === undefined || !check(record[name])) return undefined;
    }
    for (const refine of refinements) if (!refine(record as z.infer<S>)) return undefined;
    return record as z.infer<S>;
  };
}

/**
 * Items bounds of an array field of `schema` (the batch's `records`), from its JSON Schema; `schema` itself
 * must have no refinement (a quick check of it states none).
 */
export function arrayBounds(schema: z.core.$ZodType, field: string): { min: number; max: number } {
  if ((schema._zod.def.checks?.length ?? 0) > 0) throw new Error('schema has refinements');
  const json = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as JsonObject;
  const spec = json.properties?.[field];
  if (spec?.type !== 'array') throw new Error(`${field} is not an array`);
  return { min: spec.minItems ?? 0, max: spec.maxItems ?? Number.POSITIVE_INFINITY };
}

interface JsonObject {
  type?: string;
  properties?: Record<string, JsonObject>;
  required?: string[];
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  minItems?: number;
  maxItems?: number;
  enum?: unknown[];
  pattern?: string;
  [other: string]: unknown;
}

type FieldCheck = (value: unknown) => boolean;

const NUMBER_KEYS = new Set(['type', 'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum']);
const ENUM_KEYS = new Set(['type', 'enum']);
const PATTERN_KEYS = new Set(['type', 'format', 'pattern']);

/** The check of one field, or undefined when its schema says more than this knows how to check. */
function fieldCheck(spec: JsonObject): FieldCheck | undefined {
  const keys = Object.keys(spec);
  const only = (allowed: Set<string>) => keys.every((k) => allowed.has(k));
  if ((spec.type === 'number' || spec.type === 'integer') && only(NUMBER_KEYS)) {
    const { minimum = -Infinity, maximum = Infinity } = spec;
    const { exclusiveMinimum = -Infinity, exclusiveMaximum = Infinity } = spec;
    // zod's int() is a safe integer; JSON's numbers are always finite.
    const whole = spec.type === 'integer';
    return (v) =>
      typeof v === 'number' &&
      (!whole || Number.isSafeInteger(v)) &&
      v >= minimum &&
      v <= maximum &&
      v > exclusiveMinimum &&
      v < exclusiveMaximum;
  }
  if (spec.type === 'string' && spec.enum && only(ENUM_KEYS)) {
    const values = new Set(spec.enum);
    return (v) => typeof v === 'string' && values.has(v);
  }
  // A format alone says nothing checkable here; with zod's own pattern beside it, the pattern is the rule.
  if (spec.type === 'string' && typeof spec.pattern === 'string' && only(PATTERN_KEYS)) {
    const pattern = new RegExp(spec.pattern);
    return (v) => typeof v === 'string' && pattern.test(v);
  }
  return undefined;
}
