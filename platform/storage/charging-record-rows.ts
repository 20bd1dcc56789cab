import type { ChargingRecord } from '../../shared/index.js';
import { toTimestamp } from '../../shared/index.js';

/**
 * What both backends store of a charging record and read back, and the per-day counters they keep of them
 * (DESIGN.md §12): the row shapes and rules shared by `sqlite/` and `postgres/`, which differ only in SQL.
 */
export interface StoredChargingRecord {
  record_id: string;
  device_id: string;
  connector_id: number;
  start_ms: number;
  end_ms: number;
  energy: number;
  max_power: number | null;
  avg_power: number | null;
  cost: number | null;
  meter_start: number | null;
  meter_end: number | null;
  vin: string | null;
  soc_start: number | null;
  soc_end: number | null;
}

/** The wire form: absent fields stay absent (never null), vehicle info only when something of it is known. */
export function toChargingRecord(r: StoredChargingRecord): ChargingRecord {
  const rec: ChargingRecord = {
    record_id: r.record_id,
    device_id: r.device_id,
    connector_id: r.connector_id,
    start_time: toTimestamp(r.start_ms),
    end_time: toTimestamp(r.end_ms),
    energy: r.energy,
  };
  if (r.max_power !== null) rec.max_power = r.max_power;
  if (r.avg_power !== null) rec.avg_power = r.avg_power;
  if (r.cost !== null) rec.cost = r.cost;
  if (r.meter_start !== null) rec.meter_start = r.meter_start;
  if (r.meter_end !== null) rec.meter_end = r.meter_end;
  if (r.vin !== null || r.soc_start !== null || r.soc_end !== null) {
    rec.vehicle_info = {};
    if (r.vin !== null) rec.vehicle_info.vin = r.vin;
    if (r.soc_start !== null) rec.vehicle_info.soc_start = r.soc_start;
    if (r.soc_end !== null) rec.vehicle_info.soc_end = r.soc_end;
  }
  return rec;
}

/** A change of one counter of `charging_record_days`: side 0 counts starts, side 1 ends. */
export type CounterChange = [operatorId: string, side: 0 | 1, dayMs: number, connectorId: number, by: number];

/**
 * Counter changes gathered over one call, so that each (operator, side, day, connector) is written once: a
 * request's hundred records fall on a few days, so it costs a few writes rather than two per record.
 */
export function counterChanges() {
  const changes = new Map<string, CounterChange>();
  return {
    /** A record (or `by` of them) of this operator and connector starting and ending on these days. */
    add(operatorId: string, connectorId: number, startDay: number, endDay: number, by: number): void {
      for (const [side, day] of [
        [0, startDay],
        [1, endDay],
      ] as const) {
        const key = `${operatorId}|${side}|${day}|${connectorId}`;
        const row = changes.get(key);
        if (row) row[4] += by;
        else changes.set(key, [operatorId, side, day, connectorId, by]);
      }
    },
    /** The changes that change something. */
    rows(): CounterChange[] {
      return [...changes.values()].filter((r) => r[4] !== 0);
    },
  };
}

/** A device's records counted by operator, connector, start day and end day, as a move of the device reads them. */
export interface DeviceRecordDays {
  operator_id: string | null;
  connector_id: number;
  start_day: number;
  end_day: number;
  n: number;
}

/**
 * The counter changes of a device moving to operator `to` (null: out of every site): its records leave their
 * operators' counters and join `to`'s. Answers the operators they left.
 */
export function addDeviceMove(
  counts: Pick<ReturnType<typeof counterChanges>, 'add'>,
  days: readonly DeviceRecordDays[],
  to: string | null,
): Set<string> {
  const from = new Set<string>();
  for (const d of days) {
    if (d.operator_id === to) continue;
    if (d.operator_id !== null) {
      from.add(d.operator_id);
      counts.add(d.operator_id, d.connector_id, d.start_day, d.end_day, -d.n);
    }
    if (to !== null) counts.add(to, d.connector_id, d.start_day, d.end_day, d.n);
  }
  return from;
}
