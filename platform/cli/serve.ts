import { join } from 'node:path';
import { ACCESS_TOKEN_TTL_SECONDS } from '../../shared/index.js';
import { createRedisLink, type RedisLink, redactedUrl } from '../coordination/redis-link.js';
import type { RegistrationPolicy } from '../domain/registration.js';
import { ensureSelfSignedCertificate, loadCertificate, type TlsMaterial } from '../http/tls.js';
import { buildPlatform, defaultInstanceId, type Platform } from '../platform.js';
import { ensureSandbox, type SandboxInfo } from '../sandbox/sandbox-seed.js';
import { backendOf, type DatabaseChoice, DEFAULT_DATABASE } from '../storage/backends.js';
import { openStore, PlatformKeyMismatch } from '../storage/open-store.js';
import { loadOrCreatePlatformKeys, PlatformKeyError } from '../storage/platform-keys.js';
import type { RetentionPolicy } from '../storage/retention-policy.js';
import {
  asDataDirError,
  DataDirError,
  dataDirFaultMessage,
  ensureWritableDataDir,
  storageFaultOf,
} from '../storage/storage-faults.js';
import { ConfigError, DEFAULT_METRICS_HOST, DEFAULT_METRICS_PORT } from './serve-settings.js';

export interface ServeOptions {
  dataDir: string;
  /** `--key-file`: the platform key outside the data directory (DESIGN.md §18). */
  keyFile?: string | undefined;
  /** Default: SQLite in the data directory. */
  database?: DatabaseChoice | undefined;
  host: string;
  port: number;
  env: 'production' | 'sandbox';
  tlsCert?: string | undefined;
  tlsKey?: string | undefined;
  selfSigned?: boolean | undefined;
  registration?: RegistrationPolicy | undefined;
  tokenTtl?: number | undefined;
  /** Requests a minute one address may make to the unauthenticated routes; default GUARD_LIMITS'. */
  addressLimit?: number | undefined;
  logLevel?: string | undefined;
  retention?: RetentionPolicy | undefined;
  /** Redis shared by several instances (DESIGN.md §13); needs PostgreSQL. */
  redis?: string | undefined;
  instanceId?: string | undefined;
  /** Browser origins allowed to call the API (CORS), exact; none: CORS off. */
  corsOrigins?: readonly string[] | undefined;
  /** The Prometheus listener (plain HTTP); defaults 127.0.0.1 and 9464; port 0: no listener. */
  metricsHost?: string | undefined;
  metricsPort?: number | undefined;
  /** Webhooks may go to http URLs and non-public addresses (DESIGN.md §14); default: in the sandbox only. */
  webhooksAllowPrivate?: boolean | undefined;
  /** Connections held at once (DESIGN.md §18); default 20,000. */
  maxConnections?: number | undefined;
  /** Every connection starts with a PROXY protocol v2 header (behind HAProxy `send-proxy-v2`). */
  proxyProtocol?: boolean | undefined;
}

export interface RunningPlatform {
  platform: Platform;
  url: string;
  port: number;
  tls: TlsMaterial;
  sandbox?: SandboxInfo | undefined;
  instanceId: string;
  /** The shared Redis (password redacted), when configured. */
  redis?: string | undefined;
  /** `http://HOST:PORT/metrics`, unless `--metrics-port 0` turned the listener off. */
  metricsUrl?: string | undefined;
  close(): Promise<void>;
}

const ENV_SETTING = 'environment';

function keysOrConfigError(opts: ServeOptions) {
  try {
    return loadOrCreatePlatformKeys(opts.dataDir, { keyFile: opts.keyFile });
  } catch (err) {
    throw err instanceof PlatformKeyError ? new ConfigError(err.message) : err;
  }
}

/** Opens the data directory, prepares TLS and (in the sandbox) seed data, and listens. */
export async function startServing(opts: ServeOptions): Promise<RunningPlatform> {
  if (Boolean(opts.tlsCert) !== Boolean(opts.tlsKey))
    throw new ConfigError('--tls-cert and --tls-key go together');
  if (opts.env === 'production' && !opts.tlsCert && !opts.selfSigned) {
    throw new ConfigError(
      'production needs --tls-cert and --tls-key, or --self-signed to create a certificate',
    );
  }
  const database = opts.database ?? DEFAULT_DATABASE;
  const backend = backendOf(database);
  if (opts.redis !== undefined) checkRedisUrl(opts.redis, database);
  // A read-only or unwritable data directory fails here, naming it, before anything is opened.
  ensureWritableDataDir(opts.dataDir);
  const keys = keysOrConfigError(opts);
  const store = await openStore(database, opts.dataDir, keys, {
    server: true,
    ...(opts.retention ? { retention: opts.retention } : {}),
    onCheckpointerFailure: (message) =>
      process.stderr.write(`warning: WAL checkpoints fall back to SQLite's own: ${message}\n`),
    onReaderFailure: (message) =>
      process.stderr.write(`warning: operator reads fall back to the main connection: ${message}\n`),
  }).catch((err: unknown) => {
    if (err instanceof PlatformKeyMismatch) throw new ConfigError(err.message);
    if (!backend.inDataDir && !(err instanceof DataDirError)) {
      throw new ConfigError(
        `cannot use ${backend.describe(database, opts.dataDir)}: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
    throw asDataDirError(opts.dataDir, err);
  });
  let redis: RedisLink | undefined;
  try {
    // Sandbox and production are separate deployments: one data directory never serves both.
    const recorded = await store.getSetting(ENV_SETTING);
    if (recorded && recorded !== opts.env) {
      throw new ConfigError(
        `${backend.describeDeployment(database, opts.dataDir)} belongs to the ${recorded} environment, not ${opts.env}`,
      );
    }
    if (!recorded) await store.setSetting(ENV_SETTING, opts.env);
    // The certificate comes after the environment check, so a refused start writes nothing.
    const tls =
      opts.tlsCert && opts.tlsKey
        ? await loadCertificate(opts.tlsCert, opts.tlsKey)
        : await ensureSelfSignedCertificate(opts.dataDir);
    const sandbox = opts.env === 'sandbox' ? await ensureSandbox(store, keys, Date.now()) : undefined;

    const instanceId = opts.instanceId ?? defaultInstanceId();
    redis = opts.redis ? await connectRedis(opts.redis, instanceId) : undefined;
    const platform = await buildPlatform({
      env: opts.env,
      registration: opts.registration ?? (opts.env === 'sandbox' ? 'open' : 'allowlist'),
      tokenTtlSeconds: opts.tokenTtl ?? ACCESS_TOKEN_TTL_SECONDS,
      defaultSiteId: sandbox?.defaultSiteId,
      store,
      keys,
      tls,
      instanceId,
      artifactCacheDir: join(opts.dataDir, 'artifact-cache'),
      ...(redis ? { redis } : {}),
      ...(opts.corsOrigins?.length ? { corsOrigins: opts.corsOrigins } : {}),
      ...(opts.addressLimit ? { addressLimit: opts.addressLimit } : {}),
      webhooks: { allowPrivate: opts.webhooksAllowPrivate ?? opts.env === 'sandbox' },
      ...(opts.logLevel && opts.logLevel !== 'silent' ? { log: { level: opts.logLevel } } : {}),
      ...(opts.maxConnections ? { connections: { maxConnections: opts.maxConnections } } : {}),
      ...(opts.proxyProtocol ? { proxyProtocol: true } : {}),
    });
    let metricsUrl: string | undefined;
    try {
      await platform.app.listen({ host: opts.host, port: opts.port });
      const metricsPort = opts.metricsPort ?? DEFAULT_METRICS_PORT;
      if (metricsPort !== 0)
        metricsUrl = (await listenForMetrics(platform, opts.metricsHost ?? DEFAULT_METRICS_HOST, metricsPort))
          .url;
    } catch (err) {
      await platform.close().catch(() => undefined);
      throw err;
    }
    const address = platform.app.server.address();
    const port = typeof address === 'object' && address ? address.port : opts.port;
    const host = opts.host.includes(':') ? `[${opts.host}]` : opts.host;
    return {
      platform,
      url: `https://${host}:${port}`,
      port,
      tls,
      sandbox,
      instanceId,
      redis: opts.redis ? redactedUrl(opts.redis) : undefined,
      metricsUrl,
      async close() {
        try {
          await platform.close();
        } catch (err) {
          throw asDataDirError(opts.dataDir, err);
        } finally {
          await redis?.close();
          await store.close();
        }
      },
    };
  } catch (err) {
    await redis?.close();
    await store.close();
    // Only SQLite's faults: an unreadable --tls-cert or a refused port are not the data directory's.
    const fault = storageFaultOf(err);
    if (fault?.postgres)
      throw new ConfigError(
        `cannot use ${backend.describe(database, opts.dataDir)}: ${(err as Error).message}`,
      );
    throw fault ? new DataDirError(dataDirFaultMessage(opts.dataDir, fault), fault) : err;
  }
}

/** The metrics listener, or a ConfigError that says which option to change. */
async function listenForMetrics(platform: Platform, host: string, port: number) {
  try {
    return await platform.serveMetrics(host, port);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why =
      code === 'EADDRINUSE'
        ? 'the port is in use (another instance on this machine needs a --metrics-port of its own)'
        : code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND'
          ? 'no such local address'
          : code === 'EACCES'
            ? 'permission denied'
            : (err as Error).message;
    throw new ConfigError(
      `cannot serve metrics on ${host}:${port} (--metrics-host, --metrics-port; 0 turns them off): ${why}`,
    );
  }
}

/** Several instances share one PostgreSQL database; SQLite is one process's file. */
function checkRedisUrl(url: string, database: DatabaseChoice): void {
  let protocol: string;
  try {
    protocol = new URL(url).protocol;
  } catch {
    throw new ConfigError(`--redis must be a redis:// or rediss:// URL, not ${JSON.stringify(url)}`);
  }
  if (protocol !== 'redis:' && protocol !== 'rediss:')
    throw new ConfigError(`--redis must be a redis:// or rediss:// URL, not ${JSON.stringify(url)}`);
  if (!backendOf(database).shared)
    throw new ConfigError(
      '--redis is for several instances over one PostgreSQL database: add --database postgres://... ' +
        '(SQLite serves one instance, which needs no Redis)',
    );
}

/**
 * Waits up to 2 s for Redis at start. An instance that cannot reach it still serves, on its own state (rate
 * limits and the replay cache per instance, no wake-ups from other instances), and says so; it joins the others
 * as soon as Redis answers.
 */
async function connectRedis(url: string, instanceId: string): Promise<RedisLink> {
  const log = {
    warn: (obj: object, msg: string) => process.stderr.write(`warning: ${msg} ${JSON.stringify(obj)}\n`),
    info: () => undefined,
  };
  const link = createRedisLink(url, instanceId, log);
  const ready = await new Promise<boolean>((resolve) => {
    if (link.available()) return resolve(true);
    const timer = setTimeout(() => resolve(false), 2_000);
    link.client.once('ready', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
  if (!ready)
    process.stderr.write(
      `warning: redis ${redactedUrl(url)} does not answer: serving on this instance's own state until it does\n`,
    );
  return link;
}
