import type { ServerResponse } from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import type { Json } from './agent-fuzz.js';

/** The well-behaved fake platform of agent-fuzz-commands.test.ts, delivering the commands it is given. */

export interface FakePlatform {
  url: string;
  /** Status reports received, by command id, in order. */
  reports: Map<string, Array<{ status: string; reason?: string }>>;
  deliver(entries: Json[]): void;
  pending(): number;
  close(): Promise<void>;
}

/** A platform that answers every agent request validly and hands out `deliver`ed entries 1–3 at a time. */
export async function startFakePlatform(tls: { cert: string; key: string }): Promise<FakePlatform> {
  const queue: Json[] = [];
  const reports = new Map<string, Array<{ status: string; reason?: string }>>();
  const sockets = new Set<Socket>();
  let turn = 0;
  const ok = (res: ServerResponse, data: unknown) => {
    const body = JSON.stringify({ code: 0, message: 'success', data });
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  };
  const batch = () => queue.splice(0, 1 + (turn++ % 3));
  const server = https.createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = req.url ?? '/';
      let body: Json;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8') || 'null');
      } catch {
        body = null;
      }
      const status = /^\/v1\/device\/commands\/([^/]+)\/status$/.exec(url);
      if (url === '/v1/device/register')
        return ok(res, { device_id: 'dev_fuzz_b', device_secret: 'fake-secret', expires_in: 86_400 });
      if (url === '/v1/device/token')
        return ok(res, { access_token: 'fake-token', token_type: 'Bearer', expires_in: 86_400 });
      if (url === '/v1/device/heartbeat')
        return ok(res, { commands: batch(), server_time: new Date().toISOString() });
      if (url.startsWith('/v1/device/commands?')) {
        const answer = () => ok(res, { commands: batch(), server_time: new Date().toISOString() });
        if (queue.length > 0) return answer();
        setTimeout(answer, 200);
        return;
      }
      if (status) {
        const cid = decodeURIComponent(status[1]!);
        const list = reports.get(cid) ?? [];
        list.push({ status: body?.status, ...(body?.reason !== undefined ? { reason: body.reason } : {}) });
        reports.set(cid, list);
        return ok(res, { command_id: cid, status: body?.status, changed: true });
      }
      if (url === '/v1/device/telemetry') return ok(res, { accepted: 1 });
      const n = Array.isArray(body?.records)
        ? body.records.length
        : Array.isArray(body?.events)
          ? body.events.length
          : 0;
      return ok(res, { accepted: n, duplicates: 0 });
    });
  });
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    url: `https://127.0.0.1:${port}`,
    reports,
    deliver: (entries) => queue.push(...entries),
    pending: () => queue.length,
    close() {
      for (const s of sockets) s.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
