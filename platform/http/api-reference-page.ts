import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { ErrorCode, type ErrorResponse } from '../../shared/index.js';
import { SAME_ORIGIN_CSP } from './same-origin-csp.js';

/**
 * The interactive API reference at `GET /docs`: Swagger UI (`swagger-ui-dist`, from the platform's own
 * node_modules) reading `/v1/openapi.json`, with "Try it out" and an Authorize dialog that obtains a token with
 * client credentials from `/v1/operator/oauth/token` (the document's `operatorOAuth` scheme) or takes a pasted
 * bearer token. Everything comes from this server (`/docs/assets/*`): no CDN, no fonts, no validator badge, so it
 * works on an isolated network, and the Content-Security-Policy allows nothing else. The start-up script is a
 * served file, not inline. Tokens stay in the page's memory (`persistAuthorization` off).
 */

export const API_REFERENCE_CSP = SAME_ORIGIN_CSP;

const API_REFERENCE_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Charger Platform API reference</title>
<link rel="icon" type="image/png" href="/docs/assets/favicon-32x32.png">
<link rel="stylesheet" href="/docs/assets/swagger-ui.css">
</head>
<body>
<noscript>This reference needs JavaScript; the OpenAPI document is at <a href="/v1/openapi.json">/v1/openapi.json</a>.</noscript>
<div id="swagger-ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script src="/docs/assets/api-reference.js"></script>
</body>
</html>
`;

/** Starts Swagger UI on the page above (served as a file, so that the CSP needs no 'unsafe-inline'). */
const INIT_SCRIPT = `'use strict';
window.ui = SwaggerUIBundle({
  url: '/v1/openapi.json',
  dom_id: '#swagger-ui',
  presets: [SwaggerUIBundle.presets.apis],
  layout: 'BaseLayout',
  deepLinking: true,
  filter: true,
  displayRequestDuration: true,
  // No badge fetched from validator.swagger.io.
  validatorUrl: null,
  // Tokens obtained or pasted in the Authorize dialog stay in memory, never in localStorage.
  persistAuthorization: false,
  supportedSubmitMethods: ['get', 'post', 'patch', 'delete'],
});
`;

const SWAGGER_UI_DIR = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));

interface Asset {
  type: string;
  load: () => Buffer;
}

/** What `/docs/assets/{name}` serves; nothing else (no file system path comes from the request). */
const ASSETS: Record<string, Asset> = {
  'swagger-ui-bundle.js': {
    type: 'text/javascript; charset=utf-8',
    load: () => readFileSync(join(SWAGGER_UI_DIR, 'swagger-ui-bundle.js')),
  },
  'swagger-ui.css': {
    type: 'text/css; charset=utf-8',
    load: () => readFileSync(join(SWAGGER_UI_DIR, 'swagger-ui.css')),
  },
  'favicon-32x32.png': {
    type: 'image/png',
    load: () => readFileSync(join(SWAGGER_UI_DIR, 'favicon-32x32.png')),
  },
  'api-reference.js': { type: 'text/javascript; charset=utf-8', load: () => Buffer.from(INIT_SCRIPT) },
};
export const API_REFERENCE_ASSETS: readonly string[] = Object.keys(ASSETS);

export function registerApiReference(app: FastifyInstance): void {
  // Read on first use (Swagger UI's bundle is 1.7 MB) and kept; revalidated by ETag.
  const loaded = new Map<string, { body: Buffer; etag: string }>();
  app.get('/docs', async (_request, reply) =>
    reply
      .type('text/html; charset=utf-8')
      .header('content-security-policy', API_REFERENCE_CSP)
      .header('x-content-type-options', 'nosniff')
      .header('referrer-policy', 'no-referrer')
      .send(API_REFERENCE_HTML),
  );
  app.get<{ Params: { name: string } }>('/docs/assets/:name', async (request, reply) => {
    const name = request.params.name;
    const asset = Object.hasOwn(ASSETS, name) ? ASSETS[name] : undefined;
    if (!asset) {
      const body: ErrorResponse = {
        code: ErrorCode.NOT_FOUND,
        message: `No asset ${name.slice(0, 100)}`,
        details: { field: 'name', value: name.slice(0, 100) },
      };
      return reply.code(404).send(body);
    }
    let file = loaded.get(name);
    if (!file) {
      const body = asset.load();
      file = { body, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"` };
      loaded.set(name, file);
    }
    reply
      .header('etag', file.etag)
      .header('cache-control', 'no-cache')
      .header('x-content-type-options', 'nosniff');
    if (request.headers['if-none-match'] === file.etag) return reply.code(304).send();
    return reply.type(asset.type).send(file.body);
  });
}
