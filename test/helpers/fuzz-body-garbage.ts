import { isUtf8 } from 'node:buffer';
import { Readable } from 'node:stream';
import fc from 'fast-check';
import * as z from 'zod';
import type { AnyRoute } from '../../platform/http/route-spec.js';
import { MAX_BODY_BYTES } from '../../shared/index.js';
import { type Expected, FORBIDDEN_IN_INPUT, FORM_ROUTE, type Garbage } from './fuzz-platform.js';
import { pathWith, sampleBody, sampleQuery, validParams } from './fuzz-samples.js';
import { applyMutations, mutation, toWire } from './fuzz-values.js';

/**
 * Request bodies every route must refuse (fuzz-http.test.ts): broken JSON bodies for its schema, bodies refused
 * before any route code runs, and the files a file route refuses. Invalid by construction, filtered with the
 * route's own schema, so nothing accidentally valid reaches a write endpoint.
 */

const bodyLimitOf = (route: AnyRoute) => route.bodyLimit ?? MAX_BODY_BYTES;

/** Broken bodies for a route with a body schema: missing, extra and wrong-typed fields, huge and deep values. */
export function bodyGarbage(route: AnyRoute): fc.Arbitrary<Garbage> {
  const sample = sampleBody(route);
  const schema = route.body!;
  const base = sample === undefined ? fc.jsonValue({ maxDepth: 3 }) : fc.constant(sample);
  const path = pathWith(route, validParams(route));
  return fc
    .tuple(base, fc.array(mutation, { minLength: 1, maxLength: 3 }))
    .map(([b, ms]) => toWire(applyMutations(b, ms)))
    .filter((r): r is { text: string; parsed: unknown } => {
      if (!r || FORBIDDEN_IN_INPUT.test(r.text)) return false;
      return !z.safeParse(schema, r.parsed).success;
    })
    .map((r) => {
      const tooLarge = Buffer.byteLength(r.text) > bodyLimitOf(route);
      return {
        label: `body ${r.text.slice(0, 120)}${r.text.length > 120 ? `… (${r.text.length} chars)` : ''}`,
        method: route.method,
        path,
        body: r.text,
        contentType: 'application/json',
        layer: tooLarge ? 'transport' : 'body',
        expect: tooLarge ? { status: 413, code: 1002 } : { status: 400, code: 1001 },
      } satisfies Garbage;
    });
}

const WRONG_CONTENT_TYPES = [
  'text/plain',
  'text/plain; charset=utf-8',
  'text/html',
  'application/xml',
  'multipart/form-data; boundary=x',
  'application/octet-stream',
  'application/x-www-form-urlencoded',
  'application/jsonx',
  'application/json-patch+json',
  'application/vnd.api+json',
  'image/png',
  'json',
  'application',
  '*/*',
];
const INVALID_JSON = [
  '{',
  '{"a":',
  '{"a":1,}',
  '{a:1}',
  "{'a':1}",
  '{"a":1}{"b":2}',
  '{"a":1} trailing',
  'NaN',
  'undefined',
  '{"a":01}',
  '{"a":"\\x41"}',
  '{"a":"unterminated}',
  '[1,2',
  '{"a":1 // comment\n}',
  '\u0000',
  '{"a":"\u0001"}',
  ']',
];
const INVALID_UTF8 = [
  [0xff],
  [0xfe, 0xff],
  [0xc0, 0xaf],
  [0xe0, 0x80, 0x80],
  [0xed, 0xa0, 0x80],
  [0xf8, 0x88, 0x80, 0x80, 0x80],
  [0x80],
  [0xc3],
];

/** Bodies refused before any route code runs: wrong content type, not JSON, not UTF-8, empty, too large. */
export function transportGarbage(route: AnyRoute): fc.Arbitrary<Garbage> {
  const path = pathWith(route, validParams(route));
  const sampleText = JSON.stringify(sampleBody(route) ?? {});
  const limit = bodyLimitOf(route);
  const make = (
    label: string,
    body: Garbage['body'],
    contentType: string | undefined,
    expect: Expected,
  ): Garbage => ({
    label,
    method: route.method,
    path,
    body,
    ...(contentType !== undefined ? { contentType } : {}),
    layer: 'transport',
    expect,
  });
  const cts = WRONG_CONTENT_TYPES.filter(
    (ct) => !(route.url === FORM_ROUTE && ct.startsWith('application/x-www-form-urlencoded')),
  );
  const isJson = (s: string) => {
    try {
      JSON.parse(s.replace(/^\uFEFF/, ''));
      return true;
    } catch {
      return false;
    }
  };
  return fc.oneof(
    fc
      .constantFrom(...cts)
      .map((ct) => make(`content-type ${ct}`, sampleText, ct, { status: 415, code: 1002 })),
    fc
      .stringMatching(/^[a-z]{1,12}\/[a-z0-9.+-]{1,20}$/)
      .filter((ct) => !/json|x-www-form-urlencoded/.test(ct))
      .map((ct) => make(`content-type ${ct}`, sampleText, ct, { status: 415, code: 1002 })),
    fc.constant(make('no content type', sampleText, undefined, { status: 415, code: 1002 })),
    fc
      .constantFrom(...INVALID_JSON)
      .map((raw) =>
        make(`not JSON ${JSON.stringify(raw)}`, raw, 'application/json', { status: 400, code: 1002 }),
      ),
    fc
      .oneof(
        fc.string({ unit: 'binary', minLength: 1, maxLength: 60 }),
        fc.nat(sampleText.length).map((n) => sampleText.slice(0, n)),
      )
      .filter((s) => s.length > 0 && !isJson(s))
      .map((raw) =>
        make(`not JSON ${JSON.stringify(raw).slice(0, 80)}`, raw, 'application/json', {
          status: 400,
          code: 1002,
        }),
      ),
    fc
      .tuple(fc.nat(sampleText.length), fc.constantFrom(...INVALID_UTF8))
      .map(([at, bytes]) =>
        make(
          `invalid UTF-8 ${bytes.map((b) => b.toString(16)).join(' ')} at ${at}`,
          Buffer.concat([
            Buffer.from(sampleText.slice(0, at)),
            Buffer.from(bytes),
            Buffer.from(sampleText.slice(at)),
          ]),
          'application/json; charset=utf-8',
          { status: 400, code: 1002 },
        ),
      )
      .filter((g) => !isUtf8(g.body as Buffer)),
    fc.constant(make('empty JSON body', '', 'application/json', { status: 400, code: 1002 })),
    fc.constant(
      make(
        'prototype poisoning',
        `{"__proto__":{"polluted":true},${sampleText.slice(1)}`.replace(',}', '}'),
        'application/json',
        { status: 400, code: 1002 },
      ),
    ),
    fc.constant(
      make('constructor poisoning', '{"constructor":{"prototype":{"polluted":true}}}', 'application/json', {
        status: 400,
        code: 1002,
      }),
    ),
    fc.integer({ min: 1, max: 200_000 }).map((extra) => {
      // Valid JSON of exactly limit + extra bytes: only its size is wrong.
      const shell = `{"pad":"",${sampleText.slice(1)}`.replace(',}', '}');
      const raw = shell.replace(
        '"pad":""',
        `"pad":"${'p'.repeat(limit + extra - Buffer.byteLength(shell))}"`,
      );
      if (Buffer.byteLength(raw) !== limit + extra) throw new Error('oversized body miscomputed');
      return make(`oversized ${Buffer.byteLength(raw)} bytes`, raw, 'application/json', {
        status: 413,
        code: 1002,
      });
    }),
    fc.constant(
      make(
        'oversized chunked body (no Content-Length)',
        () =>
          Readable.from(
            (function* () {
              for (let i = 0; i <= Math.ceil(limit / 16_384); i++) yield Buffer.alloc(16_384, 0x20);
            })(),
          ),
        'application/json',
        { status: 413, code: 1002 },
      ),
    ),
  );
}

/** `type/subtype`, parameters allowed: what Fastify parses as a media type. */
const MEDIA_TYPE = /^[A-Za-z0-9!#$&^_.+*-]+\/[A-Za-z0-9!#$&^_.+*-]+(\s*;.*)?$/;
const VALID_ARTIFACT_SIGNATURE = `${'A'.repeat(86)}==`;
const SAMPLE_FILE = '{"a file":"or not"}';

/**
 * The header a file route requires (route-spec `headers`), with a valid value for the sample file: an artifact's
 * signature, or a diagnostics upload's Content-Range (DESIGN.md §20).
 */
function requiredFileHeader(route: AnyRoute): { name: string; valid: string } {
  const shape = (route.headers as { shape?: Record<string, unknown> } | undefined)?.shape ?? {};
  if ('content-range' in shape)
    return { name: 'content-range', valid: `bytes 0-${SAMPLE_FILE.length - 1}/${SAMPLE_FILE.length}` };
  return { name: 'x-artifact-signature', valid: VALID_ARTIFACT_SIGNATURE };
}

/**
 * Bodies a file route (route-spec `streamed`) refuses, with an otherwise valid request: any type but
 * application/octet-stream (or none), its required header missing; for an artifact, an empty file or a malformed
 * signature. Never a file it would store.
 */
export function fileGarbage(route: AnyRoute): fc.Arbitrary<Garbage> {
  const path = pathWith(route, validParams(route), `?${new URLSearchParams(sampleQuery(route))}`);
  const header = requiredFileHeader(route);
  const make = (
    label: string,
    body: string,
    contentType: string | undefined,
    headerValue: string | undefined,
    expect: Expected,
  ): Garbage => ({
    label,
    method: route.method,
    path,
    body,
    ...(contentType !== undefined ? { contentType } : {}),
    ...(headerValue !== undefined ? { headers: { [header.name]: headerValue } } : {}),
    // A type that is no media type at all (`json`) is refused by Fastify itself, before authentication; a
    // well-formed other type by the route, once the caller is known.
    layer: contentType === undefined || MEDIA_TYPE.test(contentType) ? 'file' : 'transport',
    expect,
  });
  const badType = { status: 415, code: 1002 };
  const badHeader = { status: 400, code: 1001, fields: [header.name] };
  const common = [
    fc
      .constantFrom(
        ...WRONG_CONTENT_TYPES.filter((ct) => ct !== 'application/octet-stream'),
        'application/json',
      )
      .map((ct) => make(`content-type ${ct}`, SAMPLE_FILE, ct, header.valid, badType)),
    fc
      .stringMatching(/^[a-z]{1,12}\/[a-z0-9.+-]{1,20}$/)
      .filter((ct) => ct !== 'application/octet-stream')
      .map((ct) => make(`content-type ${ct}`, SAMPLE_FILE, ct, header.valid, badType)),
    fc.constant(make('no content type', SAMPLE_FILE, undefined, header.valid, badType)),
    fc.constant(make(`no ${header.name}`, SAMPLE_FILE, 'application/octet-stream', undefined, badHeader)),
  ];
  if (header.name !== 'x-artifact-signature') return fc.oneof(...common);
  return fc.oneof(
    ...common,
    fc.constant(
      make('empty file', '', 'application/octet-stream', VALID_ARTIFACT_SIGNATURE, {
        status: 400,
        code: 1002,
      }),
    ),
    fc
      .string({ unit: 'grapheme-ascii', maxLength: 100 })
      .filter((s) => !/^[A-Za-z0-9+/]{86}==$/.test(s) && s.trim() === s && !FORBIDDEN_IN_INPUT.test(s))
      .map((s) =>
        make(`signature ${JSON.stringify(s)}`, SAMPLE_FILE, 'application/octet-stream', s, badHeader),
      ),
  );
}
