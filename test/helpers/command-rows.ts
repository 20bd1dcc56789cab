import type { ControlRow, NewCommand, Store } from '../../platform/storage/store.js';
import type { ChargingSchedule } from '../../shared/index.js';

/**
 * Rows and reads of the command repository contract (store-contract-commands, -controls, -history): a command,
 * a schedule and a control to store, and reads of what the store holds.
 */

export const T0 = Date.UTC(2026, 0, 1);
export const MINUTE = 60_000;

export function cmd(deviceId: string, extra: Partial<NewCommand> = {}): NewCommand {
  return {
    device_id: deviceId,
    command: 'stop',
    params: { connector_id: 1, reason: 'user_request' },
    expiry_ms: T0 + 10 * MINUTE,
    ...extra,
  };
}

export function schedule(scheduleId: string, start = '00:00'): ChargingSchedule {
  return {
    schedule_id: scheduleId,
    enabled: true,
    type: 'daily',
    time_slots: [{ start, end: '06:00', action: 'charge' }],
    timezone: 'UTC',
  };
}

export function control(controlId: string, endsMs = T0 + 30 * MINUTE): ControlRow {
  return {
    control_id: controlId,
    client_id: 'cli_test',
    target_type: 'site',
    target_ids: ['site_a', 'site_b'],
    command: 'set_power_limit',
    params: { power_limit_kw: 7.5, nested: { list: [1, 'two', null] } },
    status: 'executing',
    created_ms: T0,
    ends_ms: endsMs,
    operator_ids: ['op_a'],
  };
}

export function commandReads(store: () => Store) {
  /**
   * Opens enough pooled connections that concurrent calls really overlap on PostgreSQL (instead of being
   * staggered by connection set-up), so that a missing lock shows as a double change.
   */
  const warm = () => Promise.all(Array.from({ length: 8 }, () => store().countCommandsByStatus()));
  const statusOf = async (commandId: string) => (await store().getCommand(commandId))?.command.status;
  const historyOf = async (commandId: string) =>
    (await store().getCommand(commandId))?.history.map((h) => [h.status, h.at_ms, h.reason]);
  return { warm, statusOf, historyOf };
}
