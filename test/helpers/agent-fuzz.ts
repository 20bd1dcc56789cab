import Database from 'better-sqlite3';
import type { AgentTuning } from '../../agent/runtime/agent-runtime.js';
import { agentStoreFile } from '../../agent/store/agent-store.js';

/**
 * What the agent-fuzz tests (agent-fuzz, agent-fuzz-commands) share: the seed, the agents' short cadences, a
 * guard against unhandled rejections and uncaught exceptions while the agents run, and the store's integrity.
 */

export const SEED = Number(process.env.AGENT_FUZZ_SEED ?? 0x6a6e_7406);

export const TUNING: Partial<AgentTuning> = {
  heartbeatIntervalMs: 300,
  pollWaitSeconds: 1,
  telemetry: { activeMs: 500, idleMs: 1_000 },
  sampleTickMs: 250,
  backoff: { baseMs: 50, capMs: 400 },
  flushPaceMs: 10,
  controlSafetyIntervalMs: 1_000,
  persistEveryMs: 1_000,
  requestTimeoutMs: 600,
  shutdownFlushMs: 1_500,
  shutdownHeartbeatMs: 500,
};
/** The longest a request may stay open: its timeout (plus the long poll's wait) and scheduling slack. */
export const boundOf = (path: string) =>
  (TUNING.requestTimeoutMs ?? 0) +
  (path.startsWith('/v1/device/commands?') ? (TUNING.pollWaitSeconds ?? 0) * 1000 : 0) +
  1_000;

// Process-level guards: any unhandled rejection or uncaught exception while the agents run fails the file.

export const unhandled: string[] = [];
export const onUnhandled = (reason: unknown) => {
  unhandled.push(
    reason instanceof Error ? `${reason.name}: ${reason.message}\n${reason.stack}` : String(reason),
  );
};

export function integrity(dir: string): string {
  const db = new Database(agentStoreFile(dir), { readonly: true, fileMustExist: true });
  try {
    return String(db.pragma('integrity_check', { simple: true }));
  } finally {
    db.close();
  }
}

// biome-ignore lint/suspicious/noExplicitAny: generated JSON is inspected field by field
export type Json = any;
