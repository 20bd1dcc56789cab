import {
  type ConnectorPolicyInput,
  evaluateConnector,
  type StoredSchedule,
} from '../../agent/core/schedule-engine.js';
import type { TimeSlot } from '../../shared/schedule.js';

/**
 * Inputs of the schedule engine's tests (schedule-engine, -dst, -limits): a schedule with defaults, a connector
 * evaluated at an instant (22 kW, no V2G, nothing in force unless given).
 */

export const BERLIN = 'Europe/Berlin';
export const NEW_YORK = 'America/New_York';

export type SlotInput = Partial<TimeSlot> & Pick<TimeSlot, 'start' | 'end'>;

export function schedule(
  fields: Partial<Omit<StoredSchedule, 'time_slots'>> & { time_slots: SlotInput[] },
): StoredSchedule {
  return {
    schedule_id: 's1',
    enabled: true,
    type: 'daily',
    timezone: BERLIN,
    ...fields,
    time_slots: fields.time_slots.map((slot) => ({ action: 'charge' as const, ...slot })),
  };
}

export function evaluateAt(iso: string, fields: Partial<ConnectorPolicyInput> = {}) {
  return evaluateConnector({
    ratingKw: 22,
    v2gCapable: false,
    schedules: [],
    limits: [],
    ...fields,
    now: new Date(iso),
  });
}

export function iso(date: Date | undefined): string | undefined {
  return date?.toISOString();
}
