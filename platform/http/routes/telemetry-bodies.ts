import { TelemetryBatchRequest, TelemetryRecord } from '../../../shared/index.js';
import { arrayBounds, compileFlatCheck } from '../flat-body-check.js';

/**
 * The quick checks of the telemetry bodies (flat-body-check.ts): a charger sends one every 5 s per connector,
 * and a backlog of up to 500 records at once. What they leave (phase details, any bad value) zod parses.
 */
export const quickTelemetryRecord = compileFlatCheck(TelemetryRecord, [
  // The schema's refinement (shared/device-api.ts): a connector reporting `discharging` has negative power.
  (t) => t.state !== 'discharging' || (typeof t.power === 'number' && t.power < 0),
]);

const batchItems = arrayBounds(TelemetryBatchRequest, 'records');

export function quickTelemetryBatch(input: unknown): { records: TelemetryRecord[] } | undefined {
  if (typeof input !== 'object' || input === null) return undefined;
  const keys = Object.keys(input);
  if (keys.length !== 1 || keys[0] !== 'records') return undefined;
  const { records } = input as { records: unknown };
  if (!Array.isArray(records) || records.length < batchItems.min || records.length > batchItems.max)
    return undefined;
  for (const record of records) if (quickTelemetryRecord(record) === undefined) return undefined;
  return input as { records: TelemetryRecord[] };
}
