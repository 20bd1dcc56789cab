/**
 * `charger-agent status --data-dir DIR [--json]`: what the agent is doing, from its store alone (read-only,
 * also while it runs; no network). The JSON is the report below; the terminal form (render-status.ts) is a
 * short summary of it.
 *
 * State and exit code (TECH_EXIT):
 * - `healthy` (0): registered, the agent process runs, its last heartbeat succeeded within 3 heartbeat
 *   periods (90 s), the clock is within 5 s of the platform's, no connector reports a fault.
 * - `degraded` (4): registered, but one of those does not hold; `problems` says which.
 * - `not_registered` (5): the store exists but holds no device identity yet (first start still trying to
 *   register — `last_error` usually says why); `no_store` (5): nothing in --data-dir.
 * Neither the device secret nor the access token is ever printed.
 */

import { CLOCK_SKEW_WARN_SECONDS, ONLINE_WINDOW_SECONDS } from '../../shared/limits.js';
import type { OutOfService } from '../core/availability.js';
import { OUTBOX_KINDS, type OutboxKind } from '../core/outbox-policy.js';
import type { AgentStore } from '../store/agent-store.js';
import { agentStoreFile, type ConnectorSnapshot, type JournalEntry } from '../store/agent-store.js';
import { duration, relative, signedSeconds } from './format.js';
import { type LimitReport, limitReport } from './limit-report.js';
import { type ConnectorPolicyView, connectorPolicy } from './policy.js';
import { type AgentProcessState, agentProcessState, isAgentProcessAlive, TECH_EXIT } from './read-store.js';
import type { ReleasesReport } from './release-status.js';

export type StatusState = 'healthy' | 'degraded' | 'not_registered' | 'no_store';

export interface ConnectorStatus extends ConnectorPolicyView {
  connector_id: number;
  rated_power_kw: number | null;
  v2g_capable: boolean | null;
  state: string | null;
  power_kw: number | null;
  soc: number | null;
  vehicle_present: boolean | null;
  fault_code: number | null;
  energy_delivered_kwh: number | null;
  temperature_c: number | null;
  /** When the snapshot was written (on every change, and every minute while the agent runs). */
  reading_at: string | null;
  /** Taken out of service by the operator (DESIGN.md §20), or null when in service. */
  out_of_service: OutOfService | null;
}

export interface CommandSummary {
  command_id: string;
  command: string;
  status: string;
  reason: string | null;
  received_at: string;
  updated_at: string;
}

export interface StatusReport {
  state: StatusState;
  /** Why the state is not healthy; empty when healthy. */
  problems: string[];
  checked_at: string;
  data_dir: string;
  store_file: string;
  identity: {
    sn: string;
    device_id: string;
    registered_at: string;
    secret_rotated_at: string | null;
    /** A rotation under way: when its new secret was stored, not yet confirmed by a token (never the secret). */
    secret_rotation_pending_since: string | null;
  } | null;
  platform_url: string | null;
  agent: {
    running: boolean;
    pid: number | null;
    version: string | null;
    started_at: string | null;
    stopped_at: string | null;
    note: string;
  };
  connectivity: {
    last_heartbeat: {
      at: string;
      ok: boolean;
      age_seconds: number;
      round_trip_ms: number | null;
      error: string | null;
      status: string | null;
    } | null;
    /** No successful heartbeat within 3 heartbeat periods. */
    stale: boolean;
  };
  token: { expires_at: string; expires_in_seconds: number; expired: boolean; obtained_at: string } | null;
  clock_skew: { ms: number; measured_at: string } | null;
  last_error: { at: string; where: string; message: string } | null;
  connectors: ConnectorStatus[];
  limits: LimitReport[];
  outbox: {
    items: number;
    bytes: number;
    by_kind: Record<OutboxKind, { items: number; bytes: number }>;
    oldest_at: string | null;
    /** Items given up for space since the store was created (telemetry first, then events; never records or statuses). */
    dropped: Record<OutboxKind, number>;
  };
  recent_commands: CommandSummary[];
  /** The A/B install the agent runs from (under the launcher, or `--prefix`); absent otherwise. */
  releases?: ReleasesReport;
}

export function commandSummary(entry: JournalEntry): CommandSummary {
  return {
    command_id: entry.commandId,
    command: entry.command,
    status: entry.status,
    reason: entry.reason ?? null,
    received_at: entry.receivedAt,
    updated_at: entry.updatedAt,
  };
}

export const RECENT_COMMANDS = 10;

function connectorStatuses(store: AgentStore, now: number): ConnectorStatus[] {
  const infos = new Map(store.listConnectors().map((c) => [c.connectorId, c]));
  const snapshots = new Map<number, ConnectorSnapshot>(store.listSnapshots().map((s) => [s.connectorId, s]));
  const overrides = store.listOverrides();
  const limits = store.listLimits();
  const availability = store.getState('availability') ?? {};
  const ids = [...new Set([...infos.keys(), ...snapshots.keys()])].sort((a, b) => a - b);
  return ids.map((id) => {
    const info = infos.get(id);
    const snap = snapshots.get(id);
    const override = overrides.get(id);
    const outOfService = availability[String(id)];
    const policy = connectorPolicy({
      // Without the HAL's declaration (never the case once the agent started), assume no rating cap.
      connector: info ?? { connectorId: id, ratedPowerKw: Number.POSITIVE_INFINITY, v2gCapable: false },
      schedules: store.listSchedules(id).map((s) => s.schedule),
      limits,
      ...(override ? { override } : {}),
      ...(outOfService ? { outOfService } : {}),
      ...(snap ? { snapshot: snap } : {}),
      now,
    });
    return {
      connector_id: id,
      rated_power_kw: info?.ratedPowerKw ?? null,
      v2g_capable: info?.v2gCapable ?? null,
      state: snap?.state ?? null,
      power_kw: snap?.powerKw ?? null,
      soc: snap?.soc ?? null,
      vehicle_present: snap?.vehiclePresent ?? null,
      fault_code: snap?.faultCode ?? null,
      energy_delivered_kwh: snap?.energyDeliveredKwh ?? null,
      temperature_c: snap?.temperatureC ?? null,
      reading_at: snap?.updatedAt ?? null,
      out_of_service: outOfService ?? null,
      ...policy,
    };
  });
}

function outboxOf(store: AgentStore): StatusReport['outbox'] {
  const usage = store.outbox.size();
  const by_kind = Object.fromEntries(OUTBOX_KINDS.map((k) => [k, { items: 0, bytes: 0 }])) as Record<
    OutboxKind,
    { items: number; bytes: number }
  >;
  const rows = store.db
    .prepare('SELECT kind, count(*) AS items, coalesce(sum(bytes), 0) AS bytes FROM outbox GROUP BY kind')
    .all() as Array<{ kind: OutboxKind; items: number; bytes: number }>;
  for (const row of rows) by_kind[row.kind] = { items: row.items, bytes: row.bytes };
  const oldest = store.outbox.peek(1)[0];
  return {
    items: usage.items,
    bytes: usage.bytes,
    by_kind,
    oldest_at: oldest?.createdAt ?? null,
    dropped: store.outbox.droppedCounts(),
  };
}

export function collectStatus(
  store: AgentStore,
  options: { dataDir: string; now?: number; isAlive?: (pid: number) => boolean },
): StatusReport {
  const now = options.now ?? Date.now();
  const identity = store.getIdentity();
  const runConfig = store.getState('run_config');
  const proc: AgentProcessState = agentProcessState(store, options.isAlive ?? isAgentProcessAlive);
  const beat = store.getState('last_heartbeat');
  const skew = store.getState('clock_skew');
  const token = store.getToken();
  const lastError = store.getState('last_error');
  const configuredUrl = typeof runConfig?.platformUrl === 'string' ? runConfig.platformUrl : undefined;

  const beatAge = beat ? now - Date.parse(beat.at) : Number.POSITIVE_INFINITY;
  const stale = !beat?.ok || beatAge > ONLINE_WINDOW_SECONDS * 1000;
  const connectors = connectorStatuses(store, now);

  const problems: string[] = [];
  if (!proc.running) problems.push(`the agent is not running (${proc.note})`);
  if (identity) {
    if (!beat) problems.push('no heartbeat yet');
    else if (!beat.ok)
      problems.push(`the last heartbeat failed ${relative(beat.at, now)}: ${beat.error ?? '?'}`);
    else if (beatAge > ONLINE_WINDOW_SECONDS * 1000)
      problems.push(
        `the last heartbeat was ${duration(beatAge)} ago (more than ${ONLINE_WINDOW_SECONDS} s): the platform shows this charger offline`,
      );
    if (skew && Math.abs(skew.ms) > CLOCK_SKEW_WARN_SECONDS * 1000) {
      problems.push(
        `the clock is off by ${signedSeconds(skew.ms)} from the platform (more than ${CLOCK_SKEW_WARN_SECONDS} s): schedules follow the local clock — check NTP`,
      );
    }
  }
  for (const c of connectors) {
    if (c.fault_code !== null && c.fault_code !== 0)
      problems.push(`connector ${c.connector_id} reports fault code ${c.fault_code}`);
  }

  let state: StatusState;
  if (!identity) state = 'not_registered';
  else state = problems.length === 0 ? 'healthy' : 'degraded';

  return {
    state,
    problems,
    checked_at: new Date(now).toISOString(),
    data_dir: options.dataDir,
    store_file: agentStoreFile(options.dataDir),
    identity: identity
      ? {
          sn: identity.sn,
          device_id: identity.deviceId,
          registered_at: identity.registeredAt,
          secret_rotated_at: identity.secretRotatedAt ?? null,
          secret_rotation_pending_since:
            identity.pendingSecret !== undefined ? (identity.pendingSince ?? '') : null,
        }
      : null,
    platform_url: configuredUrl ?? identity?.platformUrl ?? null,
    agent: {
      running: proc.running,
      pid: proc.pid ?? null,
      version: proc.version ?? null,
      started_at: proc.startedAt ?? null,
      stopped_at: proc.stoppedAt ?? null,
      note: proc.note,
    },
    connectivity: {
      last_heartbeat: beat
        ? {
            at: beat.at,
            ok: beat.ok,
            age_seconds: Math.round(beatAge / 1000),
            round_trip_ms: beat.roundTripMs ?? null,
            error: beat.error ?? null,
            status: beat.status ?? null,
          }
        : null,
      stale,
    },
    token: token
      ? {
          expires_at: token.expiresAt,
          expires_in_seconds: Math.round((Date.parse(token.expiresAt) - now) / 1000),
          expired: Date.parse(token.expiresAt) <= now,
          obtained_at: token.obtainedAt,
        }
      : null,
    clock_skew: skew ? { ms: skew.ms, measured_at: skew.at } : null,
    last_error: lastError ?? null,
    connectors,
    limits: store.listLimits().map((l) => limitReport(l, now)),
    outbox: outboxOf(store),
    recent_commands: store.journalRecent(RECENT_COMMANDS).map(commandSummary),
  };
}

/** What `status` prints and returns when there is no store to read. */
export function noStoreReport(
  dataDir: string,
  message: string,
  now = Date.now(),
): Pick<StatusReport, 'state' | 'problems' | 'checked_at' | 'data_dir' | 'store_file'> & { hint: string } {
  return {
    state: 'no_store',
    problems: [message],
    checked_at: new Date(now).toISOString(),
    data_dir: dataDir,
    store_file: agentStoreFile(dataDir),
    hint: 'give the --data-dir the agent runs with; an agent that never started has no store',
  };
}

export function statusExitCode(state: StatusState): number {
  switch (state) {
    case 'healthy':
      return TECH_EXIT.ok;
    case 'degraded':
      return TECH_EXIT.problem;
    default:
      return TECH_EXIT.notRegistered;
  }
}
