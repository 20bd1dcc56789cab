import type { IncomingMessage } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { FastifyBaseLogger } from 'fastify';
import { type ProxiedClient, parseProxyV2 } from './proxy-protocol.js';

export interface ConnectionGuardOptions {
  /** From the TCP accept to the first request's headers (ms). */
  firstRequestMs: number;
  maxConnections: number;
  /** Every connection starts with a PROXY protocol v2 header, whose client address the requests then carry. */
  proxyProtocol: boolean;
  log: FastifyBaseLogger;
}

export interface ConnectionGuard {
  /** Closes the connections that have not sent a request yet, so that closing the server need not wait for them. */
  dropWaiting(): void;
}

const DROP_WARNING_EVERY_MS = 60_000;

/** A connection between its TCP accept and its first request. */
interface Waiting {
  raw: Socket;
  tls?: TLSSocket;
  client?: ProxiedClient;
  timer: NodeJS.Timeout;
}

/**
 * Bounds the connections of the platform's HTTPS server before HTTP sees them (DESIGN.md §18): at most
 * `maxConnections` at once; a connection that has not sent its first request's headers within `firstRequestMs`
 * (PROXY header, TLS handshake and headers together) is closed; with `proxyProtocol`, the PROXY v2 header is read
 * before TLS starts and the TLS socket reports the client's address (`request.ip`).
 */
export function guardConnections(server: HttpsServer, opts: ConnectionGuardOptions): ConnectionGuard {
  server.maxConnections = opts.maxConnections;
  // Node closes connections past the cap itself; say so, at most once a minute, so an operator can raise it.
  let warnedAt = Number.NEGATIVE_INFINITY;
  server.on('drop', () => {
    if (performance.now() - warnedAt < DROP_WARNING_EVERY_MS) return;
    warnedAt = performance.now();
    opts.log.warn(
      { maxConnections: opts.maxConnections },
      'connection closed on arrival: the instance holds --max-connections already',
    );
  });
  // The TLS server's own listener wraps each TCP socket in TLS; it runs only once the PROXY header is read.
  const startTls = server.listeners('connection') as Array<(socket: Socket) => void>;
  server.removeAllListeners('connection');
  const waiting = new Set<Waiting>();
  // The TLS socket the server builds on a TCP socket has the same peer: that is how the two are matched.
  const byPeer = new Map<string, Waiting>();
  const byTls = new WeakMap<Socket, Waiting>();

  const settle = (w: Waiting, key?: string) => {
    clearTimeout(w.timer);
    waiting.delete(w);
    if (key !== undefined && byPeer.get(key) === w) byPeer.delete(key);
  };

  server.on('connection', (raw: Socket) => {
    const key = peerKey(raw);
    if (key === undefined) {
      raw.destroy();
      return;
    }
    const w: Waiting = {
      raw,
      timer: setTimeout(() => {
        settle(w, key);
        (w.tls ?? raw).destroy();
      }, opts.firstRequestMs),
    };
    waiting.add(w);
    byPeer.set(key, w);
    raw.once('close', () => settle(w, key));
    const handOver = () => {
      for (const listener of startTls) listener.call(server, raw);
    };
    if (!opts.proxyProtocol) {
      handOver();
      return;
    }
    // Until TLS owns the socket, a reset from the peer is this listener's to handle.
    raw.on('error', () => raw.destroy());
    let got: Buffer = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      got = got.length === 0 ? chunk : Buffer.concat([got, chunk]);
      const header = parseProxyV2(got);
      if (header.kind === 'incomplete') return;
      raw.off('data', onData);
      raw.pause();
      if (header.kind === 'invalid') {
        opts.log.debug({ reason: header.reason }, 'connection closed: no valid PROXY protocol v2 header');
        raw.destroy();
        return;
      }
      if (header.kind === 'proxy') w.client = header.client;
      // What followed the header (the TLS ClientHello, when both came in one segment) is TLS's to read.
      const rest = got.subarray(header.length);
      if (rest.length > 0) raw.unshift(rest);
      handOver();
    };
    raw.on('data', onData);
  });

  server.prependListener('secureConnection', (tls: TLSSocket) => {
    const key = peerKey(tls);
    const w = key === undefined ? undefined : byPeer.get(key);
    if (!w || key === undefined) {
      // Not seen at accept (it closed meanwhile): nothing vouches for its address.
      tls.destroy();
      return;
    }
    byPeer.delete(key);
    w.tls = tls;
    byTls.set(tls, w);
    tls.once('close', () => settle(w));
    if (w.client) {
      // What Fastify's `request.ip` and every log of the address read: the client's, not the balancer's.
      Object.defineProperties(tls, {
        remoteAddress: { value: w.client.address, configurable: true },
        remotePort: { value: w.client.port, configurable: true },
        remoteFamily: { value: w.client.family, configurable: true },
      });
      opts.log.debug(
        { client: w.client.address, port: w.client.port },
        'PROXY protocol: connection from client',
      );
    }
  });

  const firstRequest = (req: IncomingMessage) => {
    const w = byTls.get(req.socket);
    if (!w) return;
    byTls.delete(req.socket);
    settle(w);
  };
  server.on('request', firstRequest);
  server.on('upgrade', firstRequest);

  return {
    dropWaiting() {
      for (const w of [...waiting]) {
        settle(w);
        (w.tls ?? w.raw).destroy();
      }
    },
  };
}

function peerKey(socket: Socket): string | undefined {
  const { remoteAddress, remotePort } = socket;
  return remoteAddress === undefined || remotePort === undefined
    ? undefined
    : `${remoteAddress} ${remotePort}`;
}
