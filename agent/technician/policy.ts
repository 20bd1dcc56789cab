/**
 * "What is in force now, and what changes next" for the technician commands: the same pure decision the
 * control loop makes (`decideConnector`: override, schedules, flexibility limits), evaluated from the stored
 * state at the current instant — so `status` answers correctly even while the agent is stopped.
 */

import type { OutOfService } from '../core/availability.js';
import { type ConnectorOverride, type ConnectorTarget, decideConnector } from '../core/connector-policy.js';
import type { StoredLimit } from '../core/limit-policy.js';
import type { StoredSchedule } from '../core/schedule-engine.js';
import type { ConnectorInfo, ConnectorReading } from '../hal.js';
import type { ConnectorSnapshot } from '../store/agent-store.js';

export interface InForce {
  mode: ConnectorTarget['mode'];
  power_limit_kw: number;
  reason: string;
  source: ConnectorTarget['source'];
  schedule_id: string | null;
  limit_ids: string[];
  override: (ConnectorOverride & { kind: string }) | null;
}

export interface NextChange {
  at: string;
  mode: ConnectorTarget['mode'];
  power_limit_kw: number;
  reason: string;
}

export interface ConnectorPolicyView {
  in_force: InForce;
  /** The next instant at which the mode or the power limit changes (within the engine's 8-day horizon). */
  next_change: NextChange | null;
}

/** A reading good enough for the decision (only the SOC matters to it), from the stored snapshot. */
export function readingOf(snapshot: ConnectorSnapshot | undefined): ConnectorReading | undefined {
  if (!snapshot) return undefined;
  return {
    connectorId: snapshot.connectorId,
    state: snapshot.state,
    voltageV: snapshot.voltageV ?? 0,
    currentA: snapshot.currentA ?? 0,
    powerKw: snapshot.powerKw,
    energyKwh: 0,
    vehiclePresent: snapshot.vehiclePresent,
    temperatureC: snapshot.temperatureC ?? 0,
    faultCode: snapshot.faultCode,
    ...(snapshot.soc !== undefined ? { soc: snapshot.soc } : {}),
  };
}

/** How many decision edges to step over looking for one that changes mode or power (reason-only edges). */
const MAX_EDGES = 16;

export function connectorPolicy(input: {
  connector: ConnectorInfo;
  schedules: readonly StoredSchedule[];
  limits: readonly StoredLimit[];
  override?: ConnectorOverride;
  /** Taken out of service by the operator (DESIGN.md §20). */
  outOfService?: OutOfService;
  snapshot?: ConnectorSnapshot;
  now: number;
}): ConnectorPolicyView {
  const reading = readingOf(input.snapshot);
  const decide = (at: number) =>
    decideConnector({
      connector: input.connector,
      schedules: input.schedules,
      limits: input.limits,
      ...(input.override ? { override: input.override } : {}),
      ...(input.outOfService ? { outOfService: input.outOfService } : {}),
      ...(reading ? { reading } : {}),
      now: at,
    });
  const current = decide(input.now);
  const in_force: InForce = {
    mode: current.mode,
    power_limit_kw: current.powerLimitKw,
    reason: current.reason,
    source: current.source,
    schedule_id: current.activeScheduleId ?? null,
    limit_ids: current.activeLimitIds,
    override: current.source === 'override' && input.override ? input.override : null,
  };

  let next_change: NextChange | null = null;
  let at = current.nextChangeAt;
  for (let i = 0; i < MAX_EDGES && at !== undefined && at > input.now; i++) {
    const then = decide(at);
    if (then.mode !== current.mode || then.powerLimitKw !== current.powerLimitKw) {
      next_change = {
        at: new Date(at).toISOString(),
        mode: then.mode,
        power_limit_kw: then.powerLimitKw,
        reason: then.reason,
      };
      break;
    }
    if (then.nextChangeAt === undefined || then.nextChangeAt <= at) break;
    at = then.nextChangeAt;
  }
  return { in_force, next_change };
}

/** `charge up to 7.0 kW`, `idle`, `discharge up to 10.0 kW`. */
export function describeMode(mode: ConnectorTarget['mode'], powerLimitKw: number): string {
  if (mode === 'idle') return 'idle';
  const limit = Number.isFinite(powerLimitKw) ? `${powerLimitKw.toFixed(1)} kW` : 'the rating';
  return `${mode} up to ${limit}`;
}

export function isLimitActive(limit: StoredLimit, now: number): boolean {
  return Date.parse(limit.starts_at) <= now && now < Date.parse(limit.ends_at);
}
