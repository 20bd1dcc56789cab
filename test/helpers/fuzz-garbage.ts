import fc from 'fast-check';
import * as z from 'zod';
import type { AnyRoute } from '../../platform/http/route-spec.js';
import { bodyGarbage, fileGarbage, transportGarbage } from './fuzz-body-garbage.js';
import { FORBIDDEN_IN_INPUT, type Garbage } from './fuzz-platform.js';
import { paramNames, pathWith, sampleBody, sampleQuery, shapeOf, validParams } from './fuzz-samples.js';

/**
 * The garbage for a route (fuzz-http.test.ts): ids in its path and query strings it must refuse, here, and its
 * bodies (fuzz-body-garbage.ts), each refused without touching anything stored.
 */

/** Percent-encodes every byte that is not unreserved, so the server sees exactly the string given. */
function encodeSegment(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*.~]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

const TRAVERSAL = [
  '..%2F..%2F..%2Fetc%2Fpasswd',
  '%2E%2E%2F%2E%2E%2Fetc%2Fshadow',
  '%2e%2e%5c%2e%2e%5cwindows%5cwin.ini',
  '..%5C..%5Cboot.ini',
  '%252e%252e%252f',
  '%2F',
  '%2Fetc%2Fpasswd',
  '..%00',
  'dev%00admin',
  'a%2Fb',
  '%3B',
  '%3Fx%3D1',
  '%23frag',
  '%0D%0AX-Injected%3A%201',
  '%1B%5B31m',
  '%7F',
  '%20',
  '%09',
  '%E2%80%AE',
  '%EF%BB%BF',
  '%C2%A0',
  '%F0%9F%98%80',
  "1'%20OR%20'1'%3D'1",
  '%24%7Bjndi%3Aldap%3A%2F%2Fx%7D',
  '%3Cscript%3E',
];
const UNDECODABLE = [
  '%zz',
  '%c0%af',
  '%ff',
  '%E0%A4%A',
  '%',
  '%%',
  '%u0041',
  '%C3',
  '%ED%A0%80',
  '%F8%88%80%80%80',
];

/** Ids in the path that the route must refuse: traversal, control characters, bad encodings, too long. */
function paramsGarbage(route: AnyRoute): fc.Arbitrary<Garbage> {
  const names = paramNames(route);
  const shape = shapeOf(route.params);
  const valid = validParams(route);
  const segment = fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom(...TRAVERSAL) },
    { weight: 2, arbitrary: fc.constantFrom(...UNDECODABLE) },
    {
      weight: 3,
      arbitrary: fc
        .tuple(
          fc.constantFrom('dev_', 'cmd_', '', 'x'),
          fc.integer({ min: 0, max: 0x1f }),
          fc.constantFrom('', 'tail'),
        )
        .map(([a, c, b]) => `${a}%${c.toString(16).padStart(2, '0').toUpperCase()}${b}`),
    },
    { weight: 3, arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 15 }).map(encodeSegment) },
    { weight: 1, arbitrary: fc.integer({ min: 65, max: 180 }).map((n) => 'x'.repeat(n)) },
    { weight: 1, arbitrary: fc.integer({ min: 220, max: 2_000 }).map((n) => 'y'.repeat(n)) },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        '0',
        '-1',
        '1.5',
        '1e3',
        '%201',
        '1%20',
        '2147483648',
        '99999999999999999999',
        '0x10',
        '%D9%A1',
      ),
    },
  );
  return fc
    .tuple(fc.constantFrom(...names), segment)
    .map(([name, seg]) => {
      let decoded: string | undefined;
      try {
        decoded = decodeURIComponent(seg);
      } catch {
        decoded = undefined;
      }
      return { name, seg, decoded };
    })
    .filter(
      ({ name, decoded }) =>
        decoded === undefined || !z.safeParse(shape[name] ?? z.string(), decoded).success,
    )
    .filter(({ decoded }) => decoded === undefined || !FORBIDDEN_IN_INPUT.test(decoded))
    .map(({ name, seg, decoded }) => {
      const framework = decoded === undefined || seg.length > 200;
      const body = route.method === 'GET' ? undefined : JSON.stringify(sampleBody(route) ?? {});
      return {
        label: `path ${name}=${seg.slice(0, 100)}`,
        method: route.method,
        path: pathWith(route, { ...valid, [name]: seg }),
        ...(body !== undefined ? { body, contentType: 'application/json' } : {}),
        layer: framework ? 'framework' : 'params',
        expect: { status: 400, code: 1001, fields: framework ? ['path'] : [name, 'path'] },
      } satisfies Garbage;
    });
}

const ODD_QUERIES = [
  '?&&&&',
  '?=x',
  '?==',
  '?page',
  '?page[]=1',
  '?page[0]=1',
  '?page.x=1',
  '?page=%zz',
  '?%zz=1',
  '?page=1;size=2',
  '?page=1&&size=2',
  '?#fragment',
  '?page=%00',
  '?size=%2B1',
  `?page=${'9'.repeat(5_000)}`,
  `?${'k'.repeat(3_000)}=v`,
  `?${Array.from({ length: 300 }, (_, i) => `p${i}=${i}`).join('&')}`,
  `?${Array.from({ length: 300 }, () => 'page=1').join('&')}`,
];

/** Query strings the route must refuse: unknown, repeated, malformed and out-of-range parameters. */
function queryGarbage(route: AnyRoute): fc.Arbitrary<Garbage> {
  const schema = route.query!;
  const sample = sampleQuery(route);
  const keys = [...new Set([...Object.keys(shapeOf(schema)), ...Object.keys(sample)])];
  const path = pathWith(route, validParams(route));
  const key = fc.oneof(
    { weight: 4, arbitrary: fc.constantFrom(...(keys.length ? keys : ['page'])) },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        '',
        'Page',
        'PAGE',
        'page ',
        'toString',
        'hasOwnProperty',
        'access_token',
        'x',
      ),
    },
    { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 12 }) },
  );
  const value = fc.oneof(
    {
      weight: 3,
      arbitrary: fc.constantFrom(
        '',
        '0',
        '-1',
        '1e3',
        '1.5',
        ' 1',
        '1 ',
        '+1',
        '0x10',
        '101',
        '1000001',
        '99999999999999999',
        'NaN',
        'true',
        'null',
        '[]',
        '{}',
        '..%2f',
        '\u0000',
        'online ',
        'ONLINE',
        '15M',
        '2025-13-01T00:00:00Z',
        '2025-01-01',
        'yesterday',
      ),
    },
    { weight: 3, arbitrary: fc.string({ unit: 'binary', maxLength: 30 }) },
    { weight: 2, arbitrary: fc.integer().map(String) },
    { weight: 1, arbitrary: fc.integer({ min: 500, max: 3_000 }).map((n) => 'z'.repeat(n)) },
  );
  const generated = fc
    .tuple(
      fc.subarray(Object.entries(sample)),
      fc.array(fc.tuple(key, value), { minLength: 1, maxLength: 4 }),
      fc.boolean(),
    )
    .map(([base, extra, repeatFirst]) => {
      const pairs: Array<[string, string]> = [...base, ...extra];
      if (repeatFirst && pairs[0]) pairs.push(pairs[0]);
      return pairs;
    })
    .filter((pairs) => {
      // Model what the server parses: repeated keys become arrays.
      const grouped = new Map<string, string[]>();
      for (const [k, v] of pairs) grouped.set(k, [...(grouped.get(k) ?? []), v]);
      const model = Object.fromEntries([...grouped].map(([k, vs]) => [k, vs.length === 1 ? vs[0] : vs]));
      return !pairs.some(([k, v]) => FORBIDDEN_IN_INPUT.test(k + v)) && !z.safeParse(schema, model).success;
    })
    .map(
      (pairs) => `?${pairs.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join('&')}`,
    );
  // An odd query always carries an unknown parameter too, so it is refused whatever the parser makes of the rest.
  const odd = fc.constantFrom(...ODD_QUERIES).map((q) => `${q.split('#')[0]}&zz_unknown=1`);
  return fc.oneof({ weight: 4, arbitrary: generated }, { weight: 1, arbitrary: odd }).map(
    (q): Garbage => ({
      label: `query ${q.slice(0, 160)}`,
      method: route.method,
      path: path + q,
      layer: 'query',
      expect: { status: 400, code: 1001 },
    }),
  );
}

/** Every kind of garbage that applies to the route, each refused without touching anything stored. */
export function garbageFor(route: AnyRoute): fc.Arbitrary<Garbage> {
  const kinds: Array<fc.Arbitrary<Garbage>> = [];
  if (route.body) kinds.push(bodyGarbage(route));
  if (route.streamed) kinds.push(fileGarbage(route));
  else if (route.method !== 'GET') kinds.push(transportGarbage(route));
  if (paramNames(route).length) kinds.push(paramsGarbage(route));
  if (route.query) kinds.push(queryGarbage(route));
  return fc.oneof(...kinds);
}
