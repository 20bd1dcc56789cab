import { isUtf8 } from 'node:buffer';
import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import { hostname } from 'node:os';
import websocket from '@fastify/websocket';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyServerOptions } from 'fastify';
import type { DestinationStream } from 'pino';
import { API_VERSION, ErrorCode, type ErrorResponse, MAX_BODY_BYTES } from '../../shared/index.js';
import type { RedisLink } from '../coordination/redis-link.js';
import { shareThroughRedis } from '../coordination/shared-state.js';
import { ApiError } from '../domain/api-error.js';
import { createTokenService } from '../services/access-tokens.js';
import { createCommandNotifier } from '../services/command-notifier.js';
import { createCommandService } from '../services/command-service.js';
import { createDeviceSecretService } from '../services/device-secret-service.js';
import { createLiveness } from '../services/liveness.js';
import { bothEvents, noEvents } from '../services/platform-events.js';
import { createPrincipalDirectory } from '../services/principal-directory.js';
import { createRegistrationService } from '../services/registration-service.js';
import { createWebhooks, type WebhookOptions } from '../services/webhooks.js';
import type { PlatformKeys } from '../storage/platform-keys.js';
import { storageFaultOf } from '../storage/storage-faults.js';
import type { Store } from '../storage/store.js';
import { createTelemetryStream } from '../stream/telemetry-stream.js';
import { registerApiReference } from './api-reference-page.js';
import { clientCertificateRequest } from './auth/client-certificate.js';
import { createReplayCache } from './auth/request-signature.js';
import { guardConnections } from './connection-guard.js';
import {
  type ConnectionLimits,
  connectionsCheckingMs,
  DEFAULT_CONNECTION_LIMITS,
  STRICT_TRANSPORT_SECURITY,
} from './connection-limits.js';
import type { PlatformContext, PlatformOptions } from './context.js';
import { installCors } from './cors.js';
import { registerDashboard } from './dashboard-page.js';
import { createStorageFaultLog, installErrorHandling } from './http-errors.js';
import { createMetrics, type MetricsListener, serveMetrics } from './metrics.js';
import { openApiDocumentServer } from './openapi.js';
import {
  createMemoryRateLimitStore,
  createRateLimiter,
  type RateLimitStore,
} from './rate-limit/rate-limiter.js';
import { type AnyRoute, registerRoutes } from './route-spec.js';
import { deviceRoutes } from './routes/device-routes.js';
import { answersWithin, healthRoutes } from './routes/health.js';
import { operatorRoutes } from './routes/operator-routes.js';
import { TLS_CIPHERS } from './tls.js';

export interface BuildOptions extends PlatformOptions {
  store: Store;
  keys: PlatformKeys;
  tls: { cert: string; key: string };
  now?: () => number;
  /** Shared counters for several instances; in memory by default. */
  rateLimitStore?: RateLimitStore;
  /** Requests a minute one address may make to the unauthenticated routes (DESIGN.md §18; `--address-limit`). */
  addressLimit?: number;
  /** pino level (`info`, `warn`, ...); absent: no logs. `stream` lets tests capture what is logged. */
  log?: { level: string; stream?: DestinationStream };
  /** Stream keep-alive ping period (ms); 30 s unless a test shortens it. */
  streamPingMs?: number;
  /** How often expired commands and ended controls are swept (ms). */
  sweepEveryMs?: number;
  /** This instance's name in logs, metrics and health answers (DESIGN.md §13); default host name and pid. */
  instanceId?: string;
  /**
   * Redis shared with the other instances of this platform: rate limits, the replay cache, long-poll wake-ups
   * and the stream's events (DESIGN.md §13). The caller owns the link and closes it after `close()`.
   */
  redis?: RedisLink;
  /** Browser origins allowed to call the API (CORS, DESIGN.md §15), exact; none: CORS off, nothing registered. */
  corsOrigins?: readonly string[];
  /** Webhook delivery (DESIGN.md §14). */
  webhooks?: WebhookOptions;
  /** Time limits and the connection cap (DESIGN.md §18); the defaults unless a test shortens them. */
  connections?: Partial<ConnectionLimits>;
  /** Every connection starts with a PROXY protocol v2 header naming the client (behind HAProxy `send-proxy-v2`). */
  proxyProtocol?: boolean;
}

export interface Platform {
  app: FastifyInstance;
  context: PlatformContext;
  routes: readonly AnyRoute[];
  registeredRoutes: ReadonlyArray<{ method: string; url: string }>;
  /**
   * Expire overdue commands, complete ended controls and promote pending device secrets past their grace now,
   * after a sweep in progress (also runs on a timer).
   */
  sweep(): Promise<void>;
  webhooks: {
    /** Sends what is due now (by the platform's clock) and waits for the attempts. */
    deliverDue(): Promise<void>;
  };
  /**
   * Starts the Prometheus listener (plain HTTP `GET /metrics`, on its own port: DESIGN.md §15); port 0 picks a
   * free one. `close()` closes it.
   */
  serveMetrics(host: string, port: number): Promise<MetricsListener>;
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
  const instanceId = opts.instanceId ?? defaultInstanceId();
  const limits: ConnectionLimits = { ...DEFAULT_CONNECTION_LIMITS, ...opts.connections };
  const app = Fastify({
    https: {
      cert: opts.tls.cert,
      key: opts.tls.key,
      minVersion: 'TLSv1.2',
      ciphers: TLS_CIPHERS,
      handshakeTimeout: limits.firstRequestMs,
      headersTimeout: limits.requestMs,
      requestTimeout: limits.requestMs,
      connectionsCheckingInterval: connectionsCheckingMs(limits),
      ...clientCertificateRequest(opts),
    },
    // Whole request within requestMs (headers and body; a long poll's or the stream's wait is not the request's).
    requestTimeout: limits.requestMs,
    keepAliveTimeout: limits.keepAliveMs,
    // No idle timeout on the socket: a long poll is silent for up to 30 s by design.
    connectionTimeout: 0,
    bodyLimit: MAX_BODY_BYTES,
    onProtoPoisoning: 'error',
    onConstructorPoisoning: 'error',
    logger: opts.log ? loggerOptions(opts.log.level, instanceId, opts.log.stream) : false,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    },
    routerOptions: { maxParamLength: 200 },
    // HEAD is not part of the API; leaving it out keeps the route table and the OpenAPI document identical.
    exposeHeadRoutes: false,
    // The router answers an undecodable URL or an over-long path parameter itself, before any hook or the
    // error handler runs: without this, those answers carry Fastify's own body and no X-API-Version.
    frameworkErrors: (err, request, reply) => {
      const body: ErrorResponse = {
        code: ErrorCode.VALIDATION,
        message:
          err.code === 'FST_ERR_MAX_PARAM_LENGTH' ? 'Path parameter too long' : 'Path is not a valid URL',
        details: { field: 'path', value: (request.raw.url ?? '').split('?')[0]!.slice(0, 200) },
      };
      (reply as unknown as FastifyReply)
        .header('x-api-version', API_VERSION)
        .header('strict-transport-security', STRICT_TRANSPORT_SECURITY)
        .header('x-request-id', request.id)
        .code(400)
        .send(body);
    },
    // Requests Node's HTTP parser rejects (malformed request line or headers) never reach Fastify either.
    clientErrorHandler: (err, socket) => {
      if ((err as NodeJS.ErrnoException).code === 'ECONNRESET' || socket.destroyed) return;
      const code = (err as NodeJS.ErrnoException).code;
      const status = code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : code === 'HPE_HEADER_OVERFLOW' ? 431 : 400;
      const body = JSON.stringify({
        code: ErrorCode.MALFORMED_BODY,
        message: 'Malformed HTTP request',
      } satisfies ErrorResponse);
      if (socket.writable) {
        socket.write(
          `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
            `Content-Type: application/json; charset=utf-8\r\nX-API-Version: ${API_VERSION}\r\n` +
            `Strict-Transport-Security: ${STRICT_TRANSPORT_SECURITY}\r\n` +
            `Connection: close\r\n\r\n${body}`,
        );
      }
      socket.destroy(err);
    },
  });
  const connections = guardConnections(app.server as HttpsServer, {
    firstRequestMs: limits.firstRequestMs,
    maxConnections: limits.maxConnections,
    proxyProtocol: opts.proxyProtocol ?? false,
    log: app.log,
  });

  // What Fastify actually serves, for checking the OpenAPI document against it.
  const registeredRoutes: Array<{ method: string; url: string }> = [];
  app.addHook('onRoute', (r) => {
    // CORS preflights (cors.ts) are HTTP plumbing, not an operation of the API.
    for (const method of Array.isArray(r.method) ? r.method : [r.method])
      if (method !== 'OPTIONS') registeredRoutes.push({ method, url: r.url });
  });

  const directory = await createPrincipalDirectory(opts.store);
  const shared = opts.redis ? await shareThroughRedis(opts.redis, opts.keys, instanceId, app.log) : undefined;
  const rateLimiter = createRateLimiter(
    opts.rateLimitStore ?? shared?.rateLimitStore ?? createMemoryRateLimitStore(),
    now,
    opts.addressLimit ? { unauthenticated: { limit: opts.addressLimit, windowSeconds: 60 } } : {},
  );
  const liveness = createLiveness(
    opts.store,
    now,
    (deviceId, status, atMs) => context.events.deviceStatus(deviceId, status, atMs),
    undefined,
    shared?.liveness,
  );
  const notifier = shared?.relay.notifier ?? createCommandNotifier();
  const webhooks = await createWebhooks({
    store: opts.store,
    keys: opts.keys,
    directory,
    now,
    log: app.log,
    options: opts.webhooks,
  });
  const options: PlatformOptions = {
    env: opts.env,
    registration: opts.registration,
    tokenTtlSeconds: opts.tokenTtlSeconds,
    defaultSiteId: opts.defaultSiteId,
  };
  const context: PlatformContext = {
    options,
    store: opts.store,
    tokens: createTokenService(opts.keys.tokenKey),
    keys: opts.keys,
    directory,
    rateLimiter,
    replayCache: shared?.replayCache ?? createReplayCache(),
    notifier,
    commands: createCommandService({
      store: opts.store,
      notifier,
      events: () => context.events,
      controlChanged: (control, atMs) => webhooks.events.controlStatus(control, atMs),
    }),
    secrets: createDeviceSecretService({ store: opts.store, keys: opts.keys, directory, now }),
    registration: createRegistrationService({
      store: opts.store,
      keys: opts.keys,
      directory,
      webhooks: webhooks.events,
      // The context's own options: read at each registration.
      options,
      now,
    }),
    liveness,
    events: noEvents,
    webhooks: webhooks.events,
    now,
  };
  const stream = createTelemetryStream(context, opts.streamPingMs, shared?.streamRegistry);
  // Webhooks hear only what happens on this instance: each event is queued once, wherever it happened.
  context.events = bothEvents(
    shared ? shared.relay.events(stream.events, () => stream.subscriberCount() > 0) : stream.events,
    webhooks.events.platformEvents,
  );
  const metrics = createMetrics({
    instanceId,
    store: opts.store,
    onlineChargers: () => liveness.onlineCount(),
    connectedChargers: () => context.notifier.connectedDevices(),
    streamSubscribers: () => stream.subscriberCount(),
    webhooks: () => webhooks.stats(),
    ...(shared ? { coordination: shared.stats } : {}),
  });
  context.metrics = metrics.recorder;
  metrics.install(app);

  app.decorateRequest('operator', null);
  app.decorateRequest('device', null);
  app.decorateRequest('rawBody', null);
  // A callback hook, not an async one: no promise per request.
  app.addHook('onRequest', (request, reply, done) => {
    reply
      .header('x-api-version', API_VERSION)
      .header('x-request-id', request.id)
      .header('strict-transport-security', STRICT_TRANSPORT_SECURITY);
    done();
  });
  if (opts.corsOrigins?.length) installCors(app, opts.corsOrigins);

  // Bodies are JSON (spec rule 2): Fastify's built-in text/plain parser would let strings through.
  app.removeContentTypeParser('text/plain');
  // JSON keeps its raw text for HMAC request signatures; parsing stays Fastify's (prototype-poisoning safe).
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  // Read as bytes: decoding as a string would silently turn invalid UTF-8 into U+FFFD and store corrupted text
  // (RFC 8259 §8.1: JSON exchanged between systems is UTF-8), so such a body is refused like invalid JSON.
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    if (!isUtf8(body as Buffer)) {
      done(new ApiError(ErrorCode.MALFORMED_BODY, 'Request body is not valid UTF-8'));
      return;
    }
    const text = (body as Buffer).toString('utf8');
    request.rawBody = text;
    parseJson(request, text, done);
  });
  // OAuth client libraries send form bodies to the token endpoint; everywhere else only JSON is accepted.
  app.addContentTypeParser(
    'application/x-www-form-urlencoded',
    { parseAs: 'buffer' },
    (request, body, done) => {
      if (request.routeOptions.url !== FORM_ROUTE) {
        done(
          new ApiError(ErrorCode.MALFORMED_BODY, 'Unsupported content type; send application/json', {
            status: 415,
          }),
        );
        return;
      }
      if (!isUtf8(body as Buffer)) {
        done(new ApiError(ErrorCode.MALFORMED_BODY, 'Request body is not valid UTF-8'));
        return;
      }
      done(null, Object.fromEntries(new URLSearchParams((body as Buffer).toString('utf8'))));
    },
  );

  const logStorageFault = createStorageFaultLog();
  installErrorHandling(app, logStorageFault);
  await app.register(websocket, {
    options: { maxPayload: 64 * 1024 },
    // A stream client's protocol error (a frame over 64 KiB, invalid UTF-8 in a text frame) is its own fault:
    // ws has already sent the close frame (1009, 1007). Log it as such, not as an internal error with a stack.
    errorHandler: (err, socket, request) => {
      const code = (err as NodeJS.ErrnoException).code;
      if (typeof code === 'string' && code.startsWith('WS_ERR_'))
        request.log.info({ code }, `stream connection closed: ${err.message}`);
      else request.log.error({ err }, 'stream connection error');
      socket.terminate();
    },
  });

  const routes = [...operatorRoutes(context, webhooks.service), ...deviceRoutes(context)];
  registerRoutes(app, context, routes);
  stream.register(app);
  let draining = false;
  healthRoutes(app, {
    instanceId,
    draining: () => draining,
    async checks(): Promise<Record<string, boolean>> {
      const storage = answersWithin(() => opts.store.getSetting('environment'));
      if (!opts.redis) return { storage: await storage };
      const redis = opts.redis;
      const [s, r] = await Promise.all([storage, answersWithin(() => redis.check().then(assertTrue))]);
      return { storage: s, redis: r };
    },
  });
  // Built once; `servers` names the origin the client asked (openapi.ts `serversFor`).
  const openapi = openApiDocumentServer(routes);
  app.get('/v1/openapi.json', async (request, reply) =>
    reply.type('application/json').send(openapi(request.headers.host)),
  );
  registerApiReference(app);
  registerDashboard(app);

  // Several instances share one database: one of them sweeps at a time (an advisory lock on PostgreSQL). The
  // timer skips a turn while another sweep runs; `sweep()` asked for explicitly waits for it and runs its own.
  const sweepUnlessRunning = () =>
    opts.store.runAlone('sweep', async () => {
      await context.commands.sweep(now());
      await context.secrets.promoteExpired(now());
    });
  const sweep = async () => {
    while (!(await sweepUnlessRunning()).ran) await new Promise((r) => setTimeout(r, 20));
  };
  const sweeper = setInterval(() => {
    sweepUnlessRunning().catch((err: unknown) => {
      const fault = storageFaultOf(err);
      if (fault) logStorageFault(app.log, fault);
      else app.log.error({ err }, 'sweep failed');
    });
  }, opts.sweepEveryMs ?? 1000);
  sweeper.unref();
  const metricsListeners: MetricsListener[] = [];

  return {
    app,
    context,
    routes,
    registeredRoutes,
    sweep,
    webhooks: { deliverDue: webhooks.deliverDue },
    async serveMetrics(host, port) {
      const listener = await serveMetrics(metrics.registry, host, port, (err) =>
        app.log.error({ err }, 'metrics listener'),
      );
      metricsListeners.push(listener);
      return listener;
    },
    async close() {
      // Balancers see the instance going (`/readyz` 503) and parked polls are answered now, so chargers move on.
      draining = true;
      notifier.releaseAll();
      clearInterval(sweeper);
      stream.close();
      connections.dropWaiting();
      await app.close();
      await webhooks.close();
      await Promise.all(metricsListeners.splice(0).map((l) => l.close()));
      await shared?.relay.close();
      directory.close();
      rateLimiter.close();
      await liveness.close();
    },
  };
}

/** Request logs carry method, redacted URL and request id: never a header, token, secret or signature. */
function loggerOptions(
  level: string,
  instance: string,
  stream?: DestinationStream,
): FastifyServerOptions['logger'] {
  return {
    level,
    base: { pid: process.pid, hostname: hostname(), instance },
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

export function defaultInstanceId(): string {
  return `${hostname()}-${process.pid}`;
}

function assertTrue(ok: boolean): void {
  if (!ok) throw new Error('not answered');
}
