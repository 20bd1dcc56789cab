import { expect } from 'vitest';
import type { FleetSummary } from '../../simulators/fleet/fleet-summary.js';
import { openStoredData } from './stored-data.js';

/**
 * A fleet that stopped cleanly: no errors (their kinds and samples shown if any), every charger registered,
 * every outbox drained, nothing refused by the platform.
 */
export function expectCleanStop(summary: FleetSummary, count: number): void {
  expect(summary.errors, JSON.stringify({ kinds: summary.error_kinds, samples: summary.error_samples })).toBe(
    0,
  );
  expect(summary.registered).toBe(count);
  expect(summary.outbox.backlog_items).toBe(0);
  expect(summary.outbox.refused).toEqual({
    telemetry: 0,
    event: 0,
    charging_record: 0,
    command_status: 0,
    firmware_status: 0,
  });
  expect(summary.telemetry.refused).toBe(0);
}

/**
 * What the fleet's agents sent is what the platform stored (in `dataDir`'s database), kind by kind: none lost,
 * none twice. Returns the counts, for the test's log line and its own checks.
 */
export async function expectStoredAsSent(
  dataDir: string,
  seed: number,
  count: number,
  summary: FleetSummary,
): Promise<{ telemetry: number; events: number; chargingRecords: number }> {
  const db = await openStoredData(dataDir);
  try {
    const fleetDevices = `SELECT device_id FROM devices WHERE sn LIKE 'SIM-${seed}-%'`;
    const value = (sql: string) => db.value(sql);
    expect(await value(`SELECT count(*) AS n FROM (${fleetDevices}) AS fleet`)).toBe(count);
    const stored = {
      telemetry: await value(`SELECT count(*) AS n FROM telemetry WHERE device_id IN (${fleetDevices})`),
      events: await value(`SELECT count(*) AS n FROM device_events WHERE device_id IN (${fleetDevices})`),
      chargingRecords: await value(
        `SELECT count(*) AS n FROM charging_records WHERE device_id IN (${fleetDevices})`,
      ),
    };
    const sent = {
      telemetry: summary.telemetry.produced,
      events: summary.outbox.enqueued.event,
      chargingRecords: summary.outbox.enqueued.charging_record,
    };
    expect(stored).toEqual(sent);
    return sent;
  } finally {
    await db.close();
  }
}
