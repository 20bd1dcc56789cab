import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify';
import type { DestinationStream } from 'pino';
import { API_VERSION, ErrorCode, MAX_BODY_BYTES } from '../shared/index.js';
import { ApiError } from './api-error.js';
import { createTokenService } from './auth/access-tokens.js';
import type { PlatformContext, PlatformOptions } from './context.js';
import { createDeviceCredentials } from './device-credentials.js';
import { installErrorHandling } from './http-errors.js';
import { createLiveness } from './liveness.js';
import type { PlatformKeys } from './platform-keys.js';
import { deviceRoutes } from './routes/device-api.js';
import { healthRoutes } from './routes/health.js';
import { operatorControlRoutes } from './routes/operator-control.js';
import { operatorQueryRoutes } from './routes/operator-queries.js';
import { operatorTokenRoutes } from './routes/operator-token.js';
import type { Store } from './storage/store.js';

export interface BuildOptions extends PlatformOptions {
  store: Store;
  keys: PlatformKeys;
  tls: { cert: string; key: string };
  now?: () => number;
  /** pino level (`info`, `warn`, ...); absent: no logs. `stream` lets tests capture what is logged. */
  log?: { level: string; stream?: DestinationStream };
}

export interface Platform {
  app: FastifyInstance;
  context: PlatformContext;
  close(): Promise<void>;
}

const REQUEST_ID = /^[A-Za-z0-9._-]{1,64}$/;
const FORM_ROUTE = '/v1/operator/oauth/token';

/** Redacts credentials that can ride in a URL (the stream's `access_token` for browsers). */
function redactUrl(url: string): string {
  return url.replace(/([?&](?:access_token|client_secret|device_secret)=)[^&]*/gi, '$1[redacted]');
}

export async function buildPlatform(opts: BuildOptions): Promise<Platform> {
  const now = opts.now ?? Date.now;
  const app = Fastify({
    https: { cert: opts.tls.cert, key: opts.tls.key, minVersion: 'TLSv1.2' },
    bodyLimit: MAX_BODY_BYTES,
    onProtoPoisoning: 'error',
    onConstructorPoisoning: 'error',
    logger: opts.log ? loggerOptions(opts.log.level, opts.log.stream) : false,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    },
    routerOptions: { maxParamLength: 200 },
  });

  const credentials = await createDeviceCredentials(opts.store);
  const liveness = createLiveness(opts.store, now);
  const context: PlatformContext = {
    options: {
      env: opts.env,
      registration: opts.registration,
      tokenTtlSeconds: opts.tokenTtlSeconds,
      defaultSiteId: opts.defaultSiteId,
    },
    store: opts.store,
    tokens: createTokenService(opts.keys.tokenKey),
    keys: opts.keys,
    credentials,
    liveness,
    now,
  };

  app.decorateRequest('operator', null);
  app.decorateRequest('device', null);
  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-api-version', API_VERSION).header('x-request-id', request.id);
  });

  // Bodies are JSON (spec rule 2): Fastify's built-in text/plain parser would let strings through.
  app.removeContentTypeParser('text/plain');
  // OAuth client libraries send form bodies to the token endpoint; everywhere else only JSON is accepted.
  app.addContentTypeParser(
    'application/x-www-form-urlencoded',
    { parseAs: 'string' },
    (request, body, done) => {
      if (request.routeOptions.url !== FORM_ROUTE) {
        done(
          new ApiError(ErrorCode.MALFORMED_BODY, 'Unsupported content type; send application/json', {
            status: 415,
          }),
        );
        return;
      }
      done(null, Object.fromEntries(new URLSearchParams(body as string)));
    },
  );

  installErrorHandling(app);
  healthRoutes(app);
  operatorTokenRoutes(app, context);
  operatorQueryRoutes(app, context);
  operatorControlRoutes(app, context);
  deviceRoutes(app, context);

  return {
    app,
    context,
    async close() {
      await app.close();
      credentials.close();
      await liveness.close();
    },
  };
}

/** Request logs carry method, redacted URL and request id: never a header, token, secret or signature. */
function loggerOptions(level: string, stream?: DestinationStream): FastifyServerOptions['logger'] {
  return {
    level,
    ...(stream ? { stream } : {}),
    serializers: {
      req: (req: { method: string; url: string; id: string }) => ({
        method: req.method,
        url: redactUrl(req.url),
        id: req.id,
      }),
      res: (res: { statusCode: number }) => ({ statusCode: res.statusCode }),
    },
  };
}
