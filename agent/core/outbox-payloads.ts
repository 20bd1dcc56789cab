/**
 * What the store queues for the platform, in the shape the uplink sends: command status reports, device
 * events and charging records. Pure, so that a report is built the same way wherever it is queued.
 */
import type { ChargingRecordUpload, DeviceEvent, ReportedCommandStatus } from '../../shared/device-api.js';

export interface CommandStatusPayload {
  command_id: string;
  status: ReportedCommandStatus;
  reason?: string;
  timestamp: string;
  /** What the command produced (DESIGN.md §20), e.g. the configuration after `set_configuration`. */
  result?: Record<string, unknown>;
}

/** One report of a command as the agent queues it. */
export interface CommandReport {
  status: ReportedCommandStatus;
  reason?: string;
  result?: Record<string, unknown>;
}

/** One outbox item per report, in order, all stamped `at` (when the agent committed them). */
export function commandStatusItems(
  commandId: string,
  reports: readonly CommandReport[],
  at: string,
): Array<{ kind: 'command_status'; payload: CommandStatusPayload }> {
  return reports.map((r) => ({
    kind: 'command_status' as const,
    payload: {
      command_id: commandId,
      status: r.status,
      ...(r.reason !== undefined ? { reason: r.reason } : {}),
      timestamp: at,
      ...(r.result !== undefined ? { result: r.result } : {}),
    },
  }));
}

export function eventItems(events: readonly DeviceEvent[]): Array<{ kind: 'event'; payload: DeviceEvent }> {
  return events.map((e) => ({ kind: 'event' as const, payload: e }));
}

export function chargingRecordItem(record: ChargingRecordUpload): {
  kind: 'charging_record';
  payload: ChargingRecordUpload;
} {
  return { kind: 'charging_record', payload: record };
}
