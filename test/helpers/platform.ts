import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request as undiciRequest } from 'undici';
import type { RedisLink } from '../../platform/coordination/redis-link.js';
import type { ConnectionLimits } from '../../platform/http/connection-limits.js';
import { buildOpenApiDocument } from '../../platform/http/openapi.js';
import type { RateLimitStore } from '../../platform/http/rate-limit/rate-limiter.js';
import { ensureSelfSignedCertificate } from '../../platform/http/tls.js';
import { buildPlatform, type Platform } from '../../platform/platform.js';
import { openStore } from '../../platform/storage/open-store.js';
import { loadOrCreatePlatformKeys } from '../../platform/storage/platform-keys.js';
import type { Store } from '../../platform/storage/store.js';
import type { Scope } from '../../shared/index.js';
import { databaseForDataDir, TEST_BACKEND } from './backends.js';
import { recordDocument, recordResponse } from './response-log.js';
import { createClientOf } from './sealed-writes.js';

export interface HttpResult {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  // biome-ignore lint/suspicious/noExplicitAny: test bodies are inspected field by field
  body: any;
  text: string;
}

export interface RequestOptions {
  token?: string;
  /** JSON-encoded unless `raw` is given. */
  json?: unknown;
  raw?: string | Buffer;
  contentType?: string;
  headers?: Record<string, string>;
}

/** `localAddress`: the client's source address (127.0.0.2 stands for another client on loopback). */
export function httpClient(baseUrl: string, ca: string, opts: { localAddress?: string } = {}) {
  const dispatcher = new Agent({
    connect: { ca },
    keepAliveTimeout: 1000,
    ...(opts.localAddress ? { localAddress: opts.localAddress } : {}),
  });
  async function call(method: string, path: string, opts: RequestOptions = {}): Promise<HttpResult> {
    const headers: Record<string, string> = { ...opts.headers };
    if (opts.token) headers.authorization = `Bearer ${opts.token}`;
    let body: string | Buffer | undefined;
    if (opts.raw !== undefined) {
      body = opts.raw;
      if (opts.contentType) headers['content-type'] = opts.contentType;
    } else if (opts.json !== undefined) {
      body = JSON.stringify(opts.json);
      headers['content-type'] = opts.contentType ?? 'application/json';
    }
    const res = await undiciRequest(`${baseUrl}${path}`, {
      method: method as 'GET',
      headers,
      body,
      dispatcher,
    });
    const text = await res.body.text();
    // Checked against the OpenAPI document at the end of the run (global-setup.ts).
    recordResponse(method, path, res.statusCode, res.headers['content-type'], text);
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    return { status: res.statusCode, headers: res.headers, body: parsed, text };
  }
  return {
    call,
    get: (path: string, opts?: RequestOptions) => call('GET', path, opts),
    post: (path: string, opts?: RequestOptions) => call('POST', path, opts),
    patch: (path: string, opts?: RequestOptions) => call('PATCH', path, opts),
    delete: (path: string, opts?: RequestOptions) => call('DELETE', path, opts),
    close: () => dispatcher.close(),
  };
}
export type HttpClient = ReturnType<typeof httpClient>;

export interface TestPlatform {
  url: string;
  port: number;
  ca: string;
  dataDir: string;
  store: Store;
  platform: Platform;
  http: HttpClient;
  /** Log lines captured when started with `logLevel`. */
  logs: string[];
  /** Every route Fastify registered (method and URL pattern), for comparing with the OpenAPI document. */
  registeredRoutes: Array<{ method: string; url: string }>;
  /**
   * GET /metrics from the platform's Prometheus listener (plain HTTP on a port of its own, as `serve` runs it),
   * started on a free loopback port at the first call.
   */
  metrics(): Promise<HttpResult>;
  /** Fake clock: move the platform's time forward. */
  advance(ms: number): void;
  /** The platform's clock (wall clock plus every `advance`). */
  now(): number;
  stop(): Promise<void>;
}

/**
 * A real platform over real HTTPS on an ephemeral loopback port, on a fresh data directory: SQLite, or in
 * PostgreSQL runs (`TEST_DATABASE=postgres`) a database of its own beside it.
 */
export async function startTestPlatform(
  opts: {
    /** Capture logs (pino JSON lines) at this level into `logs`. */
    logLevel?: string;
    streamPingMs?: number;
    registration?: 'open' | 'allowlist' | 'attested';
    tokenTtlSeconds?: number;
    defaultSiteId?: string;
    dataDir?: string;
    /** Replaces the in-memory rate-limit counters (a test that must not be throttled passes one that allows all). */
    rateLimitStore?: RateLimitStore;
    /** One of several instances sharing state through this Redis (start them on the same `dataDir`). */
    redis?: RedisLink;
    instanceId?: string;
    /** Browser origins allowed to call the API (`serve --cors-origin`); none: CORS off. */
    corsOrigins?: string[];
    /** Webhook delivery options (a receiver's CA, private addresses allowed for loopback receivers). */
    webhooks?: { allowPrivate?: boolean; ca?: string; pollMs?: number };
    /** Shorter connection time limits, or a connection cap (`serve --max-connections`). */
    connections?: Partial<ConnectionLimits>;
    /** `serve --proxy-protocol`: every connection starts with a PROXY protocol v2 header. */
    proxyProtocol?: boolean;
    /** Artifact downloads served at once (default 64). */
    downloadsPerInstance?: number;
    /** The sweeper's turn (default 1 s) and the update gate's (default 5 s): tests of rollouts shorten both. */
    sweepEveryMs?: number;
    updateGateEveryMs?: number;
  } = {},
): Promise<TestPlatform> {
  const dataDir = opts.dataDir ?? (await mkdtemp(join(tmpdir(), 'cp-test-')));
  const tls = await ensureSelfSignedCertificate(dataDir);
  const keys = loadOrCreatePlatformKeys(dataDir);
  const logs: string[] = [];
  let offset = 0;
  const now = () => Date.now() + offset;
  // As `serve` runs it (on SQLite: WAL checkpoints and reads in worker threads), on the backend of this run.
  const store = await openStore(
    TEST_BACKEND === 'postgres'
      ? { kind: 'postgres', url: await databaseForDataDir(dataDir) }
      : { kind: 'sqlite' },
    dataDir,
    keys,
    { now, server: true },
  );
  const platform = await buildPlatform({
    env: 'production',
    registration: opts.registration ?? 'open',
    tokenTtlSeconds: opts.tokenTtlSeconds ?? 86_400,
    defaultSiteId: opts.defaultSiteId,
    store,
    keys,
    tls,
    now,
    artifactCacheDir: join(dataDir, 'artifact-cache'),
    ...(opts.streamPingMs ? { streamPingMs: opts.streamPingMs } : {}),
    ...(opts.rateLimitStore ? { rateLimitStore: opts.rateLimitStore } : {}),
    ...(opts.redis ? { redis: opts.redis } : {}),
    ...(opts.instanceId ? { instanceId: opts.instanceId } : {}),
    ...(opts.corsOrigins ? { corsOrigins: opts.corsOrigins } : {}),
    ...(opts.webhooks ? { webhooks: opts.webhooks } : {}),
    ...(opts.connections ? { connections: opts.connections } : {}),
    ...(opts.proxyProtocol ? { proxyProtocol: true } : {}),
    ...(opts.downloadsPerInstance ? { downloadsPerInstance: opts.downloadsPerInstance } : {}),
    sweepEveryMs: opts.sweepEveryMs,
    updateGateEveryMs: opts.updateGateEveryMs,
    ...(opts.logLevel
      ? { log: { level: opts.logLevel, stream: { write: (line: string) => void logs.push(line) } } }
      : {}),
  });
  recordDocument(() => buildOpenApiDocument(platform.routes, 'production'));
  await platform.app.listen({ host: '127.0.0.1', port: 0 });
  const address = platform.app.server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  const url = `https://127.0.0.1:${port}`;
  const http = httpClient(url, tls.cert);
  let metricsListener: Promise<{ url: string }> | undefined;
  return {
    url,
    port,
    ca: tls.cert,
    dataDir,
    store,
    platform,
    http,
    registeredRoutes: [...platform.registeredRoutes],
    async metrics() {
      metricsListener ??= platform.serveMetrics('127.0.0.1', 0);
      const res = await undiciRequest((await metricsListener).url);
      const text = await res.body.text();
      return { status: res.statusCode, headers: res.headers, body: undefined, text };
    },
    logs,
    advance(ms) {
      offset += ms;
    },
    now,
    async stop() {
      await http.close();
      await platform.close();
      await store.close();
      if (!opts.dataDir) await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/** An operator with one site, and a client on it. */
export async function createTenant(
  tp: TestPlatform,
  name: string,
  scopes: Scope[] = ['read', 'write'],
): Promise<{ operatorId: string; siteId: string; clientId: string; clientSecret: string; token: string }> {
  const op = await tp.store.createOperator(name);
  const site = await tp.store.createSite({
    operator_id: op.operator_id,
    name: `${name} site`,
    timezone: 'Europe/Berlin',
  });
  const { client, secret } = await createClientOf(tp, { operator_ids: [op.operator_id], scopes });
  const token = await operatorToken(tp.http, client.client_id, secret);
  return {
    operatorId: op.operator_id,
    siteId: site.site_id,
    clientId: client.client_id,
    clientSecret: secret,
    token,
  };
}

export async function operatorToken(
  http: HttpClient,
  clientId: string,
  clientSecret: string,
): Promise<string> {
  const res = await http.post('/v1/operator/oauth/token', {
    json: { client_id: clientId, client_secret: clientSecret, grant_type: 'client_credentials' },
  });
  if (res.status !== 200) throw new Error(`token: ${res.status} ${res.text}`);
  return res.body.access_token as string;
}

export interface RegisteredDevice {
  deviceId: string;
  secret: string;
  token: string;
}

/** Registers a charger over the API, puts it in `siteId` and exchanges its secret for a token. */
export async function registerDevice(
  tp: TestPlatform,
  sn: string,
  siteId: string | undefined,
  connectors = [
    { connector_id: 1, max_power_kw: 22, v2g_capable: false },
    { connector_id: 2, max_power_kw: 50, v2g_capable: true },
  ],
): Promise<RegisteredDevice> {
  const reg = await tp.http.post('/v1/device/register', {
    // agent_version: a charger running charger-agent (agent updates skip chargers that report none).
    json: {
      sn,
      model: 'Test AC',
      manufacturer: 'Acme',
      firmware_version: '1.0.0',
      agent_version: '1.0.0',
      connectors,
    },
  });
  if (reg.status !== 200) throw new Error(`register: ${reg.status} ${reg.text}`);
  const { device_id, device_secret } = reg.body.data;
  if (siteId) {
    await tp.store.assignDevice(device_id, siteId);
    // As the platform does when it changes a device itself: its directory (which the stream's tenancy reads)
    // knows the site now, not at its next poll for changes made outside it.
    await tp.platform.context.directory.refreshDevice(device_id);
  }
  const tok = await tp.http.post('/v1/device/token', {
    json: { device_id, device_secret, grant_type: 'client_credentials' },
  });
  if (tok.status !== 200) throw new Error(`device token: ${tok.status} ${tok.text}`);
  return { deviceId: device_id, secret: device_secret, token: tok.body.data.access_token };
}

/** Asserts the spec's ErrorResponse shape and returns it. */
export function expectError(res: HttpResult, status: number, code: number): HttpResult['body'] {
  if (res.status !== status || res.body?.code !== code || typeof res.body?.message !== 'string') {
    throw new Error(`expected ${status}/${code}, got ${res.status} ${res.text}`);
  }
  return res.body;
}
