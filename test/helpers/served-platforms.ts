import { readFile } from 'node:fs/promises';
import { type ServeProcess, spawnServe, tempDirs } from './cli.js';
import { type HttpClient, httpClient } from './platform.js';

/**
 * The built `charger-platform serve` processes a test file starts, on temporary data directories, and the HTTPS
 * clients it connects to them: `stopAll()` (in afterAll) closes the clients, kills what still runs and removes
 * the directories; `stopServers()` does the first two only (a file that mounts file systems in its directories
 * unmounts them before removing them).
 */
export function servedPlatforms(prefix: string) {
  const dirs = tempDirs(prefix);
  const running: ServeProcess[] = [];
  const clients: HttpClient[] = [];
  const stopServers = async (): Promise<void> => {
    // A client of a killed server may fail to close: it is gone either way.
    await Promise.all(clients.splice(0).map((c) => c.close().catch(() => undefined)));
    for (const s of running) s.kill();
    await Promise.all(running.map((s) => s.exited));
  };
  return {
    dirs,
    async serve(args: string[]): Promise<ServeProcess> {
      const s = await spawnServe(args);
      running.push(s);
      return s;
    },
    /** A client trusting `caPath` (the certificate the process serves, unless given). */
    async connect(s: ServeProcess, caPath = s.certPath): Promise<HttpClient> {
      const http = httpClient(s.url, await readFile(caPath, 'utf8'));
      clients.push(http);
      return http;
    },
    /** Closes a client before the end of the file (its server is about to go). */
    async disconnect(http: HttpClient): Promise<void> {
      const i = clients.indexOf(http);
      if (i >= 0) clients.splice(i, 1);
      await http.close();
    },
    stopServers,
    async stopAll(): Promise<void> {
      await stopServers();
      await dirs.removeAll();
    },
  };
}
