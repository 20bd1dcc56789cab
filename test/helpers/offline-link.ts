import net from 'node:net';
import { Agent, type Dispatcher } from 'undici';

/**
 * The agents' link to a platform that goes away and comes back (agent-30-days-offline.test.ts): a connection
 * pool that records every exchange, and the platform's address as a gate in front of it.
 */

/** One HTTP exchange the agent completed (an answer arrived), as its dispatcher saw it. */
export interface Exchange {
  method: string;
  path: string;
  body: unknown;
  status: number;
  answer: unknown;
}

/** The agent's connection pool to the platform, recording every exchange that got an answer. */
export function recordingDispatcher(
  ca: string,
  log: Exchange[],
): { dispatcher: Dispatcher; close(): Promise<void> } {
  const base = new Agent({ connect: { ca } });
  const dispatcher = base.compose((dispatch) => (options, handler) => {
    let status = 0;
    const chunks: Buffer[] = [];
    const body = typeof options.body === 'string' ? (JSON.parse(options.body) as unknown) : undefined;
    const recorder: Dispatcher.DispatchHandler = {
      onRequestStart: (controller, context) => handler.onRequestStart?.(controller, context),
      onRequestUpgrade: (controller, statusCode, headers, socket) =>
        handler.onRequestUpgrade?.(controller, statusCode, headers, socket),
      onResponseStart: (controller, statusCode, headers, statusMessage) => {
        status = statusCode;
        handler.onResponseStart?.(controller, statusCode, headers, statusMessage);
      },
      onResponseData: (controller, chunk) => {
        chunks.push(chunk);
        handler.onResponseData?.(controller, chunk);
      },
      onResponseEnd: (controller, trailers) => {
        let answer: unknown;
        try {
          answer = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        } catch {
          answer = undefined;
        }
        log.push({ method: options.method, path: options.path, body, status, answer });
        handler.onResponseEnd?.(controller, trailers);
      },
      onResponseError: (controller, error) => handler.onResponseError?.(controller, error),
    };
    return dispatch(options, recorder);
  });
  return { dispatcher, close: () => base.close() };
}

/**
 * The platform's address, in front of a platform that restarts on another port: forwards to it, or — with no
 * platform — takes each connection and hangs up after `hangupMs` of real time, as a balancer with no backend
 * does. The agents' loops therefore retry at a real-time pace (about ten attempts a second) while their own time
 * runs at thousands of times that speed: a month of retries at the agent's pace would be hundreds of
 * thousands of TLS handshakes.
 */
export interface Gate {
  port: number;
  setTarget(port: number | undefined): void;
  cut(): void;
  close(): Promise<void>;
}

export async function startGate(targetPort: number | undefined, hangupMs = 100): Promise<Gate> {
  let target = targetPort;
  const sockets = new Set<net.Socket>();
  const track = (socket: net.Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
  };
  const server = net.createServer((client) => {
    track(client);
    if (target === undefined) {
      setTimeout(() => client.destroy(), hangupMs).unref();
      return;
    }
    const upstream = net.connect(target, '127.0.0.1');
    track(upstream);
    upstream.on('close', () => client.destroy());
    client.on('close', () => upstream.destroy());
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const cut = () => {
    for (const socket of sockets) socket.destroy();
    sockets.clear();
  };
  return {
    port: typeof address === 'object' && address ? address.port : 0,
    setTarget(port) {
      target = port;
    },
    cut,
    close() {
      cut();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
