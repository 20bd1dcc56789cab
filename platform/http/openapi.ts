import type * as z from 'zod';
import { API_VERSION, ErrorResponse } from '../../shared/index.js';
import { type JsonSchema, jsonSchema } from './json-schema.js';
import { EXTRA_OPERATIONS } from './openapi-extra-operations.js';
import { webhookOperations } from './openapi-webhooks.js';
import type { AnyRoute } from './route-spec.js';

/**
 * The OpenAPI 3.1 document, generated from the same route table and zod schemas that validate requests.
 * zod 4 emits JSON Schema draft 2020-12, which is OpenAPI 3.1's schema dialect.
 */

const ERROR_TEXT: Record<number, string> = {
  400:
    'Validation failure (1001: a parameter or field invalid, missing or unknown: every operation refuses query ' +
    'parameters it does not declare, and operator operations body fields) or malformed body (1002)',
  401: 'Missing, invalid (2001) or expired (2002) credentials',
  403: 'Scope or policy does not allow it (2003)',
  404: 'Not found, or not visible to this client (3001)',
  409: 'State conflict (4001)',
  416: 'Range not satisfiable (1001); Content-Range gives the size',
  413: 'Body too large (1002)',
  415: 'Not application/json (1002)',
  429: 'Rate limit exceeded (5001); see Retry-After',
  500: 'Internal error (9001)',
  503: 'Storage full, read-only or failing (9001); nothing was stored: retry after Retry-After seconds',
};

const RETRY_AFTER = {
  description: 'Seconds to wait before retrying',
  schema: { type: 'integer', minimum: 0 },
};
/**
 * The budget headers (IETF draft-ietf-httpapi-ratelimit-headers, draft 08+ syntax) an answer carries once its
 * request was counted against a rate class: every answer of a rated operation, errors found after the count
 * too. An answer refused before (a bad token, say) may lack them, so they are not required.
 */
const RATE_LIMIT_HEADERS: JsonSchema = {
  RateLimit: {
    description:
      'What is left of each budget that counted this request: `"CLASS";r=REMAINING;t=SECONDS_TO_RESET`',
    schema: { type: 'string' },
  },
  'RateLimit-Policy': {
    description: 'Each budget that counted this request: `"CLASS";q=QUOTA;w=WINDOW_SECONDS` (docs/api.md)',
    schema: { type: 'string' },
  },
};
const ERROR_HEADERS: Record<number, JsonSchema> = {
  416: { 'Content-Range': { description: 'bytes */SIZE', schema: { type: 'string' } } },
  429: { 'Retry-After': RETRY_AFTER },
  503: { 'Retry-After': RETRY_AFTER },
};

/**
 * Path and query parameters. A URL carries text, so the schemas validating them parse digits into numbers
 * (`queryInt`): such a parameter is documented by what it is once parsed, an integer with its bounds and
 * default, rather than by the digit pattern it is read with. Validation itself is unchanged.
 */
function parameters(schema: z.core.$ZodType | undefined, where: 'path' | 'query' | 'header'): JsonSchema[] {
  if (!schema) return [];
  const js = jsonSchema(schema, 'input');
  const parsed = (jsonSchema(schema, 'output').properties ?? {}) as Record<string, JsonSchema>;
  const props = (js.properties ?? {}) as Record<string, JsonSchema>;
  const required = new Set((js.required as string[] | undefined) ?? []);
  return Object.entries(props).map(([name, given]) => {
    const s = given.type === 'string' && parsed[name]?.type === 'integer' ? parsed[name] : given;
    return {
      name,
      in: where,
      required: where === 'path' || required.has(name),
      schema: s,
      ...(typeof s.description === 'string' ? { description: s.description } : {}),
    };
  });
}

const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * Every status a table route can answer, derived from its declaration (plus its own `errors`): 400 for any
 * input to validate (and a URL or body to parse), 401/403 for authenticated and scoped routes, 404 for a path
 * naming a resource, 413/415 where Fastify reads a body (POST, PUT, PATCH, DELETE, whatever the route expects),
 * 429 for a rate class, and 500 and 503 everywhere (every route reads or writes storage).
 */
export function statusesOf(r: AnyRoute): number[] {
  const statuses = new Set<number>([200, 500, 503, ...(r.errors ?? [])]);
  if (r.params || r.query || r.body || BODY_METHODS.has(r.method)) statuses.add(400);
  if (r.auth.kind !== 'none') statuses.add(401);
  if (r.auth.kind === 'operator') statuses.add(403);
  if (r.params) statuses.add(404);
  if (BODY_METHODS.has(r.method)) {
    statuses.add(413);
    statuses.add(415);
  }
  if (r.rate) statuses.add(429);
  if (r.binary?.partial) {
    statuses.add(206);
    statuses.add(416);
  }
  return [...statuses].sort((a, b) => a - b);
}

/** Which platform a document describes: a sandbox (test data, simulated chargers) or production. */
export type DocumentEnvironment = 'production' | 'sandbox';

const ENVIRONMENT_NAME: Record<DocumentEnvironment, string> = {
  production: 'Production',
  sandbox: 'Sandbox (test data and simulated chargers)',
};

/**
 * `servers` of the document served at `https://HOST/v1/openapi.json`: the origin it was fetched from, so that
 * tools calling the API from the document reach the same platform, named with its environment. A Host header
 * that is not a plain `host[:port]` gets the template instead.
 */
const HOST = /^(?:[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?|\[[0-9A-Fa-f:.]{2,45}\])(?::\d{1,5})?$/;

export function serversFor(host: string | undefined, env: DocumentEnvironment): JsonSchema[] {
  const name = ENVIRONMENT_NAME[env];
  if (host === undefined || !HOST.test(host)) {
    return [
      {
        url: 'https://{host}',
        description: `${name}: the platform, at the host and port it is reached at`,
        variables: { host: { default: 'localhost:8443', description: 'host[:port]' } },
        'x-environment': env,
      },
    ];
  }
  return [
    {
      url: `https://${host}`,
      description: `${name}: this platform (where this document was fetched from)`,
      'x-environment': env,
    },
  ];
}

/**
 * The document as served: built once, only `servers` differs per request (the Host header it was asked with).
 */
export function openApiDocumentServer(
  routes: readonly AnyRoute[],
  env: DocumentEnvironment,
): (host: string | undefined) => string {
  const marker = '"@servers@"';
  const [before, after] = JSON.stringify({
    ...buildOpenApiDocument(routes, env),
    servers: '@servers@',
  }).split(marker) as [string, string];
  return (host) => `${before}${JSON.stringify(serversFor(host, env))}${after}`;
}

export function toOpenApiPath(url: string): string {
  return url.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
}

export function buildOpenApiDocument(routes: readonly AnyRoute[], env: DocumentEnvironment): JsonSchema {
  const paths: Record<string, Record<string, JsonSchema>> = {};
  const schemas: Record<string, JsonSchema> = { ErrorResponse: jsonSchema(ErrorResponse, 'output') };
  for (const r of routes) {
    const path = toOpenApiPath(r.url);
    paths[path] ??= {};
    paths[path][r.method.toLowerCase()] = operationOf(r, schemas);
  }
  for (const extra of EXTRA_OPERATIONS) {
    paths[extra.url] ??= {};
    paths[extra.url]![extra.method.toLowerCase()] = extra.operation;
  }

  const errorResponses: Record<string, unknown> = {};
  for (const [status, text] of Object.entries(ERROR_TEXT)) {
    errorResponses[`E${status}`] = {
      description: text,
      headers: { ...RATE_LIMIT_HEADERS, ...ERROR_HEADERS[Number(status)] },
      content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorResponse' } } },
    };
  }

  return {
    openapi: '3.1.0',
    info: {
      title: 'Charger Platform Integration API',
      version: API_VERSION,
      description:
        'Operator surface (/v1/operator) for CPMS, EMS and aggregators; charger surface (/v1/device) for chargers. ' +
        'Every response except the operator token response is enveloped as {code, message, data}. ' +
        'Unknown query parameters are refused (400, code 1001, naming the first one), and so are unknown body ' +
        'fields of operator requests; charger requests ignore unknown body fields (forward compatibility).',
      // Support is whoever runs the platform; the document does not know their address.
      contact: { name: 'The operator of this platform' },
    },
    servers: serversFor(undefined, env),
    tags: [
      { name: 'operator', description: 'Operator-side API' },
      { name: 'device', description: 'Charger-side API' },
      { name: 'system', description: 'Operations' },
      { name: 'webhooks', description: 'Events sent to webhook endpoints (docs/webhooks.md)' },
    ],
    paths,
    webhooks: webhookOperations(),
    components: {
      schemas,
      responses: errorResponses,
      securitySchemes: {
        operatorOAuth: {
          type: 'oauth2',
          description: 'OAuth 2.0 client credentials; send the token as Authorization: Bearer.',
          flows: {
            clientCredentials: {
              tokenUrl: '/v1/operator/oauth/token',
              scopes: {
                read: 'Sites, devices, charging records, telemetry, aggregated energy',
                write: 'Remote start, stop, discharge, schedule, flexibility commands',
              },
            },
          },
        },
        clientBasic: {
          type: 'http',
          scheme: 'basic',
          description:
            'The token endpoint only: client_id and client_secret as HTTP Basic credentials (RFC 6749 §2.3.1), ' +
            'instead of in the body.',
        },
        deviceBearer: {
          type: 'http',
          scheme: 'bearer',
          description: 'Device access token from /v1/device/token',
        },
      },
    },
  };
}

/** One route's operation; error bodies of its own (the token endpoint's) are added to `schemas`. */
function operationOf(r: AnyRoute, schemas: Record<string, JsonSchema>): JsonSchema {
  if (r.binary) return binaryOperationOf(r, schemas);
  const responses: Record<string, unknown> = {};
  const data = jsonSchema(r.response, 'output');
  const body = r.raw
    ? data
    : {
        type: 'object',
        required: ['code', 'message', 'data'],
        properties: { code: { const: 0 }, message: { type: 'string', const: 'success' }, data },
        additionalProperties: false,
      };
  for (const s of statusesOf(r)) {
    if (s === 200) {
      responses['200'] = {
        description: 'Success',
        ...(r.rate ? { headers: RATE_LIMIT_HEADERS } : {}),
        content: { 'application/json': { schema: body } },
      };
    } else if (r.errorBody?.responses[s]) {
      const { description, headers } = r.errorBody.responses[s];
      schemas[r.errorBody.name] ??= jsonSchema(r.errorBody.schema, 'output');
      responses[String(s)] = {
        description,
        ...(headers ? { headers } : {}),
        content: { 'application/json': { schema: { $ref: `#/components/schemas/${r.errorBody.name}` } } },
      };
    } else {
      responses[String(s)] = errorRef(s);
    }
  }

  const operation: JsonSchema = {
    tags: [r.tag],
    summary: r.summary,
    operationId: `${r.method.toLowerCase()}${toOpenApiPath(r.url)
      .replace(/[{}]/g, '')
      .split(/[/_-]/)
      .filter(Boolean)
      .map((p) => p[0]!.toUpperCase() + p.slice(1))
      .join('')}`,
    parameters: [
      ...parameters(r.params, 'path'),
      ...parameters(r.query, 'query'),
      ...parameters(r.headers, 'header'),
    ],
    responses,
  };
  if (r.description) operation.description = r.description;
  if (r.documented?.security) operation.security = r.documented.security;
  else if (r.auth.kind === 'operator') operation.security = [{ operatorOAuth: [r.auth.scope] }];
  else if (r.auth.kind === 'device') operation.security = [{ deviceBearer: [] }];
  else operation.security = [];
  if (r.streamed) {
    operation.requestBody = {
      required: true,
      description: r.streamed.description,
      content: { 'application/octet-stream': { schema: { type: 'string', format: 'binary' } } },
    };
  }
  if (r.body) {
    const sent = r.documented?.body ?? r.body;
    const content: Record<string, unknown> = {
      'application/json': { schema: jsonSchema(sent, 'input') },
    };
    if (r.url.endsWith('/oauth/token'))
      content['application/x-www-form-urlencoded'] = { schema: jsonSchema(sent, 'input') };
    operation.requestBody = { required: !r.bodyOptional, content };
  }
  return operation;
}

const errorRef = (status: number) => ({ $ref: `#/components/responses/E${status}` });

const FILE_HEADERS = {
  ETag: {
    description: "The file's sha256 in quotes: send it as If-Range when resuming",
    schema: { type: 'string' },
  },
  'Accept-Ranges': { schema: { type: 'string', const: 'bytes' } },
  'Content-Length': { schema: { type: 'integer', minimum: 0 } },
};

/** A route answering a file: 200 (the whole), 206 (a range) as binary, errors as usual. */
function binaryOperationOf(r: AnyRoute, schemas: Record<string, JsonSchema>): JsonSchema {
  const binary = r.binary!;
  const file = {
    [binary.contentType ?? 'application/octet-stream']: { schema: { type: 'string', format: 'binary' } },
  };
  const own = Object.fromEntries(
    Object.entries(binary.headers ?? {}).map(([name, h]) => [
      name,
      { description: h.description, schema: { type: 'string' } },
    ]),
  );
  const headers = { ...FILE_HEADERS, ...own, ...(r.rate ? RATE_LIMIT_HEADERS : {}) };
  const operation = operationOf({ ...r, binary: undefined, response: ErrorResponse }, schemas);
  const responses = operation.responses as Record<string, unknown>;
  responses['200'] = { description: binary.description, headers, content: file };
  if (binary.partial) {
    responses['206'] = {
      description: 'The range asked for (Range: bytes=N-), with Content-Range',
      headers: { ...headers, 'Content-Range': { schema: { type: 'string' } } },
      content: file,
    };
    responses['416'] = errorRef(416);
  }
  return operation;
}
