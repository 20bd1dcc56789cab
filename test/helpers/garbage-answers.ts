import fc from 'fast-check';
import type * as z from 'zod';
import {
  CommandStatusAck,
  FirmwareStatusAck,
  Registration,
  TelemetryAccepted,
  TelemetryBatchAccepted,
  UploadAccepted,
} from '../../shared/device-api.js';
import { ErrorResponse, envelopeOf } from '../../shared/envelope.js';
import { Identifier } from '../../shared/primitives.js';
import type { Json } from './agent-fuzz.js';

/**
 * The answers the garbage platform of agent-fuzz.test.ts gives each class of the agent's requests: wrong JSON
 * shapes, wrong envelopes and codes, non-JSON, invalid UTF-8, truncated and huge bodies, slow, hanging and
 * trickling answers, resets — never the platform's word on an upload or a registration (see the test's header).
 */

export type EndpointClass = 'register' | 'token' | 'commands' | 'upload';

export type Answer =
  | { t: 'json'; status: number; type: string | null; body: Json; retryAfter?: string }
  | { t: 'text'; status: number; type: string | null; text: string }
  | { t: 'bytes'; status: number; type: string | null; bytes: number[] }
  | { t: 'truncated'; status: number; body: Json; keep: number; lie: boolean }
  | { t: 'huge'; status: number; mib: number; shape: 'string' | 'array' | 'nested' | 'commands' }
  | { t: 'hang' }
  | { t: 'slow'; delayMs: number; answer: Extract<Answer, { t: 'json' }> }
  | { t: 'trickle'; everyMs: number }
  | { t: 'reset'; at: 'connect' | 'head' | 'body' }
  | { t: 'valid'; expiresIn: number };

/** DESIGN.md §4: the statuses each documented code comes with. */
const STATUS_OF: Record<number, readonly number[]> = {
  1001: [400],
  1002: [400, 413, 415],
  2001: [401],
  2002: [401],
  2003: [403],
  3001: [404],
  4001: [409],
  5001: [429],
  9001: [500],
};
const isDocumentedRefusal = (status: number, body: Json): boolean => {
  const e = ErrorResponse.safeParse(body);
  return e.success && (STATUS_OF[e.data.code] ?? []).includes(status);
};
const SUCCESS_OF: Record<EndpointClass, readonly z.core.$ZodType[]> = {
  upload: [CommandStatusAck, UploadAccepted, TelemetryAccepted, TelemetryBatchAccepted, FirmwareStatusAck],
  register: [Registration],
  token: [],
  commands: [],
};
const isValidSuccess = (cls: EndpointClass, status: number, body: Json): boolean =>
  status >= 200 && status <= 299 && SUCCESS_OF[cls].some((s) => envelopeOf(s).safeParse(body).success);
const carriesUsableCommand = (body: Json): boolean =>
  Array.isArray(body?.data?.commands) &&
  body.data.commands.some((c: Json) => Identifier.safeParse(c?.command_id).success);

/** Whether a JSON answer is garbage for this endpoint (see the header: what the script leaves out). */
function garbageFor(cls: EndpointClass, status: number, body: Json): boolean {
  if (isValidSuccess(cls, status, body)) return false;
  const documented = isDocumentedRefusal(status, body);
  if (cls === 'upload') return !documented || status === 401 || status === 429;
  if (cls === 'register') return !documented || status === 429;
  if (cls === 'commands') return !carriesUsableCommand(body);
  return true;
}

const STATUS = fc.constantFrom(
  200,
  201,
  202,
  204,
  206,
  299,
  300,
  301,
  302,
  304,
  307,
  308,
  400,
  401,
  402,
  403,
  404,
  405,
  408,
  409,
  410,
  413,
  415,
  418,
  422,
  429,
  451,
  499,
  500,
  501,
  502,
  503,
  504,
  599,
);
const CONTENT_TYPE = fc.constantFrom(
  'application/json',
  'application/json; charset=utf-8',
  'text/html; charset=utf-8',
  'text/plain',
  'application/xml',
  'application/octet-stream',
  'application/problem+json',
  null,
);
const RETRY_AFTER = fc.constantFrom('0', '1', '2', '-1', 'soon', '1.5', '', 'Wed, 21 Oct 2015 07:28:00 GMT');
const CODE = fc.oneof(
  fc.constantFrom(0, 1001, 1002, 2001, 2002, 2003, 3001, 4001, 5001, 9001),
  fc.integer(),
  fc.string({ maxLength: 4 }),
  fc.constant(null),
);
const DETAILS = fc.dictionary(
  fc.constantFrom('retry_after_seconds', 'field', 'reason', 'x'),
  fc.constantFrom(-1, 0, 0.5, 1, 2, 'soon', null, 'records.0.energy', 'records.99', 'events.0', 'records.-1'),
  { maxKeys: 3 },
);
/** Valid data of the agent's endpoints, to be broken one field at a time. */
const TEMPLATES: ReadonlyArray<Record<string, Json>> = [
  { command_id: 'cmd_x', status: 'succeeded', changed: true },
  { accepted: 1, duplicates: 0 },
  { accepted: 1 },
  { status: 'installed' },
  { access_token: 'tok', token_type: 'Bearer', expires_in: 86_400 },
  { device_id: 'dev_x', device_secret: 'secret', expires_in: 86_400 },
  { commands: [], server_time: '2026-01-01T00:00:00Z' },
  { commands: [{ command: 'stop', params: {} }, 7, null], server_time: '1999-12-31T23:59:59+14:00' },
];
const MUTATED = fc
  .tuple(
    fc.constantFrom(...TEMPLATES),
    fc.constantFrom('drop', 'retype', 'extra', 'null', 'nest'),
    fc.nat(),
    fc.jsonValue({ maxDepth: 2 }),
  )
  .map(([template, how, i, value]) => {
    const copy: Record<string, Json> = { ...template };
    const keys = Object.keys(copy);
    const key = keys[i % keys.length]!;
    if (how === 'drop') delete copy[key];
    else if (how === 'retype') copy[key] = typeof copy[key] === 'string' ? 12 : 'x';
    else if (how === 'null') copy[key] = null;
    else if (how === 'nest') copy[key] = { value: copy[key] };
    else copy[`extra_${i % 5}`] = value;
    return copy;
  });
const JSON_BODY: fc.Arbitrary<Json> = fc.oneof(
  fc.jsonValue({ maxDepth: 4 }),
  fc.record(
    {
      code: CODE,
      message: fc.oneof(fc.constant('success'), fc.string({ maxLength: 20 }), fc.integer()),
      data: fc.oneof(MUTATED, fc.jsonValue({ maxDepth: 2 })),
      details: DETAILS,
    },
    { requiredKeys: [] },
  ),
  fc.record({ code: fc.constant(0), message: fc.constant('success'), data: MUTATED }),
  // Envelopes of valid data, wrapped in an error code: the agent must not take the data.
  fc.record({
    code: fc.constantFrom(1001, 2002, 3001, 4001, 9001, 42),
    message: fc.constant('success'),
    data: fc.constantFrom(...TEMPLATES),
  }),
  // Documented codes under any status (a mismatch is garbage; a match is the platform's word, filtered).
  fc.record(
    {
      code: fc.constantFrom(1001, 1002, 2001, 2002, 2003, 3001, 4001, 5001, 9001),
      message: fc.string({ maxLength: 30 }),
      details: DETAILS,
    },
    { requiredKeys: ['code', 'message'] },
  ),
);

function jsonAnswer(cls: EndpointClass): fc.Arbitrary<Extract<Answer, { t: 'json' }>> {
  return fc
    .record(
      { status: STATUS, type: CONTENT_TYPE, body: JSON_BODY, retryAfter: RETRY_AFTER },
      { requiredKeys: ['status', 'type', 'body'] },
    )
    .filter((a) => garbageFor(cls, a.status, a.body))
    .map((a) => ({ t: 'json' as const, ...a }));
}

export function answerFor(cls: EndpointClass): fc.Arbitrary<Answer> {
  const text = fc.record({
    t: fc.constant('text' as const),
    status: STATUS,
    type: CONTENT_TYPE,
    text: fc.oneof(
      fc.constantFrom(
        '<html><body>Captive portal: please log in</body></html>',
        'OK',
        '',
        'null',
        'undefined',
        '{"code":0',
        '\u0000\u0001\u0002',
        'true',
        '[]',
        '{}',
        '{"code":0,"message":"success","data":{"accepted":1,"duplicates":0}',
      ),
      fc.string({ unit: 'binary', maxLength: 300 }),
    ),
  });
  const bytes = fc.record({
    t: fc.constant('bytes' as const),
    status: STATUS,
    type: CONTENT_TYPE,
    // Invalid UTF-8 up front (a lone continuation byte, an overlong form), then anything.
    bytes: fc
      .array(fc.integer({ min: 0, max: 255 }), { maxLength: 200 })
      .map((b) => [0x7b, 0x22, 0xc3, 0x28, 0x80, 0xc0, 0xaf, 0xff, ...b]),
  });
  const truncated = fc.record({
    t: fc.constant('truncated' as const),
    status: fc.constantFrom(200, 201, 400, 401, 429, 500),
    body: fc.oneof(
      fc.constantFrom(...TEMPLATES).map((data) => ({ code: 0, message: 'success', data })),
      JSON_BODY,
    ),
    keep: fc.double({ min: 0, max: 0.95, noNaN: true }),
    lie: fc.boolean(),
  });
  const huge = fc.record({
    t: fc.constant('huge' as const),
    status: fc.constantFrom(200, 400, 413, 500, 502),
    mib: fc.integer({ min: 2, max: 5 }),
    shape: fc.constantFrom('string' as const, 'array' as const, 'nested' as const, 'commands' as const),
  });
  const slow = fc.record({
    t: fc.constant('slow' as const),
    delayMs: fc.integer({ min: 0, max: 1_200 }),
    answer: jsonAnswer(cls),
  });
  const arbitraries: Array<fc.WeightedArbitrary<Answer>> = [
    { weight: 30, arbitrary: jsonAnswer(cls) },
    { weight: 8, arbitrary: text },
    { weight: 4, arbitrary: bytes },
    { weight: 6, arbitrary: truncated },
    { weight: 2, arbitrary: huge },
    { weight: 3, arbitrary: fc.constant({ t: 'hang' as const }) },
    { weight: 5, arbitrary: slow },
    {
      weight: 2,
      arbitrary: fc.record({
        t: fc.constant('trickle' as const),
        everyMs: fc.integer({ min: 50, max: 250 }),
      }),
    },
    {
      weight: 6,
      arbitrary: fc.record({
        t: fc.constant('reset' as const),
        at: fc.constantFrom('connect' as const, 'head' as const, 'body' as const),
      }),
    },
  ];
  if (cls === 'token' || cls === 'commands') {
    arbitraries.push({
      weight: cls === 'token' ? 40 : 12,
      arbitrary: fc.record({
        t: fc.constant('valid' as const),
        // A token's lifetime as the platform could state it, including the absurd.
        expiresIn: fc.constantFrom(86_400, 3_600, 1, 0, -60, 2_147_483_647, 10_000_000_000_000),
      }),
    });
  }
  return fc.oneof(...arbitraries);
}
