/**
 * The charger's diagnostics archive for a support request (DESIGN.md §20): one gzip'd tar file holding, under
 * `diagnostics-<sn>-<UTC time>/`, the logs of a time window, `status --json`, `diag --json` (offline), the recent
 * command journal, the configuration with secrets removed, and a manifest. No networking here: the upload is
 * someone else's job.
 *
 * The parts are laid out in a private staging directory in the data directory (the tar needs each file's size
 * before its content), packed into a temporary file beside `outFile`, and renamed into place once the archive is
 * within `maxBytes`; when it is not, the oldest log lines give way (truncation.ts). Secrets never get in:
 * configuration keys are censored (redact.ts) and the store's own secrets are scrubbed by value from every part.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { LOG_DIR } from '../logger.js';
import type { AgentStore } from '../store/agent-store.js';
import { AGENT_VERSION } from '../version.js';
import { collectLogLines, keepNewestLines } from './log-collect.js';
import type { TimeWindow } from './log-window.js';
import { archiveRootName, type LogsSummary, manifestOf, PART_FILES, PARTS } from './manifest.js';
import { asJson, commandsPart, configurationPart, diagPart, statusPart } from './parts.js';
import { knownSecrets, scrubText } from './redact.js';
import { writeTarGz } from './tar-gzip.js';
import { logBudget } from './truncation.js';

/** What the platform accepts (DESIGN.md §20). */
export { DIAGNOSTICS_MAX_BYTES } from '../../shared/diagnostics.js';
export type { TimeWindow } from './log-window.js';

const STAGING_PREFIX = '.diagnostics-staging-';
/** A staging directory this old was left by a build that died (a power cut): its space is reclaimed. */
const STALE_STAGING_MS = 3_600_000;

export interface DiagnosticsArchiveOptions {
  /** The agent's data directory: its logs are read from DIR/logs, the staging directory goes here. */
  dataDir: string;
  /** The agent's open store (read only here). */
  store: AgentStore;
  /** The effective run configuration; default: as stored for diag (`run_config`). */
  runConfig?: Record<string, unknown>;
  /** Log lines kept: those whose time lies in it (inclusive). */
  window: TimeWindow;
  /** ms; stamps the archive and its name. */
  now: number;
  /** Where the archive ends up (replaced if it exists). */
  outFile: string;
  /** Compressed size limit; DIAGNOSTICS_MAX_BYTES for the platform. */
  maxBytes: number;
  /** Whether a pid is the running agent (status and diag); default: the technician commands' test. */
  isAlive?: (pid: number) => boolean;
}

export interface DiagnosticsArchive {
  file: string;
  size: number;
  sha256: string;
  /** The top directory inside the archive. */
  root: string;
  /** The part files, relative to `root`. */
  parts: string[];
  /** Some of the window's oldest log lines were left out to stay within `maxBytes`. */
  truncated: boolean;
}

const DATE_LIMIT_MS = 8.64e15;
const isInstant = (ms: number) => Number.isFinite(ms) && Math.abs(ms) <= DATE_LIMIT_MS;

function checkOptions({ window, now, maxBytes }: DiagnosticsArchiveOptions): void {
  if (!isInstant(window.startMs) || !isInstant(window.endMs) || window.startMs > window.endMs) {
    throw new RangeError('the diagnostics window must be two instants, its start not after its end');
  }
  if (!isInstant(now)) throw new RangeError('now must be an instant');
  if (!Number.isFinite(maxBytes) || maxBytes <= 0) throw new RangeError('maxBytes must be more than 0');
}

/** Removes staging directories a dead build left behind; a build under way is younger than the limit. */
async function removeStaleStaging(dataDir: string): Promise<void> {
  let names: string[];
  try {
    names = await readdir(dataDir);
  } catch {
    return;
  }
  for (const name of names.filter((n) => n.startsWith(STAGING_PREFIX))) {
    const dir = path.join(dataDir, name);
    try {
      if (Date.now() - (await stat(dir)).mtimeMs > STALE_STAGING_MS) {
        await rm(dir, { recursive: true, force: true });
      }
    } catch {
      // gone meanwhile
    }
  }
}

export async function buildDiagnosticsArchive(
  options: DiagnosticsArchiveOptions,
): Promise<DiagnosticsArchive> {
  checkOptions(options);
  const { store, dataDir, window, now, maxBytes, outFile, isAlive } = options;
  const identity = store.getIdentity();
  const secrets = knownSecrets(identity, store.getToken());
  const scrub = (text: string) => scrubText(text, secrets);
  const runConfig = options.runConfig ?? store.getState('run_config');
  const sn = identity?.sn ?? (typeof runConfig?.sn === 'string' ? runConfig.sn : undefined);
  const root = archiveRootName(sn ?? identity?.deviceId, now);

  await removeStaleStaging(dataDir);
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  const staging = await mkdtemp(path.join(dataDir, STAGING_PREFIX)); // 0700: logs and configuration
  const temp = `${outFile}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    const top = path.join(staging, root);
    await mkdir(path.join(top, path.dirname(PART_FILES.logs)), { recursive: true, mode: 0o700 });
    const write = (part: string, value: unknown) =>
      writeFile(path.join(top, part), scrub(asJson(value)), { mode: 0o600 });

    await write(PART_FILES.status, statusPart(store, { dataDir, now, ...(isAlive ? { isAlive } : {}) }));
    await write(PART_FILES.diag, await diagPart({ dataDir, ...(isAlive ? { isAlive } : {}) }));
    await write(PART_FILES.commands, commandsPart(store, now));
    const configuration = configurationPart(store, runConfig);
    await write(PART_FILES.configuration, configuration);

    const logFile = path.join(top, PART_FILES.logs);
    const collected = await collectLogLines({
      logDir: path.join(dataDir, LOG_DIR),
      window,
      outFile: logFile,
      scrub,
    });
    const logs: LogsSummary = {
      file: PART_FILES.logs,
      lines: collected.lines,
      bytes: collected.bytes,
      dropped_lines: 0,
      dropped_bytes: 0,
      sources: collected.sources,
    };
    const notes = ['diag ran offline: its dns, tcp, tls, token and round_trip checks were not run'];
    if (!('remote' in configuration)) notes.push('no remote configuration stored');
    const writeManifest = () =>
      write(
        PART_FILES.manifest,
        manifestOf({
          root,
          now,
          agentVersion: AGENT_VERSION,
          sn,
          deviceId: identity?.deviceId,
          window,
          maxBytes,
          logs,
          notes,
        }),
      );
    await writeManifest();

    await mkdir(path.dirname(outFile), { recursive: true, mode: 0o700 });
    for (let attempt = 0; ; attempt++) {
      const built = await writeTarGz({ cwd: staging, entries: [root], file: temp, mtime: new Date(now) });
      const budget = logBudget({ archiveBytes: built.size, maxBytes, logBytes: logs.bytes, attempt });
      if (budget.kind === 'fits') {
        await rename(temp, outFile);
        return {
          file: outFile,
          size: built.size,
          sha256: built.sha256,
          root,
          parts: PARTS,
          truncated: logs.dropped_lines > 0 || logs.dropped_bytes > 0,
        };
      }
      if (budget.kind === 'too_large') {
        throw new Error(
          `the diagnostics archive is ${built.size} bytes without any log line, more than the ${maxBytes} allowed`,
        );
      }
      const cut = await keepNewestLines(logFile, budget.keepLogBytes);
      logs.dropped_lines += logs.lines - cut.keptLines;
      logs.dropped_bytes += logs.bytes - cut.keptBytes;
      logs.lines = cut.keptLines;
      logs.bytes = cut.keptBytes;
      await writeManifest();
    }
  } finally {
    await rm(staging, { recursive: true, force: true });
    await rm(temp, { force: true });
  }
}
