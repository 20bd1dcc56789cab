/**
 * What a checked command does, decided without touching anything: the override a hardware command stores,
 * the limit a flexibility command stores, what refuses a start or discharge given the connector's reading,
 * and how the control pass that applied an override reads as the command's report. Pure; the command executor
 * (runtime/command-executor.ts) stores, runs and reports.
 */
import type { ReportedCommandStatus } from '../../shared/device-api.js';
import { iso } from '../clock.js';
import type { ConnectorReading } from '../hal.js';
import type { ParsedCommand } from './command-checks.js';
import type { ConnectorOverride, ConnectorTarget } from './connector-policy.js';
import type { StoredLimit } from './limit-policy.js';

export type HardwareCommand = Extract<ParsedCommand, { name: 'stop' | 'start' | 'discharge' }>;
export type LimitCommand = Extract<ParsedCommand, { name: 'set_power_limit' | 'pause_charging' }>;
export type WantedMode = 'charge' | 'discharge' | 'idle';

/** The override a hardware command stores from `acceptedAt` on, and the mode it wants the connector in. */
export function overrideOf(
  command: HardwareCommand,
  commandId: string,
  acceptedAt: string,
): { connectorId: number; override: ConnectorOverride; wanted: WantedMode } {
  switch (command.name) {
    case 'stop':
      return {
        connectorId: command.params.connector_id,
        override: { kind: 'stop', commandId, since: acceptedAt },
        wanted: 'idle',
      };
    case 'start': {
      const { connector_id, target_soc, power_limit } = command.params;
      return {
        connectorId: connector_id,
        override: {
          kind: 'start',
          commandId,
          since: acceptedAt,
          ...(target_soc !== undefined ? { targetSoc: target_soc } : {}),
          ...(power_limit !== undefined ? { powerLimitKw: power_limit } : {}),
        },
        wanted: 'charge',
      };
    }
    case 'discharge': {
      const { connector_id, discharge_power, duration, min_soc } = command.params;
      // The window starts when the charger accepted it; after a restart it is not stretched.
      const until = iso(Date.parse(acceptedAt) + duration * 1000);
      return {
        connectorId: connector_id,
        override: {
          kind: 'discharge',
          commandId,
          since: acceptedAt,
          until,
          powerKw: discharge_power,
          minSoc: min_soc,
        },
        wanted: 'discharge',
      };
    }
  }
}

/** The flexibility limit a `set_power_limit` or `pause_charging` stores. */
export function limitOf(command: LimitCommand, commandId: string, acceptedAt: string): StoredLimit {
  const p = command.params;
  return {
    control_id: p.control_id,
    kind: command.name === 'pause_charging' ? 'pause' : 'power_limit',
    ...(command.name === 'set_power_limit'
      ? { power_limit_percent: command.params.power_limit_percent }
      : {}),
    starts_at: p.starts_at,
    ends_at: p.ends_at,
    commandId,
    receivedAt: acceptedAt,
    ...(p.reason !== undefined ? { reason: p.reason } : {}),
  };
}

/** Why a start or discharge cannot be taken given the connector as read now (undefined: unreadable). */
export function hardwareRefusalOf(
  command: Extract<ParsedCommand, { name: 'start' | 'discharge' }>,
  reading: ConnectorReading | undefined,
): string | undefined {
  const id = command.params.connector_id;
  if (!reading) return `connector ${id} cannot be read`;
  if (reading.faultCode !== 0) return `connector ${id} is in fault ${reading.faultCode}`;
  if (!reading.vehiclePresent) return `no vehicle on connector ${id}`;
  if (command.name === 'discharge' && reading.soc !== undefined && reading.soc <= command.params.min_soc) {
    return `vehicle SOC ${reading.soc}% is at or below min_soc ${command.params.min_soc}%`;
  }
  return undefined;
}

/** What the control pass did for the connector (runtime/control-loop.ts `ConnectorOutcome`). */
export interface AppliedOutcome {
  target: ConnectorTarget;
  reading?: ConnectorReading;
  error?: Error;
}

export interface OverrideVerdict {
  report: { status: ReportedCommandStatus; reason: string };
  /** The override did not take: remove it with the report. */
  dropOverride: boolean;
  /** Run another control pass (the connector goes back to what the schedules say). */
  retrigger: boolean;
}

/** How the control pass that applied a hardware command's override reads as that command's report. */
export function overrideVerdict(
  outcome: AppliedOutcome | undefined,
  connectorId: number,
  wanted: WantedMode,
): OverrideVerdict {
  if (!outcome) {
    return {
      report: { status: 'failed', reason: `connector ${connectorId} is not known to the hardware` },
      dropOverride: true,
      retrigger: false,
    };
  }
  if (outcome.error) {
    return {
      report: { status: 'failed', reason: `hardware refused: ${outcome.error.message}` },
      dropOverride: wanted !== 'idle',
      retrigger: wanted !== 'idle',
    };
  }
  if (wanted === 'idle') {
    // A stop succeeds when no energy flows, whatever else holds the connector (no vehicle: nothing to stop).
    const present = outcome.reading?.vehiclePresent ?? true;
    return {
      report: {
        status: 'succeeded',
        reason: present
          ? 'stopped; stays off until the vehicle is unplugged or started again'
          : `nothing to stop: no vehicle on connector ${connectorId}`,
      },
      dropOverride: false,
      retrigger: false,
    };
  }
  const doing = wanted === 'charge' ? 'charging' : 'discharging';
  if (outcome.target.mode !== wanted) {
    // Allowed by the command but held by something stronger (a flexibility pause, min_soc, target_soc).
    return {
      report: { status: 'failed', reason: `not ${doing}: ${outcome.target.reason}` },
      dropOverride: true,
      retrigger: true,
    };
  }
  return {
    report: { status: 'succeeded', reason: `${doing} at up to ${outcome.target.powerLimitKw} kW` },
    dropOverride: false,
    retrigger: false,
  };
}
