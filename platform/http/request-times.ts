import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import { type ConnectionLimits, connectionsCheckingMs } from './connection-limits.js';

/**
 * Requests whose body may take longer than `requestMs` (DESIGN.md §19: an artifact of up to 512 MiB): the whole
 * body within `uploadMs`, and never `requestMs` without a byte. Method and path, the query aside.
 */
export const LONG_UPLOADS: ReadonlyArray<{ method: string; path: string }> = [
  { method: 'POST', path: '/v1/operator/artifacts' },
];

interface Pending {
  req: IncomingMessage;
  res: ServerResponse;
  startedMs: number;
  /** Long uploads only: the socket's bytes read, and when that last grew. */
  long?: { bytesRead: number; progressMs: number };
}

/**
 * A request's body must have arrived within `requestMs` of its headers (DESIGN.md §18), or a long upload's within
 * `uploadMs` with no pause of `requestMs`. Node's own `requestTimeout` is one value for every request, so it is
 * off and this checks instead, as often as Node would (a tenth of the limit, at most a second): a request whose
 * body is late gets the same 408 as Node sends (the server's `clientError` path) and its connection is closed.
 * Headers keep Node's `headersTimeout`.
 */
export function limitRequestTimes(
  server: HttpsServer,
  limits: Pick<ConnectionLimits, 'requestMs' | 'uploadMs'>,
): { close(): void } {
  const pending = new Set<Pending>();
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    // A request without a body (most GETs) is complete as soon as its headers are: nothing to time.
    if (req.complete || !hasBody(req)) return;
    const p: Pending = { req, res, startedMs: performance.now() };
    if (isLongUpload(req)) p.long = { bytesRead: req.socket.bytesRead, progressMs: p.startedMs };
    pending.add(p);
  });
  const check = () => {
    const nowMs = performance.now();
    for (const p of pending) {
      if (p.req.complete || p.req.destroyed || p.res.writableEnded) {
        pending.delete(p);
        continue;
      }
      if (!late(p, nowMs, limits)) continue;
      pending.delete(p);
      const err = Object.assign(new Error('Request timeout'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' });
      server.emit('clientError', err, p.req.socket);
    }
  };
  const timer = setInterval(check, connectionsCheckingMs(limits));
  timer.unref();
  return {
    close() {
      clearInterval(timer);
      pending.clear();
    },
  };
}

function late(p: Pending, nowMs: number, limits: Pick<ConnectionLimits, 'requestMs' | 'uploadMs'>): boolean {
  if (!p.long) return nowMs - p.startedMs > limits.requestMs;
  const read = p.req.socket.bytesRead;
  if (read > p.long.bytesRead) {
    p.long.bytesRead = read;
    p.long.progressMs = nowMs;
  }
  return nowMs - p.startedMs > limits.uploadMs || nowMs - p.long.progressMs > limits.requestMs;
}

function isLongUpload(req: IncomingMessage): boolean {
  const url = req.url ?? '';
  const q = url.indexOf('?');
  const path = q === -1 ? url : url.slice(0, q);
  return LONG_UPLOADS.some((u) => u.method === req.method && u.path === path);
}

function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}
