import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../../agent/clock.js';
import type { CommandReport } from '../../../agent/core/outbox-payloads.js';
import type { DeviceApi, DiagnosticsPart } from '../../../agent/link/platform-client.js';
import { PlatformError } from '../../../agent/link/platform-errors.js';
import { createDiagnosticsJobs } from '../../../agent/runtime/diagnostics-job.js';
import { type AgentStore, openAgentStore } from '../../../agent/store/agent-store.js';
import type { DiagnosticsUploadState } from '../../../shared/diagnostics.js';
import { quietLogger, tempDir } from '../../helpers/agent.js';

/**
 * The diagnostics job (agent/runtime/diagnostics-job.ts) with a real store and a real archive, against a scripted
 * platform: where each upload starts, what it sends, when it retries and what the command reports.
 */

type Answer = DiagnosticsUploadState | Error;
/** Scripted answers see the archive's size (known from the first upload) as `size`. */
type Scripted = (size: number) => Answer;
const ID = 'diag_1';
const params = {
  diagnostics_id: ID,
  start_time: new Date(Date.now() - 3_600_000).toISOString(),
  end_time: new Date().toISOString(),
  max_bytes: 1_000_000,
};
const state = (over: Partial<DiagnosticsUploadState>): DiagnosticsUploadState => ({
  diagnostics_id: ID,
  status: 'requested',
  received: 0,
  size: null,
  ...over,
});

async function bytesOf(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

describe('diagnostics job', () => {
  let tmp: ReturnType<typeof tempDir>;
  let store: AgentStore;
  beforeEach(() => {
    tmp = tempDir();
    store = openAgentStore(tmp.dir);
  });
  afterEach(() => {
    store.close();
    tmp.remove();
  });

  /** Runs one request against scripted answers to the state reads and the uploads, in order. */
  async function run(states: Scripted[], uploads: Scripted[], signal?: AbortSignal) {
    const sent: Array<{ first: number; size: number; bytes: Buffer }> = [];
    let size = 0;
    const next = <T>(list: T[], what: string): T => {
      const item = list.shift();
      if (item === undefined) throw new Error(`unexpected ${what}`);
      return item;
    };
    const api = {
      async diagnosticsState() {
        const answer = next(states, 'state read')(size);
        if (answer instanceof Error) throw answer;
        return answer;
      },
      async uploadDiagnostics(_id: string, part: DiagnosticsPart) {
        size = part.size;
        sent.push({ first: part.first, size: part.size, bytes: await bytesOf(part.open()) });
        const answer = next(uploads, 'upload')(size);
        if (answer instanceof Error) throw answer;
        return answer;
      },
    } as unknown as DeviceApi;
    const reports: CommandReport[] = [];
    const jobs = createDiagnosticsJobs({
      dataDir: tmp.dir,
      store,
      clock: systemClock,
      logger: quietLogger(),
      random: () => 0,
      api: () => api,
      backoff: { baseMs: 1, capMs: 5 },
      signal: signal ?? new AbortController().signal,
    });
    jobs.start(params, (r) => reports.push(...r));
    await jobs.idle();
    return { sent, reports };
  }

  it('builds the archive, sends it whole and reports its size and sha256', async () => {
    const { sent, reports } = await run(
      [() => state({})],
      [(size) => state({ status: 'available', received: size, size })],
    );
    expect(sent).toHaveLength(1);
    const [upload] = sent;
    expect(upload!.first).toBe(0);
    expect(upload!.bytes.length).toBe(upload!.size);
    expect(upload!.bytes.subarray(0, 2)).toEqual(Buffer.from([0x1f, 0x8b])); // gzip
    expect(reports).toEqual([
      {
        status: 'succeeded',
        reason: `archive of ${upload!.size} bytes uploaded`,
        result: {
          diagnostics_id: ID,
          size: upload!.size,
          sha256: createHash('sha256').update(upload!.bytes).digest('hex'),
        },
      },
    ]);
    expect(existsSync(path.join(tmp.dir, 'diagnostics', `${ID}.tar.gz`))).toBe(false);
  });

  it('after a cut and a 409 it goes on from what the platform holds, with the same archive', async () => {
    const { sent, reports } = await run(
      [
        () => state({}),
        (size) => state({ status: 'uploading', received: 100, size }),
        (size) => state({ status: 'uploading', received: 300, size }),
      ],
      [
        () => new PlatformError('network', 'socket hang up'),
        () => new PlatformError('conflict', 'another offset', { status: 409 }),
        (size) => state({ status: 'available', received: size, size }),
      ],
    );
    expect(sent.map((u) => u.first)).toEqual([0, 100, 300]);
    const whole = sent[0]!.bytes;
    expect(sent[1]!.bytes).toEqual(whole.subarray(100));
    expect(sent[2]!.bytes).toEqual(whole.subarray(300));
    expect(reports.map((r) => r.status)).toEqual(['succeeded']);
  });

  it.each([
    ['the platform marked it failed', [() => state({ status: 'failed' })], [], /marked this request failed/],
    [
      'the platform holds part of another archive',
      [(size: number) => state({ status: 'uploading', received: 10, size: size + 1 })],
      [],
      /part of another archive/,
    ],
    [
      'a refusal that repeating will not mend (413)',
      [() => state({})],
      [() => new PlatformError('rejected', 'too large', { status: 413 })],
      /upload refused: too large/,
    ],
  ] as Array<[string, Scripted[], Scripted[], RegExp]>)(
    '%s: the command fails, saying so',
    async (_name, states, uploads, reason) => {
      // The size is known only after an upload: a script that needs it first gets 0, and says size + 1.
      const { reports } = await run(states, uploads);
      expect(reports).toHaveLength(1);
      expect(reports[0]).toMatchObject({ status: 'failed', reason: expect.stringMatching(reason) });
      expect(existsSync(path.join(tmp.dir, 'diagnostics', `${ID}.tar.gz`))).toBe(false);
    },
  );

  it('a stop leaves the request unreported and the archive in place for the next start', async () => {
    const stop = new AbortController();
    const { reports } = await run(
      [() => state({})],
      [
        () => {
          stop.abort();
          return new PlatformError('network', 'the agent is stopping');
        },
      ],
      stop.signal,
    );
    expect(reports).toEqual([]);
    expect(existsSync(path.join(tmp.dir, 'diagnostics', `${ID}.tar.gz`))).toBe(true);
  });
});
