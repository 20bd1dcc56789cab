import type { FastifyInstance } from 'fastify';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { PlatformMetrics } from './context.js';
import type { Store } from './storage/store.js';

/**
 * Prometheus metrics (`GET /metrics`): requests and latencies per route, chargers online and connected,
 * commands by status, stream subscribers and rate-limit refusals. Labels are route patterns, never ids.
 */
export function createMetrics(sources: {
  store: Store;
  onlineChargers: () => number;
  connectedChargers: () => number;
  streamSubscribers: () => number;
}) {
  const registry = new Registry();
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
  let prunedSeen: Record<string, number> = {};
  new Counter({
    name: 'charger_platform_retention_pruned_rows_total',
    help: 'Rows deleted by retention, by kind',
    labelNames: ['kind'] as const,
    registers: [registry],
    collect() {
      const { pruned } = sources.store.maintenanceStats();
      for (const [kind, n] of Object.entries(pruned)) {
        const added = n - (prunedSeen[kind] ?? 0);
        if (added > 0 || prunedSeen[kind] === undefined) this.inc({ kind }, Math.max(0, added));
      }
      prunedSeen = pruned;
    },
  });
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
      app.get('/metrics', async (_request, reply) => {
        reply.header('content-type', registry.contentType);
        return registry.metrics();
      });
    },
  };
}
