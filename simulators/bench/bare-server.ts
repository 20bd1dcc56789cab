import { readFileSync } from 'node:fs';
import { createServer } from 'node:https';
import Fastify from 'fastify';

/**
 * The baselines for the ingest benchmarks: a bare server with the platform's certificate, reading each request
 * body, parsing it as JSON and answering what the platform answers to an accepted telemetry POST, and nothing
 * else. Run as its own process:
 *   node bare-server.js CERT KEY [node|fastify]  → prints its port
 * `node` (the default) is node:https alone, the baseline. `fastify` is the same answer from Fastify
 * (logger off, its default JSON parser, one route): the cost of the framework alone, so that a reader can split
 * the platform's figure into what the framework costs and what the platform's own work costs.
 */
const [certPath, keyPath, flavour = 'node'] = process.argv.slice(2);
const answer = JSON.stringify({ code: 0, message: 'success', data: { accepted: 1 } });
const tls = { cert: readFileSync(certPath!), key: readFileSync(keyPath!), minVersion: 'TLSv1.2' as const };

const port = flavour === 'fastify' ? await serveWithFastify() : await serveWithNode();
process.stdout.write(`${port}\n`);

function serveWithNode(): Promise<number> {
  const server = createServer(tls, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      JSON.parse(Buffer.concat(chunks).toString('utf8'));
      res.writeHead(200, {
        'content-type': 'application/json; charset=utf-8',
        'content-length': Buffer.byteLength(answer),
      });
      res.end(answer);
    });
  });
  server.keepAliveTimeout = 72_000;
  process.on('SIGTERM', () => server.close(() => process.exit(0)));
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      resolve(typeof address === 'object' && address ? address.port : 0);
    });
  });
}

async function serveWithFastify(): Promise<number> {
  const app = Fastify({ https: tls, keepAliveTimeout: 72_000, logger: false });
  app.post('/v1/device/telemetry', async (_request, reply) =>
    reply.type('application/json; charset=utf-8').send(answer),
  );
  await app.listen({ port: 0, host: '127.0.0.1' });
  process.on('SIGTERM', () => app.close().then(() => process.exit(0)));
  const address = app.server.address();
  return typeof address === 'object' && address ? address.port : 0;
}
