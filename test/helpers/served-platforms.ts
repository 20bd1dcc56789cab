import { readFile } from 'node:fs/promises';
import { type ServeProcess, spawnServe, tempDirs } from './cli.js';
import { type HttpClient, httpClient } from './platform.js';

/**
 * The built `charger-platform serve` processes a test file starts, on temporary data directories, and the HTTPS
 * clients it connects to them: `stopAll()` (in afterAll) closes the clients, kills what still runs and removes
 * the directories.
 */
export function servedPlatforms(prefix: string) {
  const dirs = tempDirs(prefix);
  const running: ServeProcess[] = [];
  const clients: HttpClient[] = [];
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
    async stopAll(): Promise<void> {
      await Promise.all(clients.map((c) => c.close()));
      for (const s of running) s.kill();
      await Promise.all(running.map((s) => s.exited));
      await dirs.removeAll();
    },
  };
}
