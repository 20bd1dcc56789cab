import type { FastifyInstance } from 'fastify';
import { API_VERSION } from '../../../shared/index.js';

/** What readiness checks: each dependency answers `ok` or not. */
export interface Readiness {
  instanceId: string;
  /** True once shutdown began: the balancer should stop sending requests here. */
  draining(): boolean;
  checks(): Promise<Record<string, boolean>>;
}

/**
 * Not enveloped and unauthenticated: for load balancers and `serve` readiness checks (DESIGN.md §13).
 * `/healthz` says the process serves; `/readyz` says its storage (and Redis, when configured) answer.
 */
export function healthRoutes(app: FastifyInstance, readiness: Readiness): void {
  app.get('/healthz', async () => ({ status: 'ok', version: API_VERSION, instance: readiness.instanceId }));
  app.get('/readyz', async (_request, reply) => {
    const results = await readiness.checks();
    const checks = Object.fromEntries(
      Object.entries(results).map(([name, ok]) => [name, ok ? 'ok' : 'unreachable']),
    );
    const draining = readiness.draining();
    const ready = !draining && Object.values(results).every(Boolean);
    reply.code(ready ? 200 : 503);
    return {
      status: ready ? 'ready' : draining ? 'draining' : 'not_ready',
      version: API_VERSION,
      instance: readiness.instanceId,
      checks,
    };
  });
}

/** Resolves `false` instead of waiting longer than `ms` or rejecting. */
export function answersWithin(check: () => Promise<unknown>, ms = 1_000): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    check().then(
      () => {
        clearTimeout(timer);
        resolve(true);
      },
      () => {
        clearTimeout(timer);
        resolve(false);
      },
    );
  });
}
