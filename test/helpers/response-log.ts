import { createHash } from 'node:crypto';
import { appendFileSync, existsSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import formats from 'ajv-formats';

/**
 * Every HTTP answer the integration suite receives through `httpClient` (helpers/platform.ts) is recorded
 * here, and at the end of the run (global-setup.ts) checked against the OpenAPI document the platform serves:
 * the status must be declared for that operation and the body must match its schema. The directory is named
 * by this variable, set by the global setup; without it nothing is recorded.
 */
export const RESPONSE_LOG_ENV = 'CP_TEST_RESPONSE_LOG';

export interface RecordedResponse {
  /** Method, path without the query, status, media type (no parameters), body text. */
  m: string;
  p: string;
  s: number;
  ct: string;
  b: string;
}

/** Bodies above this are checked for status and media type only. */
const MAX_BODY_CHARS = 1_000_000;

const seen = new Set<string>();

/** Appends one answer to this process's log (each distinct answer once). Cheap: a hash and a small write. */
export function recordResponse(
  method: string,
  /** The path and query asked. */
  url: string,
  status: number,
  contentType: unknown,
  text: string,
) {
  const dir = process.env[RESPONSE_LOG_ENV];
  if (!dir) return;
  // As sent: `..` or `%2f` in a path stay what the platform saw.
  const path = url.split(/[?#]/)[0]!;
  const ct = (
    Array.isArray(contentType) ? contentType[0] : typeof contentType === 'string' ? contentType : ''
  )
    .split(';')[0]!
    .trim()
    .toLowerCase();
  const record: RecordedResponse = {
    m: method.toUpperCase(),
    p: path,
    s: status,
    ct,
    b: text.length > MAX_BODY_CHARS ? '' : text,
  };
  const line = JSON.stringify(record);
  const key = createHash('sha1').update(line).digest('base64');
  if (seen.has(key)) return;
  seen.add(key);
  appendFileSync(join(dir, `responses-${process.pid}.jsonl`), `${line}\n`);
}

let documentWritten = false;

/** Keeps the OpenAPI document to check against (the first platform of the run writes it). */
export function recordDocument(build: () => unknown): void {
  const dir = process.env[RESPONSE_LOG_ENV];
  if (!dir || documentWritten) return;
  documentWritten = true;
  const file = join(dir, 'openapi.json');
  if (existsSync(file)) return;
  const tmp = `${file}.${process.pid}`;
  writeFileSync(tmp, JSON.stringify(build()));
  renameSync(tmp, file);
}

export function readRecorded(dir: string): {
  document: OpenApiDocument | undefined;
  responses: RecordedResponse[];
} {
  const docFile = join(dir, 'openapi.json');
  const document = existsSync(docFile)
    ? (JSON.parse(readFileSync(docFile, 'utf8')) as OpenApiDocument)
    : undefined;
  const responses: RecordedResponse[] = [];
  for (const name of readdirSync(dir)) {
    if (!name.endsWith('.jsonl')) continue;
    for (const line of readFileSync(join(dir, name), 'utf8').split('\n')) {
      if (line) responses.push(JSON.parse(line) as RecordedResponse);
    }
  }
  return { document, responses };
}

// ---------------------------------------------------------------------------------------------------------

type Json = Record<string, unknown>;
export interface OpenApiDocument {
  paths: Record<string, Record<string, { responses: Record<string, Json> }>>;
  components?: Json;
}

const escapePointer = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1');

/**
 * Checks answers against the document; returns one line per offending kind of answer (operation, status and
 * what is wrong), with how many answers and an example. Answers to paths or methods the document does not
 * have (an unknown route's 404, CORS preflights) are not operations of the API and are left out.
 */
export function checkResponses(document: OpenApiDocument, responses: readonly RecordedResponse[]): string[] {
  const ajv = new Ajv2020({ strict: false, allErrors: false, validateSchema: false });
  // A CommonJS module: its function is also its `default` (how TypeScript's NodeNext types see it).
  formats.default(ajv);
  ajv.addSchema(document as object, 'openapi:doc');
  const validators = new Map<string, ValidateFunction>();
  const validatorAt = (pointer: string) => {
    let v = validators.get(pointer);
    if (!v) {
      v = ajv.compile({ $ref: `openapi:doc#${pointer}` });
      validators.set(pointer, v);
    }
    return v;
  };

  // Concrete paths first, then by fewer parameters: `/a/b` wins over `/a/{id}`.
  const templates = Object.keys(document.paths)
    .map((template) => ({
      template,
      params: (template.match(/\{/g) ?? []).length,
      re: new RegExp(
        `^${template
          .split(/\{[^}]+\}/)
          .map((part) => part.replace(/[.*+?^$()|[\]\\]/g, '\\$&'))
          .join('[^/]+')}$`,
      ),
    }))
    .sort((a, b) => a.params - b.params);

  const offences = new Map<string, { count: number; example: string }>();
  const offend = (what: string, example: string) => {
    const o = offences.get(what);
    if (o) o.count++;
    else offences.set(what, { count: 1, example: example.slice(0, 300) });
  };

  for (const r of responses) {
    const match = templates.find((t) => t.re.test(r.p));
    const method = r.m.toLowerCase();
    const operation = match ? document.paths[match.template]![method] : undefined;
    if (!match || !operation) continue;
    const op = `${r.m} ${match.template}`;
    let pointer = `/paths/${escapePointer(match.template)}/${method}/responses/${r.s}`;
    let response = operation.responses[String(r.s)];
    if (!response) {
      offend(`${op}: status ${r.s} is not declared`, r.b);
      continue;
    }
    if (typeof response.$ref === 'string') {
      pointer = response.$ref.slice(1);
      response = resolve(document, pointer);
    }
    const content = response.content as Record<string, Json> | undefined;
    if (!content) {
      if (r.b !== '') offend(`${op} ${r.s}: a body where the document declares none`, r.b);
      continue;
    }
    const media = content[r.ct] ? r.ct : undefined;
    if (!media) {
      offend(`${op} ${r.s}: media type "${r.ct}" is not one of ${Object.keys(content).join(', ')}`, r.b);
      continue;
    }
    if (!/^application\/([a-z.+-]*\+)?json$/.test(media) || r.b === '') continue;
    let body: unknown;
    try {
      body = JSON.parse(r.b);
    } catch {
      offend(`${op} ${r.s}: not JSON`, r.b);
      continue;
    }
    const validate = validatorAt(`${pointer}/content/${escapePointer(media)}/schema`);
    if (!validate(body)) {
      const e = validate.errors?.[0];
      offend(`${op} ${r.s}: body does not match its schema (${e?.instancePath || '/'} ${e?.message})`, r.b);
    }
  }
  return [...offences].map(([what, o]) => `${what} [${o.count}x] e.g. ${o.example}`);
}

function resolve(document: OpenApiDocument, pointer: string): Json {
  let cur: unknown = document;
  for (const part of pointer.split('/').slice(1)) {
    cur = (cur as Json)[part.replace(/~1/g, '/').replace(/~0/g, '~')];
  }
  return cur as Json;
}
