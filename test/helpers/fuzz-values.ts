import fc from 'fast-check';
import type { Json } from './fuzz-platform.js';

/** The values the fuzz generators plant in requests and stream messages, and the mutations that plant them. */

/**
 * Deep nesting (up to 5,000 levels) travels as a marker string and is expanded in the JSON text only: building
 * it as a value would overflow JSON.stringify's stack here, while the server parses it without recursion.
 */
const DEEP_MARKER = /"~deep~(\d+)~(array|object)~"/g;
function nestedText(depth: number, kind: string): string {
  return kind === 'array'
    ? `${'['.repeat(depth)}1${']'.repeat(depth)}`
    : `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
}
/** JSON text with the deep markers expanded, and what the server parses from it. */
export function toWire(value: unknown): { text: string; parsed: unknown } | undefined {
  const flat = JSON.stringify(value);
  if (flat === undefined) return undefined;
  const text = flat.replace(DEEP_MARKER, (_m, d: string, k: string) => nestedText(Number(d), k));
  return { text, parsed: JSON.parse(text) };
}

export const hugeString = fc
  .tuple(fc.integer({ min: 1_000, max: 70_000 }), fc.constantFrom('x', 'é', '\u0000', '€', '"', '\\', '😀'))
  .map(([n, c]) => c.repeat(Math.ceil(n / c.length)));
export const hugeArray = fc
  .tuple(fc.integer({ min: 101, max: 3_000 }), fc.constantFrom<unknown>(0, 'x', null, {}, [], { a: 1 }))
  .map(([n, v]) => Array.from({ length: n }, () => v));
export const deepValue = fc
  .tuple(fc.integer({ min: 50, max: 5_000 }), fc.constantFrom('array', 'object'))
  .map(([d, k]) => `~deep~${d}~${k}~`);

/** A value of (very likely) the wrong type or range for whatever field it lands in. */
export const wrongValue: fc.Arbitrary<unknown> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.constantFrom<unknown>(
      null,
      true,
      false,
      0,
      -1,
      1.5,
      -0.5,
      1e308,
      -1e308,
      '',
      ' ',
      '0',
      'null',
      [],
      {},
      [null],
      { '': 0 },
    ),
  },
  { weight: 2, arbitrary: fc.integer() },
  { weight: 2, arbitrary: fc.double() },
  { weight: 3, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
  { weight: 1, arbitrary: hugeString },
  { weight: 1, arbitrary: hugeArray },
  { weight: 1, arbitrary: deepValue },
  { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
);

type Path = Array<string | number>;
/** Every key and index of a value (not below depth 8: deep garbage is replaced whole, not walked). */
function allPaths(v: unknown, prefix: Path = [], out: Path[] = []): Path[] {
  if (prefix.length >= 8 || v === null || typeof v !== 'object') return out;
  const entries: Array<[string | number, unknown]> = Array.isArray(v)
    ? v.map((x, i) => [i, x])
    : Object.entries(v);
  for (const [k, x] of entries.slice(0, 50)) {
    out.push([...prefix, k]);
    allPaths(x, [...prefix, k], out);
  }
  return out;
}

export type Mutation =
  | { kind: 'drop'; pick: number }
  | { kind: 'set'; pick: number; value: unknown }
  | { kind: 'extra'; pick: number; key: string; value: unknown }
  | { kind: 'grow'; pick: number; times: number }
  | { kind: 'replace'; value: unknown };

export const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('drop' as const), pick: fc.nat() }) },
  {
    weight: 4,
    arbitrary: fc.record({ kind: fc.constant('set' as const), pick: fc.nat(), value: wrongValue }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('extra' as const),
      pick: fc.nat(),
      key: fc.oneof(
        fc.string({ unit: 'binary', maxLength: 20 }),
        fc.constantFrom('id', 'admin', 'device_id', 'operator_id', 'status', 'client_secret'),
        fc.integer({ min: 201, max: 60_000 }).map((n) => 'k'.repeat(n)),
      ),
      value: wrongValue,
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('grow' as const),
      pick: fc.nat(),
      times: fc.integer({ min: 2, max: 700 }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('replace' as const), value: wrongValue }) },
);

function valueAt(root: Json, path: Path): Json {
  let cur = root;
  for (const key of path) cur = cur[key];
  return cur;
}
const isPlainObject = (v: unknown) => v !== null && typeof v === 'object' && !Array.isArray(v);

/** Applies the mutations to a copy of the sample (generated values are copied too: fast-check reuses them). */
export function applyMutations(sample: unknown, mutations: readonly Mutation[]): unknown {
  let root: Json = structuredClone(sample);
  for (const m of mutations) {
    if (m.kind === 'replace') {
      root = structuredClone(m.value);
      continue;
    }
    const paths = allPaths(root);
    if (m.kind === 'extra') {
      // A new key on the body itself or on one of its objects (defined, so that any name is an own key).
      const objects = [[] as Path, ...paths].filter((p) => isPlainObject(valueAt(root, p)));
      const at = objects[m.pick % objects.length];
      if (!at) continue;
      Object.defineProperty(valueAt(root, at), m.key, {
        value: structuredClone(m.value),
        enumerable: true,
        writable: true,
        configurable: true,
      });
      continue;
    }
    const path = paths.length ? paths[m.pick % paths.length]! : undefined;
    if (!path) {
      if (m.kind === 'set') root = structuredClone(m.value);
      continue;
    }
    const parent = valueAt(root, path.slice(0, -1));
    const key = path[path.length - 1]!;
    if (m.kind === 'drop') {
      if (Array.isArray(parent)) parent.splice(Number(key), 1);
      else delete parent[key];
    } else if (m.kind === 'set') {
      parent[key] = structuredClone(m.value);
    } else {
      const v = parent[key];
      parent[key] = Array.isArray(v)
        ? Array.from({ length: m.times }, (_, i) => v[i % Math.max(v.length, 1)] ?? null)
        : v;
    }
  }
  return root;
}
