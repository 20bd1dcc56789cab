import net from 'node:net';
import tls from 'node:tls';

/** What happened to a connection the test opened by hand: when it closed, and what the server sent. */
export interface Watched {
  /** Resolves when the socket closes: milliseconds since `watch` and everything received. */
  closed: Promise<{ afterMs: number; received: string }>;
  isClosed(): boolean;
}

export function watch(socket: net.Socket): Watched {
  const started = performance.now();
  let received = '';
  let done = false;
  socket.on('data', (chunk: Buffer) => {
    received += chunk.toString('latin1');
  });
  socket.on('error', () => undefined);
  const closed = new Promise<{ afterMs: number; received: string }>((resolve) => {
    socket.once('close', () => {
      done = true;
      resolve({ afterMs: performance.now() - started, received });
    });
  });
  return { closed, isClosed: () => done };
}

/** A TCP connection to the platform's port that never speaks. */
export function tcpConnect(port: number, localAddress?: string): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port, ...(localAddress ? { localAddress } : {}) });
    socket.once('connect', () => resolve(socket));
    socket.once('error', reject);
  });
}

/** A TLS connection (handshake done) to the platform, on a fresh TCP connection or on `socket`. */
export function tlsConnect(
  port: number,
  ca: string,
  opts: { socket?: net.Socket | import('node:stream').Duplex } = {},
): Promise<tls.TLSSocket> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({
      host: '127.0.0.1',
      port,
      ca,
      servername: 'localhost',
      ...(opts.socket ? { socket: opts.socket } : {}),
    });
    socket.once('secureConnect', () => resolve(socket));
    socket.once('error', reject);
    socket.once('close', () => reject(new Error('closed before the TLS handshake completed')));
  });
}

/** Writes one HTTP/1.1 request and resolves with the first complete response (status, headers, body). */
export function exchange(
  socket: net.Socket,
  request: string,
): Promise<{ status: number; headers: Record<string, string>; body: string }> {
  return new Promise((resolve, reject) => {
    let got = '';
    const onData = (chunk: Buffer) => {
      got += chunk.toString('latin1');
      const end = got.indexOf('\r\n\r\n');
      if (end < 0) return;
      const [statusLine, ...lines] = got.slice(0, end).split('\r\n');
      const headers = Object.fromEntries(
        lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]),
      );
      const length = Number(headers['content-length'] ?? 0);
      const body = got.slice(end + 4);
      if (body.length < length) return;
      socket.off('data', onData);
      resolve({ status: Number(statusLine!.split(' ')[1]), headers, body: body.slice(0, length) });
    };
    socket.on('data', onData);
    socket.once('error', reject);
    socket.write(request);
  });
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
