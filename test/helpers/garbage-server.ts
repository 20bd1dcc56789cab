import type { IncomingMessage, ServerResponse } from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import type { Json } from './agent-fuzz.js';
import type { Answer, EndpointClass } from './garbage-answers.js';

/**
 * The garbage platform of agent-fuzz.test.ts: a node:https server that answers each request from a script of
 * generated answers (garbage-answers.ts), per endpoint class, and records how long each request stayed open.
 */

/** A trickling answer is cut by the server after this long, whatever the agent does. */
const TRICKLE_CAP_MS = 12_000;

const hugeBodies = new Map<string, Buffer>();
function hugeBody(shape: 'string' | 'array' | 'nested' | 'commands', mib: number): Buffer {
  const key = `${shape}:${mib}`;
  let body = hugeBodies.get(key);
  if (!body) {
    const n = mib * 1024 * 1024;
    if (shape === 'string') body = Buffer.from(`{"code":0,"message":"success","data":"${'x'.repeat(n)}"}`);
    else if (shape === 'array') body = Buffer.from(`[${'1,'.repeat(n / 2)}1]`);
    else if (shape === 'nested') body = Buffer.from(`${'['.repeat(n / 2)}${']'.repeat(n / 2)}`);
    else {
      // Each entry is checked on its own: about 34,000 of them (1 MiB) are plenty, the rest is padding.
      const items = '{"command":"stop","params":{}},'.repeat(Math.floor((1024 * 1024) / 31));
      const pad = ' '.repeat(Math.max(0, n - 1024 * 1024));
      body = Buffer.from(
        `{"code":0,"message":"success","data":{"commands":[${items}null],${pad}"server_time":"${new Date().toISOString()}"}}`,
      );
    }
    hugeBodies.set(key, body);
  }
  return body;
}

export interface Served {
  cls: EndpointClass;
  path: string;
  kind: Answer['t'];
  startedAt: number;
  endedAt?: number;
}

export interface GarbageServer {
  port: number;
  served: Served[];
  setScript(script: Record<EndpointClass, Answer[]>): void;
  /** Wire forms of the real platform's commands that `valid` heartbeat/poll answers carry. */
  setCommands(fetch: () => Promise<Json[]>): void;
  close(): Promise<void>;
}

function classOf(method: string, url: string): EndpointClass {
  if (url === '/v1/device/register') return 'register';
  if (url === '/v1/device/token') return 'token';
  if (url === '/v1/device/heartbeat' || (method === 'GET' && url.startsWith('/v1/device/commands?')))
    return 'commands';
  return 'upload';
}

export async function startGarbageServer(tls: { cert: string; key: string }): Promise<GarbageServer> {
  let script: Record<EndpointClass, Answer[]> = { register: [], token: [], commands: [], upload: [] };
  const next: Record<EndpointClass, number> = { register: 0, token: 0, commands: 0, upload: 0 };
  let commands: () => Promise<Json[]> = async () => [];
  const served: Served[] = [];
  const sockets = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  const later = (fn: () => void, ms: number) => {
    const t = setTimeout(() => {
      timers.delete(t);
      fn();
    }, ms);
    timers.add(t);
  };

  function send(
    res: ServerResponse,
    status: number,
    type: string | null,
    body: string | Buffer,
    retryAfter?: string,
  ) {
    if (res.destroyed) return;
    const headers: Record<string, string | number> = { 'content-length': Buffer.byteLength(body) };
    if (type !== null) headers['content-type'] = type;
    if (retryAfter !== undefined) headers['retry-after'] = retryAfter;
    res.writeHead(status, headers);
    res.end(body);
  }

  async function respond(
    req: IncomingMessage,
    res: ServerResponse,
    cls: EndpointClass,
    a: Answer,
  ): Promise<void> {
    const socket = req.socket;
    switch (a.t) {
      case 'json':
        return send(res, a.status, a.type, JSON.stringify(a.body), a.retryAfter);
      case 'text':
        return send(res, a.status, a.type, a.text);
      case 'bytes':
        return send(res, a.status, a.type, Buffer.from(a.bytes));
      case 'truncated': {
        const full = Buffer.from(JSON.stringify(a.body) ?? '');
        const part = full.subarray(0, Math.floor(full.length * a.keep));
        if (!a.lie) return send(res, a.status, 'application/json', part);
        res.writeHead(a.status, { 'content-type': 'application/json', 'content-length': full.length });
        res.write(part);
        later(() => socket.destroy(), 5);
        return;
      }
      case 'huge':
        return send(res, a.status, 'application/json', hugeBody(a.shape, a.mib));
      case 'hang':
        return; // the agent's timeout (or the switch) closes it
      case 'slow':
        later(() => void respond(req, res, cls, a.answer), a.delayMs);
        return;
      case 'trickle': {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write('{"code":0,"message":"success","data":');
        const started = Date.now();
        const tick = setInterval(() => {
          if (res.destroyed || socket.destroyed || Date.now() - started > TRICKLE_CAP_MS) {
            clearInterval(tick);
            socket.destroy();
          } else res.write(' ');
        }, a.everyMs);
        res.on('close', () => clearInterval(tick));
        return;
      }
      case 'reset':
        if (a.at === 'connect') {
          try {
            socket.resetAndDestroy(); // a TCP RST where the socket allows it
          } catch {
            socket.destroy();
          }
        } else if (a.at === 'head') {
          socket.write('HTTP/1.1 200 OK\r\nContent-Ty');
          later(() => socket.destroy(), 5);
        } else {
          res.writeHead(200, { 'content-type': 'application/json', 'content-length': 4096 });
          res.write('{"code":0,"mess');
          later(() => socket.destroy(), 5);
        }
        return;
      case 'valid': {
        if (cls === 'token') {
          const data = {
            access_token: `garbage-token-${served.length}`,
            token_type: 'Bearer',
            expires_in: a.expiresIn,
          };
          return send(res, 200, 'application/json', JSON.stringify({ code: 0, message: 'success', data }));
        }
        const data = { commands: await commands(), server_time: new Date().toISOString() };
        return send(res, 200, 'application/json', JSON.stringify({ code: 0, message: 'success', data }));
      }
    }
  }

  const server = https.createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
    const url = req.url ?? '/';
    const cls = classOf(req.method ?? 'GET', url);
    const list = script[cls];
    const answer: Answer = list.length > 0 ? list[next[cls]++ % list.length]! : { t: 'hang' };
    const record: Served = { cls, path: url, kind: answer.t, startedAt: Date.now() };
    served.push(record);
    res.on('close', () => {
      record.endedAt = Date.now();
    });
    res.on('error', () => undefined);
    // The request body is read and thrown away, as a platform would.
    req.on('data', () => undefined);
    req.on('error', () => undefined);
    respond(req, res, cls, answer).catch(() => req.socket.destroy());
  });
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
  });
  server.on('tlsClientError', () => undefined);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  return {
    port: typeof address === 'object' && address ? address.port : 0,
    served,
    setScript(s) {
      script = s;
      for (const k of Object.keys(next) as EndpointClass[]) next[k] = 0;
    },
    setCommands(fetch) {
      commands = fetch;
    },
    close() {
      for (const t of timers) clearTimeout(t);
      for (const s of sockets) s.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
