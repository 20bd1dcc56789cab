/**
 * A small key-value table of what the agent last knew about itself (its process, the last heartbeat, the
 * clock skew, the last error, its configuration), for the technician's `status` and `diag`. Values are JSON.
 */
import type Database from 'better-sqlite3';
import type { ConfigurationChange } from '../../shared/configuration.js';
import type { Availability } from '../core/availability.js';

type Db = Database.Database;

/** Keys of the small key-value table; values are JSON. */
export interface AgentStateValues {
  last_heartbeat: {
    at: string;
    ok: boolean;
    status?: string;
    roundTripMs?: number;
    error?: string;
  };
  clock_skew: { ms: number; at: string };
  last_error: { at: string; where: string; message: string };
  run_config: Record<string, unknown>;
  agent_process: { pid: number; startedAt: string; version: string; stoppedAt?: string };
  /** Connectors the operator took out of service (DESIGN.md §20); absent: all in service. */
  availability: Availability;
  /** The configuration values the operator set remotely (DESIGN.md §20); they win over the config file. */
  configuration: ConfigurationChange;
}
export type AgentStateKey = keyof AgentStateValues;

export interface AgentStateStore {
  getState<K extends AgentStateKey>(key: K): AgentStateValues[K] | undefined;
  setState<K extends AgentStateKey>(key: K, value: AgentStateValues[K]): void;
}

/** `write` prepares a statement on first use; `nowIso` stamps each value. */
export function createAgentStateStore(
  db: Db,
  write: (sql: string) => Database.Statement,
  nowIso: () => string,
): AgentStateStore {
  const stateQuery = db.prepare('SELECT value FROM agent_state WHERE key = ?');
  return {
    getState(key) {
      const row = stateQuery.get(key) as { value: string } | undefined;
      return row ? (JSON.parse(row.value) as AgentStateValues[typeof key]) : undefined;
    },
    setState(key, value) {
      write(
        `INSERT INTO agent_state (key, value, updated_at) VALUES (?, ?, ?)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
      ).run(key, JSON.stringify(value), nowIso());
    },
  };
}
