import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { ErrorCode, type ErrorResponse } from '../../shared/index.js';
import { SAME_ORIGIN_CSP } from './same-origin-csp.js';

/**
 * The operator dashboard at `GET /dashboard` (DESIGN.md §16): the files `npm run build` puts in dist/dashboard/
 * (scripts/build-dashboard.mjs), served by the platform itself so that it works on an isolated network. The page
 * talks only to this origin — the operator API with a bearer token and the stream — and its Content-Security-Policy
 * allows nothing else: no inline script or style, no other host, no frames.
 */
export const DASHBOARD_CSP = SAME_ORIGIN_CSP;

const TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
};

interface Asset {
  body: Buffer;
  type: string;
  etag: string;
}

/** dist/dashboard/ beside the compiled platform, or the built copy when the platform runs from its sources (tests). */
export function dashboardDirectory(): string | undefined {
  const candidates = [
    fileURLToPath(new URL('../../dashboard/', import.meta.url)),
    fileURLToPath(new URL('../../dist/dashboard/', import.meta.url)),
  ];
  return candidates.find(
    (dir) => existsSync(join(dir, 'index.html')) && existsSync(join(dir, 'dashboard.js')),
  );
}

export function registerDashboard(app: FastifyInstance, dir = dashboardDirectory()): void {
  // Read once, at the first request: a few hundred KiB, revalidated by ETag.
  let files: Map<string, Asset> | undefined;
  const load = (): Map<string, Asset> => {
    if (files) return files;
    files = new Map();
    if (!dir) return files;
    for (const name of readdirSync(dir)) {
      const type = name === 'index.html' ? 'text/html; charset=utf-8' : TYPES[extname(name)];
      if (!type) continue;
      const body = readFileSync(join(dir, name));
      files.set(name, {
        body,
        type,
        etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`,
      });
    }
    return files;
  };

  app.get('/dashboard', async (request, reply) => {
    const page = load().get('index.html');
    if (!page) {
      const body: ErrorResponse = {
        code: ErrorCode.INTERNAL,
        message: 'The dashboard is not built: run npm run build',
      };
      return reply.code(503).send(body);
    }
    secure(reply);
    return send(request.headers['if-none-match'], reply, page);
  });
  app.get('/dashboard/', async (_request, reply) => reply.redirect('/dashboard', 301));
  app.get<{ Params: { name: string } }>('/dashboard/assets/:name', async (request, reply) => {
    const name = request.params.name;
    const asset = name === 'index.html' ? undefined : load().get(name);
    if (!asset) {
      const body: ErrorResponse = {
        code: ErrorCode.NOT_FOUND,
        message: `No asset ${name.slice(0, 100)}`,
        details: { field: 'name', value: name.slice(0, 100) },
      };
      return reply.code(404).send(body);
    }
    reply.header('x-content-type-options', 'nosniff');
    return send(request.headers['if-none-match'], reply, asset);
  });
}

function secure(reply: FastifyReply): void {
  reply
    .header('content-security-policy', DASHBOARD_CSP)
    .header('x-content-type-options', 'nosniff')
    .header('referrer-policy', 'no-referrer')
    .header('x-frame-options', 'DENY');
}

function send(ifNoneMatch: string | undefined, reply: FastifyReply, asset: Asset) {
  reply.header('etag', asset.etag).header('cache-control', 'no-cache');
  if (ifNoneMatch === asset.etag) return reply.code(304).send();
  return reply.type(asset.type).send(asset.body);
}
