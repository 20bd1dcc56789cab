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

/** Routes served outside the table (stream, health, this document and its reference page). */
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
      parameters: [
        {
          name: 'access_token',
          in: 'query',
          required: false,
          description: 'The bearer token, for browsers (which cannot set Authorization on a WebSocket)',
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
      responses: {
        '200': { description: 'HTML page', content: { 'text/html': { schema: { type: 'string' } } } },
        '304': { description: 'Not modified (If-None-Match)' },
        '503': { $ref: '#/components/responses/E503' },
      },
    },
  },
  {
    method: 'GET',
    url: '/dashboard/',
    operation: {
      tags: ['system'],
      summary: 'Redirects to /dashboard',
      responses: {
        '301': { description: 'Moved to /dashboard', headers: { Location: { schema: { type: 'string' } } } },
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
      responses: {
        '200': {
          description: 'OpenAPI document',
          content: { 'application/json': { schema: { type: 'object' } } },
        },
      },
    },
  },
];
