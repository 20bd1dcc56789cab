import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import { hostname } from 'node:os';
import websocket from '@fastify/websocket';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyServerOptions } from 'fastify';
import type { DestinationStream } from 'pino';
import { API_VERSION, ErrorCode, type ErrorResponse, MAX_BODY_BYTES } from '../../shared/index.js';
import { clientCertificateRequest } from './auth/client-certificate.js';
import { installBodyParsers } from './body-parsers.js';
import { type ConnectionGuard, guardConnections } from './connection-guard.js';
import {
  type ConnectionLimits,
  connectionsCheckingMs,
  DEFAULT_CONNECTION_LIMITS,
  STRICT_TRANSPORT_SECURITY,
} from './connection-limits.js';
import type { PlatformOptions } from './context.js';
import { installCors } from './cors.js';
import { createStorageFaultLog, installErrorHandling, type StorageFaultLog } from './http-errors.js';
import { limitRequestTimes } from './request-times.js';
import { TLS_CIPHERS } from './tls.js';

export interface HttpServerOptions extends Pick<PlatformOptions, 'registration'> {
  tls: { cert: string; key: string };
  /** pino level (`info`, `warn`, ...); absent: no logs. `stream` lets tests capture what is logged. */
  log?: { level: string; stream?: DestinationStream } | undefined;
  /** Time limits and the connection cap (DESIGN.md §18); the defaults unless a test shortens them. */
  connections?: Partial<ConnectionLimits> | undefined;
  /** Every connection starts with a PROXY protocol v2 header naming the client (behind HAProxy `send-proxy-v2`). */
  proxyProtocol?: boolean | undefined;
  /** Browser origins allowed to call the API (CORS, DESIGN.md §15), exact; none: CORS off, nothing registered. */
  corsOrigins?: readonly string[] | undefined;
}

export interface HttpServer {
  app: FastifyInstance;
  connections: ConnectionGuard;
  /** What Fastify actually serves, for checking the OpenAPI document against it. */
  registeredRoutes: ReadonlyArray<{ method: string; url: string }>;
  logStorageFault: StorageFaultLog;
}

const REQUEST_ID = /^[A-Za-z0-9._-]{1,64}$/;

/**
 * The HTTPS server and what every request goes through before a route: TLS and time limits, the connection
 * guard, request ids and the common headers, CORS, body parsing, the error envelope and the WebSocket plugin.
 * Routes are registered by the caller.
 */
export async function createHttpServer(opts: HttpServerOptions, instanceId: string): Promise<HttpServer> {
  const limits: ConnectionLimits = { ...DEFAULT_CONNECTION_LIMITS, ...opts.connections };
  const app = Fastify(fastifyOptions(opts, limits, instanceId));
  const connections = guardConnections(app.server as HttpsServer, {
    firstRequestMs: limits.firstRequestMs,
    maxConnections: limits.maxConnections,
    proxyProtocol: opts.proxyProtocol ?? false,
    log: app.log,
  });

  const requestTimes = limitRequestTimes(app.server as HttpsServer, limits);
  app.addHook('onClose', (_instance, done) => {
    requestTimes.close();
    done();
  });

  const registeredRoutes: Array<{ method: string; url: string }> = [];
  app.addHook('onRoute', (r) => {
    // CORS preflights (cors.ts) are HTTP plumbing, not an operation of the API.
    for (const method of Array.isArray(r.method) ? r.method : [r.method])
      if (method !== 'OPTIONS') registeredRoutes.push({ method, url: r.url });
  });

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
  installBodyParsers(app);

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
  return { app, connections, registeredRoutes, logStorageFault };
}

export function defaultInstanceId(): string {
  return `${hostname()}-${process.pid}`;
}

function fastifyOptions(
  opts: HttpServerOptions,
  limits: ConnectionLimits,
  instanceId: string,
): FastifyServerOptions & { https: object } {
  return {
    https: {
      cert: opts.tls.cert,
      key: opts.tls.key,
      minVersion: 'TLSv1.2',
      ciphers: TLS_CIPHERS,
      handshakeTimeout: limits.firstRequestMs,
      headersTimeout: limits.requestMs,
      // Bodies are timed by request-times.ts: an artifact upload may take longer than other requests.
      requestTimeout: 0,
      connectionsCheckingInterval: connectionsCheckingMs(limits),
      ...clientCertificateRequest(opts),
    },
    // Headers within requestMs (headersTimeout); the body is timed by request-times.ts (a long poll's or the
    // stream's wait is not the request's).
    requestTimeout: 0,
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
  };
}

/**
 * Redacts credentials that can ride in a URL: the stream's deprecated `access_token`, and its `ticket` (used once
 * and short-lived, but a credential until then).
 */
function redactUrl(url: string): string {
  return url.replace(/([?&](?:access_token|ticket|client_secret|device_secret)=)[^&]*/gi, '$1[redacted]');
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
