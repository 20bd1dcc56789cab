import type { FastifyRequest } from 'fastify';

/** A download request's `Range` and `If-Range` (services/chunked-download.ts decides what they ask for). */
export function rangeRequest(request: FastifyRequest): { range?: string; ifRange?: string } {
  const { range, 'if-range': ifRange } = request.headers;
  return {
    ...(typeof range === 'string' ? { range } : {}),
    ...(typeof ifRange === 'string' ? { ifRange } : {}),
  };
}
