import { readFileSync } from 'node:fs';
import { createServer } from 'node:https';

/**
 * The baseline for the ingest benchmark: a bare node:https server with the platform's certificate, reading each
 * request body and answering what the platform answers to an accepted telemetry POST. Run as its own process:
 *   node bare-server.js CERT KEY  → prints its port
 */
const [certPath, keyPath] = process.argv.slice(2);
const answer = JSON.stringify({ code: 0, message: 'success', data: { accepted: 1 } });
const server = createServer(
  { cert: readFileSync(certPath!), key: readFileSync(keyPath!), minVersion: 'TLSv1.2' },
  (req, res) => {
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
  },
);
server.keepAliveTimeout = 72_000;
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`${typeof address === 'object' && address ? address.port : 0}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
