import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import type { RedisLink } from './coordination/redis-link.js';
import { type SharedState, shareThroughRedis } from './coordination/shared-state.js';
import { registerApiReference } from './http/api-reference-page.js';
import type { PlatformContext, PlatformOptions } from './http/context.js';
import { registerDashboard } from './http/dashboard-page.js';
import { createMetrics, type MetricsListener, serveMetrics } from './http/metrics.js';
import { openApiDocumentServer } from './http/openapi.js';
import {
  createMemoryRateLimitStore,
  createRateLimiter,
  type RateLimitStore,
} from './http/rate-limit/rate-limiter.js';
import { createReplayCache, type ReplayCache } from './http/replay-cache.js';
import { type AnyRoute, registerRoutes } from './http/route-spec.js';
import { deviceRoutes } from './http/routes/device-routes.js';
import { answersWithin, healthRoutes } from './http/routes/health.js';
import { operatorRoutes } from './http/routes/operator-routes.js';
import { createHttpServer, defaultInstanceId, type HttpServerOptions } from './http/server.js';
import { createTokenService, type TokenService } from './services/access-tokens.js';
import { createArtifactDownloads } from './services/artifact-downloads.js';
import { createArtifactService } from './services/artifact-service.js';
import { createClientTokenService } from './services/client-token-service.js';
import { createCommandNotifier } from './services/command-notifier.js';
import { createCommandService } from './services/command-service.js';
import { createControlService } from './services/control-service.js';
import { createDeviceReportingService } from './services/device-reporting-service.js';
import { createDeviceSecretService } from './services/device-secret-service.js';
import { createDiagnosticsService, failDiagnosticsWithCommand } from './services/diagnostics-service.js';
import { createDiagnosticsUploads } from './services/diagnostics-upload.js';
import { createLiveness } from './services/liveness.js';
import { createMaintenanceService } from './services/maintenance-service.js';
import { createOperatorCommandService } from './services/operator-command-service.js';
import { createOperatorReadService } from './services/operator-read-service.js';
import { bothEvents } from './services/platform-events.js';
import { createPrincipalDirectory, type PrincipalDirectory } from './services/principal-directory.js';
import { createRegistrationService } from './services/registration-service.js';
import { createSweeper } from './services/sweeper.js';
import { createTenancy, type Tenancy } from './services/tenancy.js';
import { createUpdateGate } from './services/update-gate.js';
import { createUpdateService } from './services/update-service.js';
import { createWebhooks, type WebhookOptions } from './services/webhooks.js';
import { type ArtifactFileCache, createArtifactFileCache } from './storage/artifact-file-cache.js';
import type { PlatformKeys } from './storage/platform-keys.js';
import type { Store, UpdateRow } from './storage/store.js';
import { createTelemetryStream, type TelemetryStream } from './stream/telemetry-stream.js';

export { defaultInstanceId } from './http/server.js';

export interface BuildOptions extends PlatformOptions, HttpServerOptions {
  store: Store;
  keys: PlatformKeys;
  now?: () => number;
  /** Shared counters for several instances; in memory by default. */
  rateLimitStore?: RateLimitStore;
  /** Requests a minute one address may make to the unauthenticated routes (DESIGN.md §18; `--address-limit`). */
  addressLimit?: number;
  /** Stream keep-alive ping period (ms); 30 s unless a test shortens it. */
  streamPingMs?: number;
  /** How often expired commands and ended controls are swept (ms). */
  sweepEveryMs?: number;
  /**
   * How often a sweep also runs the update gate (ms; 5 s unless a test shortens it, with `sweepEveryMs` at most
   * as long): a batch starts at the gate's first run after the one before it passed its health check.
   */
  updateGateEveryMs?: number;
  /** Artifact downloads served at once by this instance (default 64, DESIGN.md §19). */
  downloadsPerInstance?: number;
  /**
   * Where this instance keeps its local copies of artifacts to serve downloads from (`DATA_DIR/artifact-cache`,
   * storage/artifact-file-cache.ts); without it downloads read the stored chunks.
   */
  artifactCacheDir?: string;
  /** This instance's name in logs, metrics and health answers (DESIGN.md §13); default host name and pid. */
  instanceId?: string;
  /**
   * Redis shared with the other instances of this platform: rate limits, the replay cache, long-poll wake-ups
   * and the stream's events (DESIGN.md §13). The caller owns the link and closes it after `close()`.
   */
  redis?: RedisLink;
  /** Webhook delivery (DESIGN.md §14). */
  webhooks?: WebhookOptions;
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

/**
 * One platform instance, composed: the HTTPS server, what is shared with other instances (Redis), the services,
 * the live stream and webhooks, the context the routes get (built once, complete), the routes, the sweeper.
 */
export async function buildPlatform(opts: BuildOptions): Promise<Platform> {
  const now = opts.now ?? Date.now;
  const instanceId = opts.instanceId ?? defaultInstanceId();
  const http = await createHttpServer(opts, instanceId);
  const { app } = http;
  const shared = opts.redis ? await shareThroughRedis(opts.redis, opts.keys, instanceId, app.log) : undefined;
  const parts = await createParts(opts, now, app.log, shared);
  const metrics = createMetrics({
    instanceId,
    store: opts.store,
    onlineChargers: () => parts.liveness.onlineCount(),
    connectedChargers: () => parts.notifier.connectedDevices(),
    streamSubscribers: () => parts.stream.subscriberCount(),
    webhooks: () => parts.webhooks.stats(),
    ...(shared ? { coordination: shared.stats } : {}),
  });
  metrics.install(app);
  const context: PlatformContext = { ...parts.context, metrics: metrics.recorder };

  let draining = false;
  // While draining, every answer closes its connection: a keep-alive socket whose answer was still being
  // written when the server began to close would otherwise hold the close for Fastify's keep-alive timeout
  // (72 s), and the charger reconnects through the balancer to another instance anyway.
  // A callback hook, not an async one: no promise per request.
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (draining) reply.header('connection', 'close');
    done(null, payload);
  });
  const routes = [...operatorRoutes(context, parts.webhooks.service), ...deviceRoutes(context)];
  registerRoutes(app, context, routes);
  parts.stream.register(app);
  registerPlumbing(app, opts, instanceId, routes, () => draining);

  const sweeper = createSweeper({
    store: opts.store,
    commands: context.commands,
    secrets: context.secrets,
    artifacts: context.artifacts,
    updates: context.updates,
    now,
    everyMs: opts.sweepEveryMs ?? 1000,
    gateEveryMs: opts.updateGateEveryMs,
    log: app.log,
    logStorageFault: http.logStorageFault,
  });
  const metricsListeners: MetricsListener[] = [];

  return {
    app,
    context,
    routes,
    registeredRoutes: http.registeredRoutes,
    sweep: sweeper.sweep,
    webhooks: { deliverDue: parts.webhooks.deliverDue },
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
      parts.notifier.releaseAll();
      sweeper.stop();
      parts.stream.close();
      http.connections.dropWaiting();
      await app.close();
      await parts.webhooks.close();
      await Promise.all(metricsListeners.splice(0).map((l) => l.close()));
      await shared?.relay.close();
      parts.directory.close();
      parts.context.rateLimiter.close();
      await parts.liveness.close();
    },
  };
}

/**
 * The services and what they publish to, in dependency order: the stream and webhooks hear events, liveness and
 * commands emit them. Everything is built before the context, so nothing is patched in afterwards.
 */
async function createParts(
  opts: BuildOptions,
  now: () => number,
  log: FastifyBaseLogger,
  shared: SharedState | undefined,
) {
  const directory = await createPrincipalDirectory(opts.store);
  const base = {
    directory,
    tokens: createTokenService(opts.keys.tokenKey),
    tenancy: createTenancy(opts.store),
    // Request signatures and stream tickets, each usable once (shared by the instances on one Redis).
    replayCache: shared?.replayCache ?? createReplayCache(),
    now,
  };
  const listeners = await createListeners(opts, base, log, shared);
  const artifactCache = opts.artifactCacheDir
    ? createArtifactCache(opts.store, opts.artifactCacheDir, log)
    : undefined;
  const context = createContext(opts, { ...base, ...listeners, artifactCache, log }, shared);
  return { context, directory, ...listeners, notifier: context.notifier, liveness: context.liveness };
}

/** The instance's artifact copies; those of artifacts deleted meanwhile (by any instance) go at start. */
function createArtifactCache(store: Store, dir: string, log: FastifyBaseLogger): ArtifactFileCache {
  const cache = createArtifactFileCache({
    dir,
    readChunks: (id, first, last) => store.readArtifactChunks(id, first, last),
  });
  void cache
    .prune(async (id) => (await store.getArtifact(id)) !== undefined)
    .catch((err: unknown) => log.warn({ err }, 'pruning the artifact cache failed'));
  return cache;
}

interface BaseParts {
  directory: PrincipalDirectory;
  tokens: TokenService;
  tenancy: Tenancy;
  replayCache: ReplayCache;
  now: () => number;
}

/** Who hears the platform's events: the live stream (through the relay with several instances) and webhooks. */
async function createListeners(
  opts: BuildOptions,
  { directory, tokens, tenancy, replayCache, now }: BaseParts,
  log: FastifyBaseLogger,
  shared: SharedState | undefined,
) {
  const { store, keys } = opts;
  const webhooks = await createWebhooks({ store, keys, directory, now, log, options: opts.webhooks });
  const stream: TelemetryStream = createTelemetryStream(
    { directory, tokens, now, tenancy, replayCache },
    opts.streamPingMs,
    shared?.streamRegistry,
  );
  // Webhooks hear only what happens on this instance: each event is queued once, wherever it happened.
  const events = bothEvents(
    shared ? shared.relay.events(stream.events, () => stream.subscriberCount() > 0) : stream.events,
    webhooks.events.platformEvents,
  );
  return { webhooks, stream, events };
}

/** The services the routes call, over storage, publishing to `events`; the context that hands them over. */
function createContext(
  opts: BuildOptions,
  parts: BaseParts &
    Awaited<ReturnType<typeof createListeners>> & {
      artifactCache: ArtifactFileCache | undefined;
      log: FastifyBaseLogger;
    },
  shared: SharedState | undefined,
): Omit<PlatformContext, 'metrics'> {
  const { store, keys } = opts;
  const { directory, tokens, tenancy, now, events } = parts;
  const webhooks = parts.webhooks.events;
  const notifier = shared?.relay.notifier ?? createCommandNotifier();
  const liveness = createLiveness(
    store,
    now,
    (deviceId, status, atMs) => events.deviceStatus(deviceId, status, atMs),
    undefined,
    shared?.liveness,
  );
  const commands = createCommandService({
    store,
    notifier,
    events,
    controlChanged: (control, atMs) => webhooks.controlStatus(control, atMs),
    commandChanged: failDiagnosticsWithCommand(store),
  });
  const updateStatus = (update: UpdateRow, progress: Record<string, number>, atMs: number) =>
    webhooks.updateStatus(update, progress, atMs);
  const gate = createUpdateGate({
    store,
    commands,
    now,
    statusChanged: updateStatus,
    flushLiveness: () => liveness.flush(),
  });
  const updates = createUpdateService({ store, commands, gate, now, statusChanged: updateStatus });
  const options: PlatformOptions = {
    env: opts.env,
    registration: opts.registration,
    tokenTtlSeconds: opts.tokenTtlSeconds,
    defaultSiteId: opts.defaultSiteId,
  };
  return {
    options,
    tokens,
    keys,
    directory,
    rateLimiter: createRateLimiter(
      opts.rateLimitStore ?? shared?.rateLimitStore ?? createMemoryRateLimitStore(),
      now,
      opts.addressLimit ? { unauthenticated: { limit: opts.addressLimit, windowSeconds: 60 } } : {},
    ),
    replayCache: parts.replayCache,
    notifier,
    commands,
    clientTokens: createClientTokenService({
      store,
      keys,
      tokens,
      directory,
      now,
      tokenTtlSeconds: opts.tokenTtlSeconds,
    }),
    secrets: createDeviceSecretService({ store, keys, directory, now }),
    // The context's own options, read at each registration.
    registration: createRegistrationService({ store, keys, directory, webhooks, options, now }),
    tenancy,
    reporting: createDeviceReportingService({
      store,
      commands,
      notifier,
      liveness,
      events,
      webhooks,
      now,
      updateKindOf: (deviceId, updateId) => updates.kindOf(deviceId, updateId),
    }),
    reads: createOperatorReadService({ store, tenancy, liveness, now }),
    operatorCommands: createOperatorCommandService({ store, tenancy, commands, now }),
    maintenance: createMaintenanceService({ store, tenancy, commands, now }),
    diagnostics: createDiagnosticsService({ store, tenancy, commands, now }),
    diagnosticsUploads: createDiagnosticsUploads({
      store,
      now,
      available: (row) => webhooks.diagnosticsAvailable(row),
    }),
    controls: createControlService({ store, commands, tenancy, now, webhooks }),
    artifacts: createArtifactService({
      store,
      now,
      inUse: updates.artifactInUse,
      ...(parts.artifactCache ? { cache: parts.artifactCache } : {}),
    }),
    downloads: createArtifactDownloads({
      store,
      ...(opts.downloadsPerInstance ? { limit: opts.downloadsPerInstance } : {}),
      ...(parts.artifactCache ? { cache: parts.artifactCache } : {}),
      logger: parts.log,
    }),
    updates,
    liveness,
    events,
    webhooks,
    now,
  };
}

/** Health and readiness, the OpenAPI document, the reference page and the dashboard. */
function registerPlumbing(
  app: FastifyInstance,
  opts: BuildOptions,
  instanceId: string,
  routes: readonly AnyRoute[],
  draining: () => boolean,
): void {
  healthRoutes(app, {
    instanceId,
    draining,
    async checks(): Promise<Record<string, boolean>> {
      const storage = answersWithin(() => opts.store.getSetting('environment'));
      if (!opts.redis) return { storage: await storage };
      const redis = opts.redis;
      const [s, r] = await Promise.all([storage, answersWithin(() => redis.check().then(assertTrue))]);
      return { storage: s, redis: r };
    },
  });
  // Built once; `servers` names the origin the client asked (openapi.ts `serversFor`).
  const openapi = openApiDocumentServer(routes, opts.env);
  app.get('/v1/openapi.json', async (request, reply) =>
    reply.type('application/json').send(openapi(request.headers.host)),
  );
  registerApiReference(app);
  registerDashboard(app);
}

function assertTrue(ok: boolean): void {
  if (!ok) throw new Error('not answered');
}
