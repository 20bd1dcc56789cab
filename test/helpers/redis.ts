import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createConnection, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * A private `redis-server` for one test file (on a free port, nothing persisted), so that the file can stop
 * it, freeze it and start it again without disturbing anyone else's Redis.
 */
export interface TestRedis {
  url: string;
  port: number;
  /** Ends the server (SIGTERM, then SIGKILL); connections see it go away. */
  stop(): Promise<void>;
  /** Starts it again on the same port, empty. */
  restart(): Promise<void>;
  /** SIGSTOP: connections stay open but nothing is answered (commands time out). */
  freeze(): void;
  /** SIGCONT after `freeze`. */
  thaw(): void;
}

/** Servers still running when the worker exits (a failed test, an interrupted run) are killed with it. */
const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

export async function startRedisServer(): Promise<TestRedis> {
  const port = await freePort();
  let child = await spawnServer(port);
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    stop: () => stopServer(child),
    async restart() {
      await stopServer(child);
      child = await spawnServer(port);
    },
    freeze: () => {
      child.kill('SIGSTOP');
    },
    thaw: () => {
      child.kill('SIGCONT');
    },
  };
}

/** A loopback port nothing listens on right now. */
export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  server.close();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

async function spawnServer(port: number): Promise<ChildProcess> {
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', tmpdir()],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  running.add(child);
  // Kept for the error message should it not come up (a port taken in the meantime, say).
  let output = '';
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-2_000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  let failed = false;
  child.once('error', (err) => {
    failed = true;
    output += `\n${err.message}`;
  });
  child.once('exit', () => running.delete(child));

  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    if (failed || child.exitCode !== null || child.signalCode !== null) {
      running.delete(child);
      throw new Error(`redis-server did not start:\n${output}`);
    }
    if (await answersPing(port)) return child;
    await sleep(25);
  }
  await stopServer(child);
  throw new Error(`redis-server did not answer PING on port ${port}:\n${output}`);
}

/** PING over a bare socket: no client library, so no reconnecting or error events to tidy up. */
function answersPing(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    let reply = '';
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.on('error', () => done(false));
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (chunk) => {
      reply += chunk.toString();
      if (reply.includes('\r\n')) done(reply.startsWith('+PONG'));
    });
  });
}

async function stopServer(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  // A frozen server would not act on SIGTERM until continued.
  child.kill('SIGCONT');
  child.kill('SIGTERM');
  const killed = await Promise.race([exited.then(() => true), sleep(5_000).then(() => false)]);
  if (!killed) {
    child.kill('SIGKILL');
    await exited;
  }
}
