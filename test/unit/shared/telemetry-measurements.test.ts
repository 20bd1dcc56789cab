import { describe, expect, it } from 'vitest';
import * as z from 'zod/mini';
import { TELEMETRY_MEASUREMENTS, TelemetryRecord, toTimestamp } from '../../../shared/index.js';

/** The record's fields that are not measurements: when, where, what state, and the per-phase detail. */
const NOT_MEASUREMENTS = ['timestamp', 'connector_id', 'state', 'phase_details'];

describe('TELEMETRY_MEASUREMENTS', () => {
  it('lists every other field of a telemetry record, so storage derived from it keeps them all', () => {
    const fields = Object.keys(TelemetryRecord.shape).filter((k) => !NOT_MEASUREMENTS.includes(k));
    expect([...TELEMETRY_MEASUREMENTS].sort()).toEqual(fields.sort());
  });

  it.each(TELEMETRY_MEASUREMENTS)('%s is an optional number', (field) => {
    const base = { timestamp: toTimestamp(0), connector_id: 1, state: 'idle' };
    expect(z.safeParse(TelemetryRecord, base).success).toBe(true);
    expect(z.safeParse(TelemetryRecord, { ...base, [field]: 1 }).success).toBe(true);
    expect(z.safeParse(TelemetryRecord, { ...base, [field]: 'one' }).success).toBe(false);
  });
});

describe('toTimestamp', () => {
  it.each([
    [0, '1970-01-01T00:00:00.000Z'],
    [1_700_000_000_123, '2023-11-14T22:13:20.123Z'],
  ])('%d is %s', (ms, text) => {
    expect(toTimestamp(ms)).toBe(text);
  });
});
