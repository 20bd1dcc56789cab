import type { ServerResponse } from 'node:http';
import { createServer } from 'node:https';
import type { Socket } from 'node:net';
import type { TokenSource } from '../../agent/link/platform-client.js';
import { ensureSelfSignedCertificate } from '../../platform/http/tls.js';

/**
 * A stand-in for the platform's artifact download (`GET /v1/device/artifacts/{id}`, DESIGN.md §19) on real HTTPS
 * on loopback, as the lead's endpoint answers: 200 whole, 206 for `Range: bytes=N-` with Content-Range, ETag the
 * quoted sha256 and If-Range honoured, 416 past the end, 404 (error envelope) for an unknown artifact, 429 with
 * Retry-After when told to. Faults on demand: cut the connection after some bytes, answer 429 first.
 */
export interface ServedRequest {
  path: string;
  range?: string;
  ifRange?: string;
  status: number;
}

export interface ArtifactServerFaults {
  /** Destroy the connection of the next answer after this many body bytes (once). */
  cutAfterBytes?: number;
  /** Answer the next N requests with 429 and this Retry-After (seconds). */
  rateLimited?: { times: number; retryAfterSeconds: number };
  /** Ignore Range headers and always send the whole file with 200. */
  ignoreRanges?: boolean;
  /** Send this many body bytes of the next answer, then nothing more (the connection stays open; once). */
  stallAfterBytes?: number;
}

export interface ArtifactServer {
  url: string;
  ca: string;
  requests: ServedRequest[];
  faults: ArtifactServerFaults;
  /** Serves `bytes` as artifact `id` with ETag `"sha256"`. */
  serve(id: string, bytes: Buffer, sha256: string): void;
  close(): Promise<void>;
}

export const staticTokens: TokenSource = { token: async () => 'tok', renew: async () => 'tok' };

const envelope = (code: number, message: string) => JSON.stringify({ code, message });

export async function startArtifactServer(dir: string): Promise<ArtifactServer> {
  const tls = await ensureSelfSignedCertificate(dir);
  const files = new Map<string, { bytes: Buffer; sha256: string }>();
  const requests: ServedRequest[] = [];
  const faults: ArtifactServerFaults = {};
  const sockets = new Set<Socket>();

  function answer(path: string, range: string | undefined, ifRange: string | undefined, res: ServerResponse) {
    const record = (status: number) =>
      requests.push({ path, status, ...(range ? { range } : {}), ...(ifRange ? { ifRange } : {}) });
    if (faults.rateLimited && faults.rateLimited.times > 0) {
      faults.rateLimited.times -= 1;
      record(429);
      res.writeHead(429, {
        'content-type': 'application/json',
        'retry-after': String(faults.rateLimited.retryAfterSeconds),
      });
      res.end(envelope(5001, 'Too many requests'));
      return;
    }
    const id = decodeURIComponent(path.replace(/^\/v1\/device\/artifacts\//, ''));
    const file = files.get(id);
    if (!file) {
      record(404);
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(envelope(3001, 'no update for this artifact'));
      return;
    }
    const etag = `"${file.sha256}"`;
    const match = /^bytes=(\d+)-$/.exec(range ?? '');
    const useRange = match && !faults.ignoreRanges && (ifRange === undefined || ifRange === etag);
    let body = file.bytes;
    if (useRange) {
      const from = Number(match[1]);
      if (from >= file.bytes.length) {
        record(416);
        res.writeHead(416, {
          'content-range': `bytes */${file.bytes.length}`,
          'content-type': 'application/json',
        });
        res.end(envelope(1001, 'range not satisfiable'));
        return;
      }
      body = file.bytes.subarray(from);
      record(206);
      res.writeHead(206, {
        'content-type': 'application/octet-stream',
        'content-length': String(body.length),
        'content-range': `bytes ${from}-${file.bytes.length - 1}/${file.bytes.length}`,
        etag,
      });
    } else {
      record(200);
      res.writeHead(200, {
        'content-type': 'application/octet-stream',
        'content-length': String(body.length),
        etag,
      });
    }
    const stall = faults.stallAfterBytes;
    if (stall !== undefined && stall < body.length) {
      faults.stallAfterBytes = undefined;
      res.write(body.subarray(0, stall));
      return;
    }
    const cut = faults.cutAfterBytes;
    if (cut !== undefined && cut < body.length) {
      faults.cutAfterBytes = undefined;
      // A graceful close (FIN), not a reset: a reset may discard bytes the client has not read yet.
      res.write(body.subarray(0, cut), () => setTimeout(() => res.socket?.end(), 20));
      return;
    }
    res.end(body);
  }

  const server = createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
    if (req.headers.authorization !== 'Bearer tok') {
      res.writeHead(401, { 'content-type': 'application/json' });
      res.end(envelope(2001, 'unauthorized'));
      return;
    }
    const ifRange = req.headers['if-range'];
    answer(req.url ?? '', req.headers.range, typeof ifRange === 'string' ? ifRange : undefined, res);
  });
  server.on('secureConnection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `https://127.0.0.1:${port}`,
    ca: tls.cert,
    requests,
    faults,
    serve(id, bytes, sha256) {
      files.set(id, { bytes, sha256 });
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
