import { randomUUID } from 'node:crypto';
import type {} from '@fastify/websocket';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import {
  ErrorCode,
  STREAM_CLOSE_DUPLICATE,
  STREAM_CLOSE_SLOW_CONSUMER,
  STREAM_CLOSE_TOKEN_EXPIRED,
  STREAM_MAX_BUFFERED_BYTES,
  STREAM_MAX_CONNECTIONS_PER_CLIENT,
  STREAM_PING_INTERVAL_SECONDS,
  StreamClientMessage,
  validate,
} from '../../shared/index.js';
import { ApiError, errors } from '../domain/api-error.js';
import { FIRST_CLIENT_SECRET_GEN, operatorTokenLive } from '../domain/client-credentials.js';
import type { OperatorTokenDeps } from '../http/auth/authenticate.js';
import { bearerToken, verifyOperatorToken } from '../http/auth/authenticate.js';
import { redeemStreamTicket, type StreamTicketDeps } from '../http/auth/stream-tickets.js';
import type { PrincipalDirectory } from '../services/principal-directory.js';
import type { Tenancy } from '../services/tenancy.js';
import { createStreamEvents } from './stream-events.js';
import type { Subscriber, SubscriptionRegistry } from './subscribers.js';

export type { Subscriber, SubscriptionRegistry } from './subscribers.js';

/** What the stream needs: who may see what (the directory, sites) and how tokens are checked. */
export interface StreamDeps extends OperatorTokenDeps, StreamTicketDeps {
  directory: PrincipalDirectory;
  tenancy: Pick<Tenancy, 'findSite'>;
}

export const STREAM_PATH = '/v1/operator/stream';
type StreamRequest = FastifyRequest & { streamTokenExpiresMs?: number; streamTokenGen?: number };
/** How long a slow consumer has to read up to its 4008 close frame before the connection is cut. */
const SLOW_CONSUMER_GRACE_MS = 10_000;

export function createTelemetryStream(
  ctx: StreamDeps,
  pingEveryMs = STREAM_PING_INTERVAL_SECONDS * 1000,
  registry?: SubscriptionRegistry,
) {
  const byDevice = new Map<string, Set<Subscriber>>();
  const bySite = new Map<string, Set<Subscriber>>();
  const bySubscriptionKey = new Map<string, Subscriber>();
  const perClient = new Map<string, number>();
  const all = new Set<Subscriber>();

  const index = (map: Map<string, Set<Subscriber>>, key: string, s: Subscriber, add: boolean) => {
    let set = map.get(key);
    if (add) {
      if (!set) {
        set = new Set();
        map.set(key, set);
      }
      set.add(s);
    } else if (set) {
      set.delete(s);
      if (set.size === 0) map.delete(key);
    }
  };
  /** Gives a set up in the registry unless this connection holds it (again) or is claiming it once more. */
  const releaseUnused = (s: Subscriber, key: string) => {
    if (registry && s.key !== key && !s.claiming.has(key)) registry.release(key, s.connectionId);
  };
  const unsubscribe = (s: Subscriber, release = true) => {
    const key = s.key;
    for (const id of s.deviceIds) index(byDevice, id, s, false);
    for (const id of s.siteIds) index(bySite, id, s, false);
    if (s.key && bySubscriptionKey.get(s.key) === s) bySubscriptionKey.delete(s.key);
    s.deviceIds = [];
    s.siteIds = [];
    s.key = undefined;
    if (key && release) releaseUnused(s, key);
  };
  /** Counts a claim in flight for this connection, so that nothing gives the set up meanwhile. */
  const claiming = (s: Subscriber, key: string, delta: 1 | -1) => {
    const n = (s.claiming.get(key) ?? 0) + delta;
    if (n > 0) s.claiming.set(key, n);
    else s.claiming.delete(key);
  };
  const refuseDuplicate = (s: Subscriber) =>
    // Spec: one concurrent connection per client_id per device subscription set.
    s.socket.close(STREAM_CLOSE_DUPLICATE, 'subscription already open on another connection');

  const send = (s: Subscriber, text: string) => {
    if (s.socket.readyState !== s.socket.OPEN) return;
    if (s.socket.bufferedAmount > STREAM_MAX_BUFFERED_BYTES) {
      s.socket.close(STREAM_CLOSE_SLOW_CONSUMER, 'consumer too slow');
      // Its subscription set is free at once, so that the consumer may reconnect with it.
      unsubscribe(s);
      // The close frame waits behind the backlog (nothing more is queued after it, so memory stays bounded):
      // a consumer that catches up in time learns why it was closed; one that does not read at all is cut.
      setTimeout(() => s.socket.terminate(), SLOW_CONSUMER_GRACE_MS).unref();
      return;
    }
    s.socket.send(text);
  };
  const sendJson = (s: Subscriber, message: unknown) => send(s, JSON.stringify(message));

  const events = createStreamEvents(ctx.directory, { byDevice, bySite, send });

  const fail = (s: Subscriber, err: ApiError) =>
    sendJson(s, {
      type: 'error',
      code: err.code,
      message: err.message,
      ...(err.details ? { details: err.details } : {}),
    });

  async function onMessage(s: Subscriber, raw: string) {
    if (s.socket.readyState !== s.socket.OPEN) return; // closing: a late subscribe must not hold a set again
    let data: unknown;
    try {
      data = JSON.parse(raw);
    } catch {
      fail(s, new ApiError(ErrorCode.MALFORMED_BODY, 'Message is not valid JSON'));
      return;
    }
    const parsed = validate(StreamClientMessage, data);
    if (!parsed.ok) {
      fail(s, errors.validation(parsed.error));
      return;
    }
    const msg = parsed.data;
    if (msg.type === 'ping') {
      sendJson(s, { type: 'pong' });
      return;
    }
    const request = ++s.requests;
    const deviceIds = [...new Set(msg.device_ids ?? [])].sort();
    const siteIds = [...new Set(msg.site_ids ?? [])].sort();
    for (const id of deviceIds) {
      // A device new to this instance's directory (registered through another instance) is looked up.
      if (!ctx.directory.device(id)) await ctx.directory.refreshDevice(id);
      const entry = ctx.directory.device(id);
      if (!entry?.operator_id || !s.operatorIds.includes(entry.operator_id)) {
        fail(s, errors.notFound(`Device ${id}`));
        return;
      }
    }
    for (const id of siteIds) {
      if (!(await ctx.tenancy.findSite(s, id))) {
        fail(s, errors.notFound(`Site ${id}`));
        return;
      }
    }
    const key = `${s.clientId}|${deviceIds.length ? `d:${deviceIds.join(',')}` : `s:${siteIds.join(',')}`}`;
    const holder = bySubscriptionKey.get(key);
    if (holder && holder !== s) {
      refuseDuplicate(s);
      return;
    }
    if (registry && key !== s.key) {
      // Held by a connection on another instance? Much may change while the answer travels: see below.
      claiming(s, key, 1);
      // A registry that fails anyway counts as one that cannot tell: yes.
      const claimed = await Promise.resolve()
        .then(() => registry.claim(key, s.connectionId))
        .catch(() => true);
      // Counted down in the same turn as the answer is acted on, so no `releaseUnused` slips in between.
      claiming(s, key, -1);
      if (s.socket.readyState !== s.socket.OPEN || s.applied > request) {
        // Closed meanwhile (its close gave up what it held), or overtaken by a later subscribe message of this
        // connection, whose set is in place: this one is dropped, and its set given up unless in use after all.
        if (claimed) releaseUnused(s, key);
        return;
      }
      const taken = bySubscriptionKey.get(key);
      if (!claimed || (taken && taken !== s)) {
        // Refused by the registry, or taken meanwhile by another connection here (the registry said yes to
        // both while Redis was away).
        if (claimed) releaseUnused(s, key);
        refuseDuplicate(s);
        return;
      }
    }
    const previous = s.key;
    unsubscribe(s, false);
    s.key = key;
    s.applied = request;
    s.deviceIds = deviceIds;
    s.siteIds = siteIds;
    bySubscriptionKey.set(key, s);
    for (const id of deviceIds) index(byDevice, id, s, true);
    for (const id of siteIds) index(bySite, id, s, true);
    // The set held before, if another, is given up now that the new one is in place.
    if (previous) releaseUnused(s, previous);
    sendJson(
      s,
      deviceIds.length
        ? { type: 'subscribed', device_ids: deviceIds }
        : { type: 'subscribed', site_ids: siteIds },
    );
  }

  /** Closes the connections of revoked clients and of tokens a rotation's grace no longer covers (4401). */
  const closeRevoked = () => {
    const nowMs = ctx.now();
    for (const s of all) {
      const entry = ctx.directory.client(s.clientId);
      if (!entry || !operatorTokenLive(entry, s.tokenGen, nowMs))
        s.socket.close(STREAM_CLOSE_TOKEN_EXPIRED, 'client credentials revoked');
    }
  };
  const stopWatchingDirectory = ctx.directory.onReload(closeRevoked);

  const pinger = setInterval(() => {
    closeRevoked();
    const nowMs = ctx.now();
    for (const s of all) {
      if (nowMs >= s.tokenExpiresMs) {
        s.socket.close(STREAM_CLOSE_TOKEN_EXPIRED, 'access token expired');
        continue;
      }
      if (!s.alive) {
        s.socket.terminate();
        continue;
      }
      s.alive = false;
      s.socket.ping();
    }
    if (registry) {
      const held: Array<[string, string]> = [];
      for (const s of all) if (s.key) held.push([s.key, s.connectionId]);
      if (held.length > 0) registry.refresh(held);
    }
  }, pingEveryMs);
  pinger.unref();

  /** The connection's client: a bearer token in Authorization, a one-use ticket, or (deprecated) the token in the URL. */
  async function identify(request: FastifyRequest) {
    const query = request.query as Record<string, unknown> | undefined;
    if (!request.headers.authorization && typeof query?.ticket === 'string')
      return redeemStreamTicket(ctx, query.ticket);
    const fromQuery = typeof query?.access_token === 'string' ? query.access_token : undefined;
    const token = request.headers.authorization ? bearerToken(request.headers.authorization) : fromQuery;
    if (!token) throw errors.unauthorized('Missing bearer token');
    const principal = await verifyOperatorToken(ctx, token);
    const claims = ctx.tokens.verifyOperatorToken(token, ctx.now());
    return {
      principal,
      expiresMs: claims.ok ? claims.claims.exp * 1000 : ctx.now(),
      gen: (claims.ok ? claims.claims.gen : undefined) ?? FIRST_CLIENT_SECRET_GEN,
    };
  }

  async function authenticate(request: FastifyRequest) {
    const identified = await identify(request);
    const { principal } = identified;
    if (!principal.scopes.includes('read')) throw errors.forbidden('This client lacks the read scope');
    if ((perClient.get(principal.clientId) ?? 0) >= STREAM_MAX_CONNECTIONS_PER_CLIENT) {
      throw new ApiError(ErrorCode.RATE_LIMITED, 'Too many requests', {
        details: { retry_after_seconds: STREAM_PING_INTERVAL_SECONDS },
        headers: { 'retry-after': String(STREAM_PING_INTERVAL_SECONDS) },
      });
    }
    return identified;
  }

  return {
    events,
    register(app: FastifyInstance) {
      app.route({
        method: 'GET',
        url: STREAM_PATH,
        // Authenticated before the upgrade, so a refusal is a plain HTTP ErrorResponse.
        preValidation: async (request) => {
          const { principal, expiresMs, gen } = await authenticate(request);
          request.operator = principal;
          const streamRequest = request as StreamRequest;
          streamRequest.streamTokenExpiresMs = expiresMs;
          streamRequest.streamTokenGen = gen;
        },
        // A plain GET (no Upgrade) gets an ErrorResponse too, not the plugin's empty 404.
        handler: async () => {
          throw new ApiError(
            ErrorCode.VALIDATION,
            'This endpoint is a WebSocket: send an Upgrade: websocket request',
            {
              status: 426,
              details: { field: 'upgrade', value: null },
              headers: { upgrade: 'websocket' },
            },
          );
        },
        wsHandler: (socket, request) => {
          const principal = request.operator!;
          const s: Subscriber = {
            socket,
            clientId: principal.clientId,
            operatorIds: principal.operatorIds,
            tokenExpiresMs: (request as StreamRequest).streamTokenExpiresMs ?? 0,
            tokenGen: (request as StreamRequest).streamTokenGen ?? FIRST_CLIENT_SECRET_GEN,
            key: undefined,
            deviceIds: [],
            siteIds: [],
            alive: true,
            connectionId: randomUUID(),
            requests: 0,
            applied: 0,
            claiming: new Map(),
          };
          all.add(s);
          perClient.set(s.clientId, (perClient.get(s.clientId) ?? 0) + 1);
          socket.on('pong', () => {
            s.alive = true;
          });
          socket.on('message', (data, isBinary) => {
            if (isBinary) {
              fail(s, new ApiError(ErrorCode.MALFORMED_BODY, 'Send JSON text messages'));
              return;
            }
            onMessage(s, data.toString()).catch(() =>
              fail(s, new ApiError(ErrorCode.INTERNAL, 'Internal error')),
            );
          });
          socket.on('error', () => socket.terminate());
          socket.on('close', () => {
            unsubscribe(s);
            all.delete(s);
            const n = (perClient.get(s.clientId) ?? 1) - 1;
            if (n <= 0) perClient.delete(s.clientId);
            else perClient.set(s.clientId, n);
          });
        },
      });
    },
    subscriberCount: () => all.size,
    close() {
      clearInterval(pinger);
      stopWatchingDirectory();
      for (const s of all) s.socket.terminate();
    },
  };
}
export type TelemetryStream = ReturnType<typeof createTelemetryStream>;
