import { once } from 'node:events';
import { createServer, type ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { Store } from '../storage/store.js';
import type { PlatformMetrics } from './context.js';

/**
 * Prometheus metrics: requests and latencies per route, chargers online and connected, commands by status,
 * stream subscribers and rate-limit refusals. Labels are route patterns, never ids. They are served on a listener
 * of their own (`serveMetrics`, DESIGN.md §15), not on the API port.
 */
/** What an instance shares through Redis, for its metrics (`server.ts`). */
export interface CoordinationStats {
  redisUp: boolean;
  /** Decisions taken locally because Redis did not answer. */
  fallbacks: { rateLimit: number; replay: number };
  relay: { published: number; received: number; failed: number };
}

export function createMetrics(sources: {
  /** Every series carries it, so that one Prometheus scrapes several instances apart. */
  instanceId: string;
  store: Store;
  coordination?: () => CoordinationStats;
  onlineChargers: () => number;
  connectedChargers: () => number;
  streamSubscribers: () => number;
  webhooks?: () => { inFlight: number; outcomes: Record<string, number> };
}) {
  const registry = new Registry();
  registry.setDefaultLabels({ instance: sources.instanceId });
  collectDefaultMetrics({ register: registry, prefix: 'charger_platform_process_' });
  const requests = new Counter({
    name: 'charger_platform_http_requests_total',
    help: 'HTTP requests by route, method and status',
    labelNames: ['route', 'method', 'status'] as const,
    registers: [registry],
  });
  const latency = new Histogram({
    name: 'charger_platform_http_request_duration_seconds',
    help: 'HTTP request latency by route and method',
    labelNames: ['route', 'method'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [registry],
  });
  const refusals = new Counter({
    name: 'charger_platform_rate_limit_refusals_total',
    help: 'Requests refused with 429 by rate-limit class',
    labelNames: ['class'] as const,
    registers: [registry],
  });
  new Gauge({
    name: 'charger_platform_chargers_online',
    help: 'Chargers that made an authenticated request in the last 90 s',
    registers: [registry],
    collect() {
      this.set(sources.onlineChargers());
    },
  });
  new Gauge({
    name: 'charger_platform_chargers_connected',
    help: 'Chargers holding an open command long poll',
    registers: [registry],
    collect() {
      this.set(sources.connectedChargers());
    },
  });
  new Gauge({
    name: 'charger_platform_stream_subscribers',
    help: 'Open telemetry stream connections',
    registers: [registry],
    collect() {
      this.set(sources.streamSubscribers());
    },
  });
  new Gauge({
    name: 'charger_platform_commands',
    help: 'Commands by status',
    labelNames: ['status'] as const,
    registers: [registry],
    async collect() {
      const counts = await sources.store.countCommandsByStatus();
      this.reset();
      for (const [status, n] of Object.entries(counts)) this.set({ status }, n);
    },
  });

  // Upkeep (DESIGN.md §12): what retention deleted, when it last ran, and how far rollups trail ingest.
  cumulativeCounter(
    registry,
    'charger_platform_retention_pruned_rows_total',
    'Rows deleted by retention, by kind',
    'kind',
    () => sources.store.maintenanceStats().pruned,
  );
  new Gauge({
    name: 'charger_platform_retention_passes',
    help: 'Retention passes completed since start',
    registers: [registry],
    collect() {
      this.set(sources.store.maintenanceStats().retentionPasses);
    },
  });
  new Gauge({
    name: 'charger_platform_retention_last_pass_seconds',
    help: 'Duration of the last retention pass',
    registers: [registry],
    collect() {
      this.set((sources.store.maintenanceStats().lastRetentionPassDurationMs ?? 0) / 1000);
    },
  });
  new Gauge({
    name: 'charger_platform_retention_last_pass_timestamp_seconds',
    help: 'When the last retention pass ended (0: none yet)',
    registers: [registry],
    collect() {
      this.set((sources.store.maintenanceStats().lastRetentionPassMs ?? 0) / 1000);
    },
  });
  new Gauge({
    name: 'charger_platform_energy_rollup_lag_rows',
    help: 'Telemetry rows stored but not yet in the energy rollups',
    registers: [registry],
    collect() {
      this.set(sources.store.maintenanceStats().rollupLagRows);
    },
  });

  const webhooks = sources.webhooks;
  if (webhooks) {
    new Gauge({
      name: 'charger_platform_webhook_attempts_in_flight',
      help: 'Webhook delivery attempts this instance is making now',
      registers: [registry],
      collect() {
        this.set(webhooks().inFlight);
      },
    });
    cumulativeCounter(
      registry,
      'charger_platform_webhook_attempts_total',
      'Webhook delivery attempts by outcome (delivered, failed), deliveries given up (gave_up) and endpoints disabled',
      'outcome',
      () => webhooks().outcomes,
    );
  }

  const coordination = sources.coordination;
  if (coordination) {
    new Gauge({
      name: 'charger_platform_redis_up',
      help: 'Whether the shared Redis answers (1) or this instance runs on local state (0)',
      registers: [registry],
      collect() {
        this.set(coordination().redisUp ? 1 : 0);
      },
    });
    cumulativeCounter(
      registry,
      'charger_platform_redis_fallbacks_total',
      'Rate-limit and replay decisions taken on local state because Redis did not answer',
      'kind',
      () => {
        const f = coordination().fallbacks;
        return { rate_limit: f.rateLimit, replay: f.replay };
      },
    );
    cumulativeCounter(
      registry,
      'charger_platform_relay_messages_total',
      'Wake-ups and stream events exchanged with other instances through Redis',
      'direction',
      () => coordination().relay,
    );
  }

  const recorder: PlatformMetrics = {
    rateLimited(rateClass) {
      refusals.inc({ class: rateClass });
    },
  };

  return {
    recorder,
    install(app: FastifyInstance) {
      // Per request: the labelled series are looked up once per route, method and status, not hashed anew.
      const counted = new Map<string, { inc(): void }>();
      const timed = new Map<string, { observe(seconds: number): void }>();
      app.addHook('onResponse', (request, reply, done) => {
        const route = request.routeOptions.url ?? 'unmatched';
        const method = request.method;
        const status = reply.statusCode;
        const routeKey = `${method} ${route}`;
        const countKey = `${routeKey} ${status}`;
        let counter = counted.get(countKey);
        if (!counter) {
          counter = requests.labels(route, method, String(status));
          counted.set(countKey, counter);
        }
        counter.inc();
        let histogram = timed.get(routeKey);
        if (!histogram) {
          histogram = latency.labels(route, method);
          timed.set(routeKey, histogram);
        }
        histogram.observe(reply.elapsedTime / 1000);
        done();
      });
    },
    registry,
  };
}

export interface MetricsListener {
  /** `http://HOST:PORT/metrics` */
  url: string;
  port: number;
  close(): Promise<void>;
}

/**
 * The Prometheus listener (`serve --metrics-host`, `--metrics-port`): plain HTTP, as Prometheus scrapes, meant
 * for a private interface (loopback by default). `GET /metrics` answers the text exposition format; any other
 * path 404, another method on `/metrics` 405. Port 0 picks a free port (the CLI's 0 means no listener at all).
 */
export async function serveMetrics(
  registry: Registry,
  host: string,
  port: number,
  onError: (err: unknown) => void,
): Promise<MetricsListener> {
  const answer = (
    res: ServerResponse,
    status: number,
    text: string,
    headers: Record<string, string> = {},
  ) => {
    res.writeHead(status, {
      ...headers,
      'content-type': 'text/plain; charset=utf-8',
      'content-length': Buffer.byteLength(text),
    });
    res.end(text);
  };
  const server = createServer((req, res) => {
    if ((req.url ?? '/').split('?')[0] !== '/metrics') return answer(res, 404, 'Not found: see /metrics\n');
    if (req.method !== 'GET' && req.method !== 'HEAD')
      return answer(res, 405, 'Method not allowed\n', { allow: 'GET, HEAD' });
    registry.metrics().then(
      (text) => {
        res.writeHead(200, {
          'content-type': registry.contentType,
          'content-length': Buffer.byteLength(text),
        });
        res.end(req.method === 'HEAD' ? undefined : text);
      },
      (err: unknown) => {
        onError(err);
        answer(res, 500, 'Collecting metrics failed\n');
      },
    );
  });
  // A scrape needs no more than this; a client that holds a connection open does not keep the process up.
  server.requestTimeout = 10_000;
  server.headersTimeout = 5_000;
  const listening = once(server, 'listening');
  server.listen({ host, port });
  await listening; // rejects with the 'error' (EADDRINUSE, EACCES, EADDRNOTAVAIL) if it cannot listen
  server.on('error', onError);
  const address = server.address();
  const bound = typeof address === 'object' && address ? address.port : port;
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${bound}/metrics`,
    port: bound,
    async close() {
      const closed = once(server, 'close');
      server.close();
      server.closeAllConnections();
      await closed;
    },
  };
}

/** A Prometheus counter per label value over running totals kept elsewhere: each scrape adds what was added. */
function cumulativeCounter(
  registry: Registry,
  name: string,
  help: string,
  label: string,
  totals: () => Record<string, number>,
): void {
  let seen: Record<string, number> = {};
  new Counter({
    name,
    help,
    labelNames: [label],
    registers: [registry],
    collect() {
      const now = totals();
      for (const [value, n] of Object.entries(now))
        this.inc({ [label]: value }, Math.max(0, n - (seen[value] ?? 0)));
      seen = now;
    },
  });
}
