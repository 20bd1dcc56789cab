import { z } from 'zod';
import { API_VERSION, ErrorResponse } from '../shared/index.js';
import type { AnyRoute } from './route-spec.js';

/**
 * The OpenAPI 3.1 document, generated from the same route table and zod schemas that validate requests.
 * zod 4 emits JSON Schema draft 2020-12, which is OpenAPI 3.1's schema dialect.
 */
type JsonSchema = Record<string, unknown>;

function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): JsonSchema {
  const out = z.toJSONSchema(schema, { target: 'draft-2020-12', io, unrepresentable: 'any' }) as JsonSchema;
  delete out.$schema;
  return out;
}

const ERROR_TEXT: Record<number, string> = {
  400: 'Validation failure (1001) or malformed body (1002)',
  401: 'Missing, invalid (2001) or expired (2002) credentials',
  403: 'Scope or policy does not allow it (2003)',
  404: 'Not found, or not visible to this client (3001)',
  409: 'State conflict (4001)',
  413: 'Body too large (1002)',
  415: 'Not application/json (1002)',
  429: 'Rate limit exceeded (5001); see Retry-After',
  500: 'Internal error (9001)',
  503: 'Storage full, read-only or failing (9001); nothing was stored: retry after Retry-After seconds',
};

/** Routes served outside the table (stream, health, metrics, this document). */
export const EXTRA_OPERATIONS: Array<{ method: 'GET'; url: string; operation: JsonSchema }> = [
  {
    method: 'GET',
    url: '/v1/operator/stream',
    operation: {
      tags: ['operator'],
      summary: 'Live telemetry stream (WebSocket)',
      description:
        'Upgrade to WebSocket with the bearer token in Authorization (or `access_token` query parameter for ' +
        'browsers). Send `{"type":"subscribe","device_ids":[...]}` or `{"type":"subscribe","site_ids":[...]}`; ' +
        'receive `subscribed`, then `telemetry`, `device_status` and `command_status` messages. A second ' +
        'connection of the same client with the same subscription set is closed with 4429; a consumer more than ' +
        '1 MiB behind with 4008; an expired token with 4401. The server pings every 30 s.',
      security: [{ operatorOAuth: ['read'] }],
      responses: {
        '101': { description: 'Switching to the WebSocket protocol' },
        '401': { $ref: '#/components/responses/E401' },
        '403': { $ref: '#/components/responses/E403' },
        '429': { $ref: '#/components/responses/E429' },
      },
    },
  },
  {
    method: 'GET',
    url: '/healthz',
    operation: {
      tags: ['system'],
      summary: 'Liveness probe (not enveloped)',
      responses: {
        '200': { description: 'Serving', content: { 'application/json': { schema: { type: 'object' } } } },
      },
    },
  },
  {
    method: 'GET',
    url: '/readyz',
    operation: {
      tags: ['system'],
      summary: 'Readiness probe for load balancers (not enveloped): storage and Redis answer, not draining',
      responses: {
        '200': { description: 'Ready', content: { 'application/json': { schema: { type: 'object' } } } },
        '503': {
          description: 'Not ready (a dependency does not answer, or the instance is shutting down)',
          content: { 'application/json': { schema: { type: 'object' } } },
        },
      },
    },
  },
  {
    method: 'GET',
    url: '/metrics',
    operation: {
      tags: ['system'],
      summary: 'Prometheus metrics (text exposition format)',
      responses: {
        '200': { description: 'Metrics', content: { 'text/plain': { schema: { type: 'string' } } } },
      },
    },
  },
  {
    method: 'GET',
    url: '/docs',
    operation: {
      tags: ['system'],
      summary: 'Interactive API reference (HTML, reads this document)',
      responses: {
        '200': { description: 'HTML page', content: { 'text/html': { schema: { type: 'string' } } } },
      },
    },
  },
  {
    method: 'GET',
    url: '/v1/openapi.json',
    operation: {
      tags: ['system'],
      summary: 'This OpenAPI 3.1 document',
      responses: {
        '200': {
          description: 'OpenAPI document',
          content: { 'application/json': { schema: { type: 'object' } } },
        },
      },
    },
  },
];

function parameters(schema: z.ZodType | undefined, where: 'path' | 'query'): JsonSchema[] {
  if (!schema) return [];
  const js = jsonSchema(schema, 'input');
  const props = (js.properties ?? {}) as Record<string, JsonSchema>;
  const required = new Set((js.required as string[] | undefined) ?? []);
  return Object.entries(props).map(([name, s]) => ({
    name,
    in: where,
    required: where === 'path' || required.has(name),
    schema: s,
    ...(typeof s.description === 'string' ? { description: s.description } : {}),
  }));
}

export function toOpenApiPath(url: string): string {
  return url.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
}

export function buildOpenApiDocument(routes: readonly AnyRoute[]): JsonSchema {
  const paths: Record<string, Record<string, JsonSchema>> = {};
  const errorRef = (status: number) => ({ $ref: `#/components/responses/E${status}` });

  for (const r of routes) {
    const responses: Record<string, unknown> = {};
    const data = jsonSchema(r.response, 'output');
    const body = r.raw
      ? data
      : {
          type: 'object',
          required: ['code', 'message', 'data'],
          properties: { code: { const: 0 }, message: { type: 'string', const: 'success' }, data },
        };
    responses['200'] = { description: 'Success', content: { 'application/json': { schema: body } } };
    const statuses = new Set<number>([400, 500, 503, ...(r.errors ?? [])]);
    if (r.auth.kind !== 'none') statuses.add(401);
    if (r.auth.kind === 'operator') statuses.add(403);
    if (r.rate || r.url.endsWith('/oauth/token') || r.url.startsWith('/v1/device/')) statuses.add(429);
    if (r.body) {
      statuses.add(413);
      statuses.add(415);
    }
    for (const s of [...statuses].sort()) responses[String(s)] = errorRef(s);

    const operation: JsonSchema = {
      tags: [r.tag],
      summary: r.summary,
      operationId: `${r.method.toLowerCase()}${toOpenApiPath(r.url)
        .replace(/[{}]/g, '')
        .split(/[/_-]/)
        .filter(Boolean)
        .map((p) => p[0]!.toUpperCase() + p.slice(1))
        .join('')}`,
      parameters: [...parameters(r.params, 'path'), ...parameters(r.query, 'query')],
      responses,
    };
    if (r.description) operation.description = r.description;
    if (r.auth.kind === 'operator') operation.security = [{ operatorOAuth: [r.auth.scope] }];
    else if (r.auth.kind === 'device') operation.security = [{ deviceBearer: [] }];
    else operation.security = [];
    if (r.body) {
      const content: Record<string, unknown> = {
        'application/json': { schema: jsonSchema(r.body, 'input') },
      };
      if (r.url.endsWith('/oauth/token'))
        content['application/x-www-form-urlencoded'] = { schema: jsonSchema(r.body, 'input') };
      operation.requestBody = { required: !r.bodyOptional, content };
    }
    const path = toOpenApiPath(r.url);
    paths[path] ??= {};
    paths[path][r.method.toLowerCase()] = operation;
  }
  for (const extra of EXTRA_OPERATIONS) {
    paths[extra.url] ??= {};
    paths[extra.url]![extra.method.toLowerCase()] = extra.operation;
  }

  const errorResponses: Record<string, unknown> = {};
  for (const [status, text] of Object.entries(ERROR_TEXT)) {
    errorResponses[`E${status}`] = {
      description: text,
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
        'Every response except the operator token response is enveloped as {code, message, data}.',
    },
    servers: [{ url: '/' }],
    tags: [
      { name: 'operator', description: 'Operator-side API' },
      { name: 'device', description: 'Charger-side API' },
      { name: 'system', description: 'Operations' },
    ],
    paths,
    components: {
      schemas: { ErrorResponse: jsonSchema(ErrorResponse, 'output') },
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
        deviceBearer: {
          type: 'http',
          scheme: 'bearer',
          description: 'Device access token from /v1/device/token',
        },
      },
    },
  };
}
