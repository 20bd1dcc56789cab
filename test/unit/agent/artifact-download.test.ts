import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Clock } from '../../../agent/clock.js';
import { createPlatformClient, type PlatformClient } from '../../../agent/link/platform-client.js';
import {
  artifactFiles,
  DISK_MARGIN_BYTES,
  type DownloadRequest,
  downloadArtifact,
} from '../../../agent/updates/artifact-download.js';
import { tempDir } from '../../helpers/agent.js';
import { type ArtifactServer, startArtifactServer, staticTokens } from '../../helpers/artifact-server.js';

const SIZE = 256 * 1024;

/** Real time, but every wait is recorded and fires at once: the test sees what the downloader asked to wait. */
function recordingClock(): Clock & { waits: number[] } {
  const waits: number[] = [];
  return {
    waits,
    now: () => Date.now(),
    setTimeout: (callback, ms) => {
      waits.push(ms);
      return setTimeout(callback, 0);
    },
    clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
  };
}

describe('artifact download over HTTPS', () => {
  let tmp: ReturnType<typeof tempDir>;
  let server: ArtifactServer;
  let client: PlatformClient;
  let bytes: Buffer;
  let sha256: string;
  let dir: string;
  let clock: ReturnType<typeof recordingClock>;
  let progress: number[];

  beforeEach(async () => {
    tmp = tempDir('artifact-download-');
    server = await startArtifactServer(tmp.dir);
    client = createPlatformClient({ baseUrl: server.url, ca: server.ca, timeoutMs: 5_000 });
    bytes = randomBytes(SIZE);
    sha256 = createHash('sha256').update(bytes).digest('hex');
    server.serve('art-1', bytes, sha256);
    dir = join(tmp.dir, 'updates');
    clock = recordingClock();
    progress = [];
  });
  afterEach(async () => {
    await client.close();
    await server.close();
    tmp.remove();
  });

  const request = (extra: Partial<DownloadRequest> = {}): DownloadRequest => {
    const api = client.withTokens(staticTokens);
    return {
      dir,
      artifactId: 'art-1',
      size: SIZE,
      sha256,
      source: (id, r) => api.downloadArtifact(id, r),
      clock,
      random: () => 0,
      freeSpace: async () => 10 * 1024 * 1024 * 1024,
      onProgress: (p) => progress.push(p),
      ...extra,
    };
  };

  it('downloads the whole file, renames the part file, and reports progress in 10 % steps', async () => {
    const result = await downloadArtifact(request());
    const { file, part } = artifactFiles(dir, 'art-1');
    expect(result).toEqual({ ok: true, file });
    expect(readFileSync(file).equals(bytes)).toBe(true);
    expect(existsSync(part)).toBe(false);
    expect(progress).toEqual([10, 20, 30, 40, 50, 60, 70, 80, 90]);
    expect(server.requests.map((r) => r.status)).toEqual([200]);
  });

  it('resumes with Range and If-Range after the connection is cut halfway (206)', async () => {
    server.faults.cutAfterBytes = SIZE / 2;
    const result = await downloadArtifact(request());
    expect(result.ok).toBe(true);
    expect(readFileSync(artifactFiles(dir, 'art-1').file).equals(bytes)).toBe(true);
    expect(server.requests).toHaveLength(2);
    const resumed = server.requests[1]!;
    expect(resumed.status).toBe(206);
    expect(resumed.ifRange).toBe(`"${sha256}"`);
    const from = Number(/bytes=(\d+)-/.exec(resumed.range ?? '')?.[1]);
    expect(from).toBeGreaterThan(0);
    expect(from).toBeLessThanOrEqual(SIZE / 2);
    // Each step once, though the download came in two answers.
    expect(progress).toEqual([10, 20, 30, 40, 50, 60, 70, 80, 90]);
  });

  it('resumes a part file left by an earlier run (a restart) without fetching its bytes again', async () => {
    const { part } = artifactFiles(dir, 'art-1');
    mkdirSync(dir, { recursive: true });
    writeFileSync(part, bytes.subarray(0, 100_000));
    const result = await downloadArtifact(request({ reported: 30 }));
    expect(result.ok).toBe(true);
    expect(server.requests.map((r) => [r.status, r.range])).toEqual([[206, 'bytes=100000-']]);
    expect(progress).toEqual([40, 50, 60, 70, 80, 90]);
  });

  it('starts over when a range request is answered 200 (the file changed, or no ranges)', async () => {
    server.faults.ignoreRanges = true;
    mkdirSync(dir, { recursive: true });
    writeFileSync(artifactFiles(dir, 'art-1').part, Buffer.alloc(5000, 7)); // not the file's first bytes
    const result = await downloadArtifact(request());
    expect(result.ok).toBe(true);
    expect(readFileSync(artifactFiles(dir, 'art-1').file).equals(bytes)).toBe(true);
    expect(server.requests.map((r) => r.status)).toEqual([200]);
  });

  it('refuses to start without room on the disk for the rest plus the margin', async () => {
    const result = await downloadArtifact(request({ freeSpace: async () => 1000 }));
    expect(result).toEqual({
      ok: false,
      kind: 'failed',
      reason: `not enough disk: need ${SIZE + DISK_MARGIN_BYTES} bytes, have 1000`,
    });
    expect(server.requests).toEqual([]);
  });

  it('waits the Retry-After of a 429 (with jitter) and then downloads', async () => {
    server.faults.rateLimited = { times: 2, retryAfterSeconds: 7 };
    const result = await downloadArtifact(request({ random: () => 0.5 }));
    expect(result.ok).toBe(true);
    expect(clock.waits).toEqual([7_500, 7_500]);
    expect(server.requests.map((r) => r.status)).toEqual([429, 429, 200]);
  });

  it('fails on a 404 (no update for this artifact) and leaves no part file', async () => {
    const result = await downloadArtifact(request({ artifactId: 'art-unknown' }));
    expect(result.ok).toBe(false);
    expect(result.ok ? '' : result.reason).toMatch(/no such artifact/);
    expect(existsSync(artifactFiles(dir, 'art-unknown').part)).toBe(false);
  });

  it('fails when the platform sends more bytes than the manifest says', async () => {
    const result = await downloadArtifact(request({ size: SIZE - 10 }));
    expect(result).toMatchObject({
      ok: false,
      kind: 'size_mismatch',
      reason: expect.stringMatching(/manifest says/),
    });
    expect(existsSync(artifactFiles(dir, 'art-1').part)).toBe(false);
  });

  it('stops when aborted and keeps the part file for the next start', async () => {
    const controller = new AbortController();
    const result = await downloadArtifact(
      request({
        signal: controller.signal,
        onProgress: (p) => {
          if (p === 30) controller.abort();
        },
      }),
    );
    expect(result).toMatchObject({ ok: false, kind: 'aborted' });
    expect(existsSync(artifactFiles(dir, 'art-1').part)).toBe(true);
  });

  it('renews a refused token once and downloads with the new one', async () => {
    let renewals = 0;
    const api = client.withTokens({
      token: async () => 'stale',
      renew: async () => {
        renewals += 1;
        return 'tok';
      },
    });
    const result = await downloadArtifact(request({ source: (id, r) => api.downloadArtifact(id, r) }));
    expect(result.ok).toBe(true);
    expect(renewals).toBe(1);
  });
});
