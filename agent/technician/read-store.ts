/**
 * Read-only access to the agent's store for the technician commands, and the exit codes they share.
 *
 * The store is opened with `openAgentStore(dir, { readonly: true })`: SQLite in WAL mode lets a reader look
 * while the agent runs, without blocking it and without writing anything. Nothing here ever writes.
 */
import { existsSync, readFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import {
  AGENT_SCHEMA_VERSION,
  type AgentStore,
  agentStoreFile,
  openAgentStore,
} from '../store/agent-store.js';

/** Each network step of `diag` gives up after this long (`--timeout` changes it). */
export const DEFAULT_DIAG_TIMEOUT_MS = 5_000;

/**
 * Exit codes of `status`, `diag`, `schedules` and `commands` (those of `run` are in agent-errors.ts; 3 is
 * left to `run`'s "identity refused" so that a script cannot mistake one for the other).
 */
export const TECH_EXIT = {
  /** status: healthy; diag: every check passed (warnings allowed); listings: printed. */
  ok: 0,
  /** Something unexpected: the store cannot be read, a bug. The message is on stderr. */
  failure: 1,
  /** Bad command line. */
  usage: 2,
  /** status: degraded (see `problems`); diag: at least one check failed. */
  problem: 4,
  /** No agent store in --data-dir (never started there, or a wrong directory); status: not registered yet. */
  notRegistered: 5,
} as const;

export type StoreAccess =
  | { ok: true; store: AgentStore; schemaVersion: number }
  | {
      ok: false;
      reason: 'missing' | 'uninitialised' | 'newer' | 'unreadable';
      message: string;
      hint: string;
    };

function errnoOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' ? code : undefined;
}

function unreadable(file: string, error: unknown): StoreAccess {
  const code = errnoOf(error);
  const denied =
    code === 'EACCES' || code === 'EPERM' || /permission|readonly|unable to open/i.test(String(error));
  return {
    ok: false,
    reason: 'unreadable',
    message: `cannot read the agent store ${file}: ${(error as Error).message}`,
    hint: denied
      ? 'run this as the user the agent runs as (e.g. sudo -u charger-agent charger-agent status ...) or as root'
      : 'the store may be damaged: run `charger-agent diag` and keep a copy of the data directory before changing it',
  };
}

/** Opens the store read-only, or explains why it cannot. */
export function openStoreForReading(dataDir: string): StoreAccess {
  const file = agentStoreFile(dataDir);
  if (!existsSync(file)) {
    return {
      ok: false,
      reason: 'missing',
      message: `no agent store at ${file}`,
      hint: 'give the --data-dir the agent runs with (the directory holding agent.sqlite); an agent that never started has none',
    };
  }
  let version: number;
  try {
    const probe = new Database(file, { readonly: true, fileMustExist: true });
    try {
      version = probe.pragma('user_version', { simple: true }) as number;
    } finally {
      probe.close();
    }
  } catch (error) {
    return unreadable(file, error);
  }
  if (version === 0) {
    return {
      ok: false,
      reason: 'uninitialised',
      message: `the agent store ${file} is empty: the agent has not finished its first start`,
      hint: 'start the agent (systemctl start charger-agent) and look at its log if it does not get further',
    };
  }
  if (version > AGENT_SCHEMA_VERSION) {
    return {
      ok: false,
      reason: 'newer',
      message: `the agent store has schema version ${version}, newer than this charger-agent (${AGENT_SCHEMA_VERSION})`,
      hint: 'use the charger-agent program of the installed (newer) agent',
    };
  }
  try {
    return { ok: true, store: openAgentStore(dataDir, { readonly: true }), schemaVersion: version };
  } catch (error) {
    return unreadable(file, error);
  }
}

export interface AgentProcessState {
  pid?: number;
  running: boolean;
  version?: string;
  startedAt?: string;
  stoppedAt?: string;
  /** Why it is judged so, for people. */
  note: string;
}

/**
 * Is the process recorded in the store still the agent? Signal 0 tells whether the pid exists (EPERM: it
 * exists but belongs to another user, e.g. the agent's own); on Linux, its command line must also be a
 * `run`, so that a pid reused by an unrelated process after a power cut is not taken for the agent.
 */
export function isAgentProcessAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch (error) {
    if (errnoOf(error) !== 'EPERM') return false;
  }
  try {
    const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    return argv.includes('run');
  } catch {
    return true; // no /proc (not Linux) or not readable: the pid check is all there is
  }
}

export function agentProcessState(
  store: AgentStore,
  isAlive: (pid: number) => boolean = isAgentProcessAlive,
): AgentProcessState {
  const proc = store.getState('agent_process');
  if (!proc) return { running: false, note: 'the agent has not started with this data directory' };
  const base = { pid: proc.pid, version: proc.version, startedAt: proc.startedAt };
  if (proc.stoppedAt) {
    return { ...base, stoppedAt: proc.stoppedAt, running: false, note: 'stopped cleanly' };
  }
  if (isAlive(proc.pid)) return { ...base, running: true, note: 'running' };
  return {
    ...base,
    running: false,
    note: 'it did not stop cleanly (a crash, SIGKILL or a power cut)',
  };
}
