import { expect } from 'vitest';
import type { FleetSummary } from '../../simulators/fleet/fleet-runner.js';

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
  expect(summary.outbox.refused).toEqual({ telemetry: 0, event: 0, charging_record: 0, command_status: 0 });
  expect(summary.telemetry.refused).toBe(0);
}
