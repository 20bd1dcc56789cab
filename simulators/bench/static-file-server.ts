import { createReadStream, readFileSync, statSync } from 'node:fs';
import { createServer } from 'node:https';

/**
 * The baseline of the update download benchmark (bench:updates): one file served by node:https alone, with the
 * platform's certificate, the way a static web server would (a read stream per request, the OS page cache
 * behind it), and nothing else: no authentication, no database, no range support. Its own process:
 *   node static-file-server.js CERT KEY FILE  → prints its port
 */
const [certPath, keyPath, filePath] = process.argv.slice(2) as [string, string, string];
const size = statSync(filePath).size;
const server = createServer(
  { cert: readFileSync(certPath), key: readFileSync(keyPath), minVersion: 'TLSv1.2' },
  (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': size });
    createReadStream(filePath).pipe(res);
  },
);
server.keepAliveTimeout = 72_000;
process.on('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`${typeof address === 'object' && address ? address.port : 0}\n`);
});
