/**
 * The `upload_diagnostics` command (DESIGN.md §20): builds the diagnostics archive (agent/diagnostics/archive.ts,
 * loaded only when a request comes, so `run` does not carry it at cadence) and uploads it to the platform,
 * resumably. It runs beside the serial runner: a slow link must not hold up commands or control passes.
 *
 * The archive is kept as DATA_DIR/diagnostics/<diagnostics_id>.tar.gz until the upload ends, so that an upload cut
 * by the network or by a restart goes on with the same bytes: the platform says how much it holds
 * (`GET /v1/device/diagnostics/{id}`) and the rest is sent with `Content-Range`. The command reports `succeeded`
 * with the archive's size and sha256, or `failed` with why; a stop leaves it `accepted`, resumed at the next start.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import type { CommandParamsOf } from '../../shared/commands.js';
import { type Clock, sleep } from '../clock.js';
import { nextDelayMs } from '../core/backoff.js';
import type { DeviceApi } from '../link/platform-client.js';
import { isPlatformError } from '../link/platform-errors.js';
import type { AgentStore } from '../store/agent-store.js';
import type { Reporter } from './maintenance.js';

export interface DiagnosticsJobsOptions {
  dataDir: string;
  store: AgentStore;
  clock: Clock;
  logger: Logger;
  random: () => number;
  api: () => DeviceApi | undefined;
  backoff: { baseMs: number; capMs: number };
  /** Aborted when the agent stops: the job stops where it is and reports nothing. */
  signal: AbortSignal;
}

export interface DiagnosticsJobs {
  /** Builds (or finds) the archive and uploads it, then reports; once per request while it runs. */
  start(params: CommandParamsOf<'upload_diagnostics'>, report: Reporter): void;
  /** Settles when every job has ended (tests). */
  idle(): Promise<void>;
}

/** Attempts at the upload (each after a backoff) before the command fails. */
const MAX_ATTEMPTS = 12;
/** The slowest link a charger is expected to have, bytes per ms (32 KiB/s): bounds a PUT's wait for its answer. */
const SLOWEST_BYTES_PER_MS = 32;

interface BuiltArchive {
  file: string;
  size: number;
  sha256: string;
}

class UploadRefused extends Error {}

export function createDiagnosticsJobs(options: DiagnosticsJobsOptions): DiagnosticsJobs {
  const { dataDir, store, clock, logger, signal } = options;
  const running = new Map<string, Promise<void>>();
  const fileOf = (id: string) => path.join(dataDir, 'diagnostics', `${id}.tar.gz`);

  /** The archive of an earlier attempt (complete: it is renamed into place only once built), or a new one. */
  async function archiveFor(params: CommandParamsOf<'upload_diagnostics'>): Promise<BuiltArchive> {
    const file = fileOf(params.diagnostics_id);
    const existing = await stat(file).catch(() => undefined);
    if (existing) return { file, size: existing.size, sha256: await sha256Of(file) };
    await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
    const { buildDiagnosticsArchive } = await import('../diagnostics/archive.js');
    const { isAgentProcessAlive } = await import('../technician/read-store.js');
    const built = await buildDiagnosticsArchive({
      dataDir,
      store,
      window: { startMs: Date.parse(params.start_time), endMs: Date.parse(params.end_time) },
      now: clock.now(),
      outFile: file,
      maxBytes: params.max_bytes,
      // This process is the agent the archive describes, running (a fleet's agents share one process).
      isAlive: (pid) => pid === process.pid || isAgentProcessAlive(pid),
    });
    logger.info(
      { diagnostics_id: params.diagnostics_id, size: built.size, truncated: built.truncated },
      'diagnostics archive built',
    );
    return { file: built.file, size: built.size, sha256: built.sha256 };
  }

  /** Sends what the platform does not hold yet, until it holds the whole archive. */
  async function upload(id: string, archive: BuiltArchive): Promise<void> {
    for (let attempt = 0; ; attempt += 1) {
      if (signal.aborted) throw signal.reason ?? new Error('stopped');
      const api = options.api();
      try {
        if (!api) throw new Error('not registered yet');
        const state = await api.diagnosticsState(id);
        if (state.status === 'available') return;
        if (state.status === 'failed') throw new UploadRefused('the platform marked this request failed');
        if (state.size !== null && state.size !== archive.size)
          throw new UploadRefused(`the platform holds part of another archive (${state.size} bytes)`);
        const first = state.size === null ? 0 : state.received;
        const answer = await api.uploadDiagnostics(id, {
          first,
          size: archive.size,
          open: () => createReadStream(archive.file, { start: first }),
          signal,
          timeoutMs: Math.max(60_000, (archive.size - first) / SLOWEST_BYTES_PER_MS),
        });
        if (answer.status === 'available') return;
      } catch (error) {
        if (error instanceof UploadRefused || signal.aborted) throw error;
        // A 409 says the platform holds another amount than we thought: ask again. Other refusals are final.
        if (
          isPlatformError(error) &&
          !error.retryable &&
          error.status !== 409 &&
          error.kind !== 'unauthorized'
        )
          throw new UploadRefused(`upload refused: ${error.message}`);
        if (attempt + 1 >= MAX_ATTEMPTS)
          throw new UploadRefused(`upload failed ${MAX_ATTEMPTS} times: ${(error as Error).message}`);
        const delay = nextDelayMs(attempt, { ...options.backoff, random: options.random });
        logger.warn(
          { diagnostics_id: id, err: (error as Error).message, retry_in_ms: delay },
          'diagnostics upload',
        );
        await sleep(clock, delay, signal);
      }
    }
  }

  async function run(params: CommandParamsOf<'upload_diagnostics'>, report: Reporter): Promise<void> {
    const id = params.diagnostics_id;
    try {
      const archive = await archiveFor(params);
      await upload(id, archive);
      report([
        {
          status: 'succeeded',
          reason: `archive of ${archive.size} bytes uploaded`,
          result: { diagnostics_id: id, size: archive.size, sha256: archive.sha256 },
        },
      ]);
    } catch (error) {
      if (signal.aborted) return; // stopped: resumed at the next start with the same archive
      report([{ status: 'failed', reason: `diagnostics: ${(error as Error).message}` }]);
    }
    await rm(fileOf(id), { force: true }).catch(() => undefined);
  }

  return {
    start(params, report) {
      const id = params.diagnostics_id;
      if (running.has(id)) return;
      const job = run(params, report)
        .catch((error: unknown) => logger.error({ err: (error as Error).message }, 'diagnostics job failed'))
        .finally(() => running.delete(id));
      running.set(id, job);
    },
    async idle() {
      await Promise.all([...running.values()]);
    },
  };
}

async function sha256Of(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}
