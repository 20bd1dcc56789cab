import type { FastifyInstance } from 'fastify';
import { API_VERSION } from '../../shared/index.js';

export function healthRoutes(app: FastifyInstance): void {
  // Not enveloped and unauthenticated: for load balancers and `serve` readiness checks.
  app.get('/healthz', async () => ({ status: 'ok', version: API_VERSION }));
}
