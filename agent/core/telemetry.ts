/**
 * Telemetry as DESIGN.md §7 asks: every 5 s while charging or discharging, at once on every state change, and
 * every 60 s otherwise. Pure: the sampler decides with these and the readings it took.
 */
import { TelemetryRecord } from '../../shared/device-api.js';
import { TELEMETRY_INTERVAL_ACTIVE_SECONDS, TELEMETRY_INTERVAL_IDLE_SECONDS } from '../../shared/limits.js';
import { iso } from '../clock.js';
import type { ConnectorHardwareState, ConnectorReading } from '../hal.js';

export interface TelemetryIntervals {
  activeMs: number;
  idleMs: number;
}
export const DEFAULT_TELEMETRY_INTERVALS: TelemetryIntervals = {
  activeMs: TELEMETRY_INTERVAL_ACTIVE_SECONDS * 1000,
  idleMs: TELEMETRY_INTERVAL_IDLE_SECONDS * 1000,
};

/** What was last sent for a connector. */
export interface LastSent {
  at: number;
  state: ConnectorHardwareState;
}

export function isActive(state: ConnectorHardwareState): boolean {
  return state === 'charging' || state === 'discharging';
}

/**
 * Whether a record is due. A sampler tick may land a few ms early, so "due" allows a small slack rather than
 * waiting a whole extra tick.
 */
export function telemetryDue(
  last: LastSent | undefined,
  state: ConnectorHardwareState,
  now: number,
  intervals: TelemetryIntervals = DEFAULT_TELEMETRY_INTERVALS,
  slackMs = 250,
): boolean {
  if (!last) return true;
  if (last.state !== state) return true;
  const interval = isActive(state) ? intervals.activeMs : intervals.idleMs;
  return now - last.at >= interval - slackMs;
}

const round = (value: number, decimals: number) => {
  const factor = 10 ** decimals;
  return Math.round(value * factor) / factor;
};

/** The least export the wire can carry: a reading that says "discharging" must have negative power. */
const SMALLEST_EXPORT_KW = -0.001;

/**
 * The wire record for one reading. `energyDeliveredKwh` is the session's energy so far (0 without one).
 * Returns undefined when the reading cannot be expressed validly (hardware reporting nonsense), so that a
 * record the platform would refuse never enters the outbox.
 */
export function toTelemetryRecord(
  reading: ConnectorReading,
  at: number,
  energyDeliveredKwh: number,
): TelemetryRecord | undefined {
  let power = round(reading.powerKw, 3);
  // Rounding can turn a tiny export into 0 (or -0); the state is what the hardware said, keep it consistent.
  if (reading.state === 'discharging' && !(power < 0)) power = SMALLEST_EXPORT_KW;
  const candidate: Record<string, unknown> = {
    timestamp: iso(at),
    connector_id: reading.connectorId,
    state: reading.state,
    voltage: round(reading.voltageV, 1),
    current: round(reading.currentA, 2),
    power,
    energy_delivered: round(Math.max(0, energyDeliveredKwh), 3),
    temperature: round(reading.temperatureC, 1),
  };
  if (reading.soc !== undefined) candidate.soc = Math.max(0, Math.min(100, Math.floor(reading.soc)));
  const parsed = TelemetryRecord.safeParse(candidate);
  return parsed.success ? parsed.data : undefined;
}
