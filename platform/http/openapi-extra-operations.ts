import { API_REFERENCE_ASSETS } from './api-reference-page.js';
import type { JsonSchema } from './json-schema.js';

const HEALTH_SCHEMA: JsonSchema = {
  type: 'object',
  required: ['status', 'version', 'instance'],
  properties: { status: { const: 'ok' }, version: { type: 'string' }, instance: { type: 'string' } },
  additionalProperties: false,
};
const READINESS_SCHEMA: JsonSchema = {
  type: 'object',
  required: ['status', 'version', 'instance', 'checks'],
  properties: {
    status: { enum: ['ready', 'draining', 'not_ready'] },
    version: { type: 'string' },
    instance: { type: 'string' },
    checks: { type: 'object', additionalProperties: { enum: ['ok', 'unreachable'] } },
  },
  additionalProperties: false,
};

/**
 * Routes served outside the table (stream, health, this document and its reference page). `GET /dashboard/`, a
 * browser's redirect to `/dashboard`, is left out: it is no operation of the API.
 */
export const EXTRA_OPERATIONS: Array<{ method: 'GET'; url: string; operation: JsonSchema }> = [
  {
    method: 'GET',
    url: '/v1/operator/stream',
    operation: {
      tags: ['operator'],
      summary: 'Live telemetry stream (WebSocket)',
      operationId: 'openTelemetryStream',
      description:
        'Upgrade to WebSocket with the bearer token in Authorization, or, from a browser (which cannot set ' +
        'Authorization on a WebSocket), with `ticket` from POST /v1/operator/stream/tickets: one use, within 30 s. ' +
        'The `access_token` query parameter is deprecated (a token in a URL ends up in logs and history) and ' +
        'goes in the next release. Send `{"type":"subscribe","device_ids":[...]}` or `{"type":"subscribe","site_ids":[...]}`; ' +
        'receive `subscribed`, then `telemetry`, `device_status` and `command_status` messages. A second ' +
        'connection of the same client with the same subscription set is closed with 4429; a consumer more than ' +
        '1 MiB behind with 4008; an expired token with 4401. The server pings every 30 s.',
      security: [{ operatorOAuth: ['read'] }],
      parameters: [
        {
          name: 'ticket',
          in: 'query',
          required: false,
          description:
            'A stream ticket (POST /v1/operator/stream/tickets) instead of Authorization: one use, 30 s',
          schema: { type: 'string' },
        },
        {
          name: 'access_token',
          in: 'query',
          required: false,
          deprecated: true,
          description:
            'Deprecated: the bearer token in the URL. Use `ticket`; this parameter goes in the next release',
          schema: { type: 'string' },
        },
      ],
      responses: {
        '101': { description: 'Switching to the WebSocket protocol' },
        '400': {
          description:
            'Malformed WebSocket handshake (missing or invalid Sec-WebSocket-Key or Sec-WebSocket-Version), ' +
            'answered by the WebSocket layer as plain text, not as an ErrorResponse',
          content: { 'text/html': { schema: { type: 'string' } } },
        },
        '401': { $ref: '#/components/responses/E401' },
        '403': { $ref: '#/components/responses/E403' },
        '426': {
          description:
            'Not a WebSocket upgrade request (1001, `details.field` `upgrade`); see the Upgrade header',
          headers: { Upgrade: { schema: { type: 'string', const: 'websocket' } } },
          content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorResponse' } } },
        },
        '429': { $ref: '#/components/responses/E429' },
        '500': { $ref: '#/components/responses/E500' },
        '503': { $ref: '#/components/responses/E503' },
      },
    },
  },
  {
    method: 'GET',
    url: '/healthz',
    operation: {
      tags: ['system'],
      summary: 'Liveness probe (not enveloped)',
      operationId: 'getHealth',
      description:
        'Answers 200 while the process serves requests, whatever its storage or Redis: for a process ' +
        'supervisor. Needs no credentials and has no rate limit.',
      responses: {
        '200': { description: 'Serving', content: { 'application/json': { schema: HEALTH_SCHEMA } } },
      },
    },
  },
  {
    method: 'GET',
    url: '/readyz',
    operation: {
      tags: ['system'],
      summary: 'Readiness probe for load balancers (not enveloped): storage and Redis answer, not draining',
      operationId: 'getReadiness',
      description:
        'Answers 200 `ready` when the storage (and Redis, when configured) answers within a second and the ' +
        'instance is not shutting down, else 503 with the checks that failed: a load balancer takes the ' +
        'instance out of rotation on 503. Needs no credentials.',
      responses: {
        '200': { description: 'Ready', content: { 'application/json': { schema: READINESS_SCHEMA } } },
        '503': {
          description: 'Not ready (a dependency does not answer, or the instance is shutting down)',
          content: { 'application/json': { schema: READINESS_SCHEMA } },
        },
      },
    },
  },
  {
    method: 'GET',
    url: '/docs',
    operation: {
      tags: ['system'],
      summary: 'Interactive API reference (HTML, reads this document)',
      operationId: 'getApiReference',
      description:
        'The reference page for this document, served by the platform itself with its scripts (nothing is ' +
        'fetched from the internet); "try it" calls go to this platform.',
      responses: {
        '200': { description: 'HTML page', content: { 'text/html': { schema: { type: 'string' } } } },
      },
    },
  },
  {
    method: 'GET',
    url: '/docs/assets/{name}',
    operation: {
      tags: ['system'],
      summary: "The API reference's scripts, stylesheet and icon (served by the platform itself)",
      operationId: 'getApiReferenceAsset',
      description: 'One of the files the reference page loads, by name; cached by ETag (If-None-Match: 304).',
      parameters: [
        { name: 'name', in: 'path', required: true, schema: { type: 'string', enum: API_REFERENCE_ASSETS } },
      ],
      responses: {
        '200': {
          description: 'The file',
          content: {
            'text/javascript': { schema: { type: 'string' } },
            'text/css': { schema: { type: 'string' } },
            'image/png': { schema: { type: 'string', contentMediaType: 'image/png' } },
          },
        },
        '304': { description: 'Not modified (If-None-Match)' },
        '400': { $ref: '#/components/responses/E400' },
        '404': { $ref: '#/components/responses/E404' },
      },
    },
  },
  {
    method: 'GET',
    url: '/dashboard',
    operation: {
      tags: ['system'],
      summary: 'Operator dashboard (HTML; signs in with client credentials and uses this API and the stream)',
      operationId: 'getDashboard',
      description:
        "The operator dashboard (docs/dashboard.md): a single page that signs in with an API client's id and " +
        'secret and then uses only this API and the live stream. 503 when the build did not make its files.',
      responses: {
        '200': { description: 'HTML page', content: { 'text/html': { schema: { type: 'string' } } } },
        '304': { description: 'Not modified (If-None-Match)' },
        '503': { $ref: '#/components/responses/E503' },
      },
    },
  },
  {
    method: 'GET',
    url: '/dashboard/assets/{name}',
    operation: {
      tags: ['system'],
      summary:
        "The dashboard's script and stylesheet, as `npm run build` made them (served by the platform itself)",
      operationId: 'getDashboardAsset',
      description: 'One of the files the dashboard loads, by name; cached by ETag (If-None-Match: 304).',
      parameters: [{ name: 'name', in: 'path', required: true, schema: { type: 'string' } }],
      responses: {
        '200': {
          description: 'The file',
          content: {
            'text/javascript': { schema: { type: 'string' } },
            'text/css': { schema: { type: 'string' } },
            'application/json': { schema: { type: 'object' } },
          },
        },
        '304': { description: 'Not modified (If-None-Match)' },
        '400': { $ref: '#/components/responses/E400' },
        '404': { $ref: '#/components/responses/E404' },
      },
    },
  },
  {
    method: 'GET',
    url: '/v1/openapi.json',
    operation: {
      tags: ['system'],
      summary: 'This OpenAPI 3.1 document',
      operationId: 'getOpenApiDocument',
      description:
        'The document describing every operation of this platform, generated from the same route table and ' +
        'schemas that validate requests; `servers` names the origin it was fetched from and its environment.',
      responses: {
        '200': {
          description: 'OpenAPI document',
          content: { 'application/json': { schema: { type: 'object' } } },
        },
      },
    },
  },
];
