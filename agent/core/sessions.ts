/**
 * Charging sessions, from meter readings to charging records. Pure; the sampler persists what these return.
 *
 * A session opens when energy first flows (charging or discharging) and closes when the vehicle leaves, so a
 * pause (a flexibility control, a schedule gap) inside one plug-in stays one record. Energy comes from the
 * meter registers, which survive the agent: after a crash the record is still right up to the last reading the
 * agent persisted.
 *
 * Record fields: `energy` = imported kWh (meter_end − meter_start); `avg_power` = net kWh over the session's
 * hours (negative for a session that exported more than it drew); `max_power` = the largest import power, or
 * for a session that only exported, the largest export as a negative number.
 */
import { randomBytes } from 'node:crypto';
import type { ChargingRecordUpload } from '../../shared/device-api.js';
import { iso } from '../clock.js';
import type { ConnectorReading } from '../hal.js';

/** A charging session as the agent persists it: enough to write its charging record after a power cut. */
export interface SessionRow {
  recordId: string;
  connectorId: number;
  startedAt: string;
  endedAt?: string;
  meterStart: number;
  meterLast: number;
  exportStart: number;
  exportLast: number;
  socStart?: number;
  socLast?: number;
  /** Largest import power seen, kW (≥ 0). */
  maxPowerKw: number;
  /** Largest export power seen, as a negative kW (≤ 0). */
  minPowerKw: number;
  /** When the progress fields were last written. */
  updatedAt: string;
}

const round3 = (v: number) => Math.round(v * 1000) / 1000;

/** Unique per charger and stable: the platform de-duplicates charging records by it. */
export function newRecordId(
  connectorId: number,
  startedAtMs: number,
  random = () => randomBytes(4).toString('hex'),
): string {
  return `rec-${connectorId}-${startedAtMs.toString(36)}-${random()}`;
}

export function openSession(reading: ConnectorReading, at: number, recordId: string): SessionRow {
  const session: SessionRow = {
    recordId,
    connectorId: reading.connectorId,
    startedAt: iso(at),
    meterStart: reading.energyKwh,
    meterLast: reading.energyKwh,
    exportStart: reading.energyExportedKwh ?? 0,
    exportLast: reading.energyExportedKwh ?? 0,
    maxPowerKw: Math.max(0, reading.powerKw),
    minPowerKw: Math.min(0, reading.powerKw),
    updatedAt: iso(at),
  };
  if (reading.soc !== undefined) {
    session.socStart = Math.floor(reading.soc);
    session.socLast = Math.floor(reading.soc);
  }
  return session;
}

/**
 * True when a reading cannot continue `session`: the meter went backwards (hardware or HAL restarted,
 * meter replaced), so the session the store remembers is not the one the hardware is running.
 */
export function readingBreaksSession(session: SessionRow, reading: ConnectorReading): boolean {
  return (
    reading.energyKwh < session.meterLast ||
    (reading.energyExportedKwh ?? session.exportLast) < session.exportLast
  );
}

export function advanceSession(session: SessionRow, reading: ConnectorReading, at: number): SessionRow {
  const next: SessionRow = {
    ...session,
    meterLast: Math.max(session.meterLast, reading.energyKwh),
    exportLast: Math.max(session.exportLast, reading.energyExportedKwh ?? session.exportLast),
    maxPowerKw: Math.max(session.maxPowerKw, reading.powerKw),
    minPowerKw: Math.min(session.minPowerKw, reading.powerKw),
    updatedAt: iso(at),
  };
  if (reading.soc !== undefined) {
    next.socLast = Math.floor(reading.soc);
    next.socStart ??= Math.floor(reading.soc);
  }
  return next;
}

export function energyDelivered(session: SessionRow | undefined): number {
  return session ? Math.max(0, session.meterLast - session.meterStart) : 0;
}

export function toChargingRecord(session: SessionRow, endedAtIso: string): ChargingRecordUpload {
  const startMs = Date.parse(session.startedAt);
  const endMs = Math.max(startMs, Date.parse(endedAtIso));
  const imported = Math.max(0, session.meterLast - session.meterStart);
  const exported = Math.max(0, session.exportLast - session.exportStart);
  const hours = (endMs - startMs) / 3_600_000;
  const record: ChargingRecordUpload = {
    record_id: session.recordId,
    connector_id: session.connectorId,
    start_time: session.startedAt,
    end_time: iso(endMs),
    energy: round3(imported),
    max_power: round3(session.maxPowerKw > 0 ? session.maxPowerKw : session.minPowerKw),
    avg_power: round3(hours > 0 ? (imported - exported) / hours : 0),
    meter_start: round3(session.meterStart),
    meter_end: round3(Math.max(session.meterStart, session.meterLast)),
  };
  const vehicle: NonNullable<ChargingRecordUpload['vehicle_info']> = {};
  if (session.socStart !== undefined) vehicle.soc_start = session.socStart;
  if (session.socLast !== undefined) vehicle.soc_end = session.socLast;
  if (Object.keys(vehicle).length > 0) record.vehicle_info = vehicle;
  // max/avg power are bounded on the wire (±1000 kW); clamp rather than lose the record to a glitchy sample.
  record.max_power = Math.max(-1000, Math.min(1000, record.max_power ?? 0));
  record.avg_power = Math.max(-1000, Math.min(1000, record.avg_power ?? 0));
  return record;
}
