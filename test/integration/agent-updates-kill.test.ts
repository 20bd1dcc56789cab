import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { tempDir, waitFor } from '../helpers/agent.js';
import { type ArtifactServer, startArtifactServer } from '../helpers/artifact-server.js';
import { REPO_ROOT } from '../helpers/cli.js';

/**
 * The BUILT downloader (`dist/`, so `npx tsc -p tsconfig.build.json` first) in a real process, killed with SIGKILL
 * in the middle of a download, then run again: the second run resumes from the part file the first one left
 * (`Range: bytes=N-`, answered 206), and the file is whole and right. DESIGN.md §19: "resuming with Range after a
 * cut or a reboot".
 */
const DIST = path.join(REPO_ROOT, 'dist', 'agent');
const SIZE = 2 * 1024 * 1024;

/** One download in a process of its own: the platform client and downloadArtifact, as the agent uses them. */
const CHILD = `
const { createPlatformClient } = await import(process.env.DIST + '/link/platform-client.js');
const { downloadArtifact } = await import(process.env.DIST + '/updates/artifact-download.js');
const { systemClock } = await import(process.env.DIST + '/clock.js');
const client = createPlatformClient({ baseUrl: process.env.URL, ca: process.env.CA, timeoutMs: 60_000 });
const api = client.withTokens({ token: async () => 'tok', renew: async () => 'tok' });
const result = await downloadArtifact({
  dir: process.env.DIR, artifactId: 'art-1', size: Number(process.env.SIZE), sha256: process.env.SHA,
  source: (id, r) => api.downloadArtifact(id, r), clock: systemClock,
});
await client.close();
process.stdout.write(JSON.stringify(result));
`;

function runDownload(env: Record<string, string>) {
  const child = spawn(process.execPath, ['--input-type=module', '-e', CHILD], {
    env: { ...process.env, ...env, DIST },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (c: string) => {
    stdout += c;
  });
  child.stderr.setEncoding('utf8').on('data', (c: string) => {
    stderr += c;
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('close', (code, signal) => resolve({ code, signal })),
  );
  return { child, exited, stdout: () => stdout, stderr: () => stderr };
}

describe('artifact download killed and restarted (real processes)', () => {
  let tmp: ReturnType<typeof tempDir>;
  let server: ArtifactServer;
  beforeEach(async () => {
    tmp = tempDir('update-kill-');
    server = await startArtifactServer(tmp.dir);
  });
  afterEach(async () => {
    await server.close();
    tmp.remove();
  });

  it('resumes with a 206 from the part file a SIGKILLed run left', async () => {
    expect(existsSync(path.join(DIST, 'updates', 'artifact-download.js'))).toBe(true);
    const bytes = randomBytes(SIZE);
    const sha = createHash('sha256').update(bytes).digest('hex');
    server.serve('art-1', bytes, sha);
    const dir = path.join(tmp.dir, 'updates');
    const part = path.join(dir, 'art-1.part');
    const env = { URL: server.url, CA: server.ca, DIR: dir, SIZE: String(SIZE), SHA: sha };

    server.faults.stallAfterBytes = 1024 * 1024 + 123;
    const first = runDownload(env);
    await waitFor(
      () => (existsSync(part) ? statSync(part).size : 0),
      (n) => n === 1024 * 1024 + 123,
      20_000,
    );
    first.child.kill('SIGKILL');
    expect((await first.exited).signal).toBe('SIGKILL');

    const second = runDownload(env);
    const done = await second.exited;
    expect(done.code, second.stderr()).toBe(0);
    expect(JSON.parse(second.stdout())).toEqual({ ok: true, file: path.join(dir, 'art-1') });
    expect(readFileSync(path.join(dir, 'art-1')).equals(bytes)).toBe(true);
    expect(existsSync(part)).toBe(false);
    expect(server.requests.map((r) => [r.status, r.range, r.ifRange])).toEqual([
      [200, undefined, undefined],
      [206, `bytes=${1024 * 1024 + 123}-`, `"${sha}"`],
    ]);
  });
});
