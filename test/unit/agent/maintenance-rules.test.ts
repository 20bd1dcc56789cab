import { describe, expect, it } from 'vitest';
import {
  availabilityAfter,
  availabilityAfterVehicleLeft,
  availabilityRefusal,
  outOfServiceReason,
} from '../../../agent/core/availability.js';
import { decideConnector } from '../../../agent/core/connector-policy.js';
import { describeChange, runningConfiguration } from '../../../agent/core/remote-configuration.js';
import type { ConnectorReading } from '../../../agent/hal.js';
import { DEFAULT_CONFIGURATION } from '../../../shared/configuration.js';

/** The pure rules of remote maintenance (agent/core/availability.ts, remote-configuration.ts), table-driven. */

const reading = (state: ConnectorReading['state'], vehiclePresent = true): ConnectorReading => ({
  connectorId: 1,
  state,
  voltageV: 230,
  currentA: 0,
  powerKw: state === 'charging' ? 11 : 0,
  energyKwh: 1,
  vehiclePresent,
  temperatureC: 25,
  faultCode: 0,
});
const at = '2026-11-27T10:00:00.000Z';

describe('availability', () => {
  it.each([
    [
      'idle, out of service at once',
      {},
      false,
      reading('idle'),
      { '1': { commandId: 'c1', since: at, afterVehicleLeaves: false } },
    ],
    [
      'no reading, out of service at once',
      {},
      false,
      undefined,
      { '1': { commandId: 'c1', since: at, afterVehicleLeaves: false } },
    ],
    [
      'charging: after the vehicle leaves',
      {},
      false,
      reading('charging'),
      { '1': { commandId: 'c1', since: at, afterVehicleLeaves: true } },
    ],
    [
      'discharging: after the vehicle leaves',
      {},
      false,
      reading('discharging'),
      { '1': { commandId: 'c1', since: at, afterVehicleLeaves: true } },
    ],
    [
      'back in service',
      { '1': { commandId: 'c0', since: at, afterVehicleLeaves: false } },
      true,
      reading('idle'),
      {},
    ],
    [
      'twice: the first stays',
      { '1': { commandId: 'c0', since: 'earlier', afterVehicleLeaves: false } },
      false,
      reading('charging'),
      { '1': { commandId: 'c0', since: 'earlier', afterVehicleLeaves: false } },
    ],
    [
      'another connector kept',
      { '2': { commandId: 'c0', since: at, afterVehicleLeaves: false } },
      true,
      reading('idle'),
      { '2': { commandId: 'c0', since: at, afterVehicleLeaves: false } },
    ],
  ] as const)('%s', (_name, current, available, r, expected) => {
    expect(availabilityAfter(current, { connectorId: 1, available, commandId: 'c1', at }, r)).toEqual(
      expected,
    );
  });

  it('a pending out-of-service holds once the vehicle leaves; nothing else changes', () => {
    const pending = { '1': { commandId: 'c1', since: at, afterVehicleLeaves: true } };
    expect(availabilityAfterVehicleLeft(pending, 1)).toEqual({
      '1': { ...pending['1'], afterVehicleLeaves: false },
    });
    expect(availabilityAfterVehicleLeft(pending, 2)).toBeUndefined();
    expect(
      availabilityAfterVehicleLeft({ '1': { ...pending['1'], afterVehicleLeaves: false } }, 1),
    ).toBeUndefined();
    expect(outOfServiceReason(pending['1'])).toBeUndefined();
    expect(outOfServiceReason({ ...pending['1'], afterVehicleLeaves: false })).toBe(
      'out of service (set unavailable by command c1)',
    );
    expect(availabilityRefusal(1, pending['1'])).toBe(
      'connector 1 is out of service (set unavailable by command c1)',
    );
    expect(availabilityRefusal(1, undefined)).toBeUndefined();
  });

  it('the control policy keeps an out-of-service connector idle over a start override, not a pending one', () => {
    const input = {
      connector: { connectorId: 1, ratedPowerKw: 22, v2gCapable: false },
      schedules: [],
      limits: [],
      override: { kind: 'start' as const, commandId: 's1', since: at },
      reading: reading('charging'),
      now: Date.parse(at),
    };
    expect(decideConnector(input).mode).toBe('charge');
    const held = { commandId: 'c1', since: at, afterVehicleLeaves: false };
    expect(decideConnector({ ...input, outOfService: held })).toMatchObject({
      mode: 'idle',
      powerLimitKw: 0,
      reason: 'out of service (set unavailable by command c1)',
      source: 'out_of_service',
    });
    expect(decideConnector({ ...input, outOfService: { ...held, afterVehicleLeaves: true } }).mode).toBe(
      'charge',
    );
  });
});

describe('remote configuration', () => {
  it.each([
    ['defaults', {}, undefined, DEFAULT_CONFIGURATION],
    [
      'the file over the defaults',
      { log_level: 'trace', secret_rotation_days: 0 },
      undefined,
      { ...DEFAULT_CONFIGURATION, log_level: 'trace', secret_rotation_days: 0 },
    ],
    [
      'the operator over the file',
      { log_level: 'trace' },
      { log_level: 'warn' as const },
      { ...DEFAULT_CONFIGURATION, log_level: 'warn' },
    ],
  ])('%s', (_name, file, remote, expected) => {
    expect(runningConfiguration(file, remote)).toEqual(expected);
  });

  it('describes a change by the keys it moves, in table order', () => {
    const before = runningConfiguration({}, undefined);
    expect(describeChange(before, runningConfiguration({}, { heartbeat_interval_seconds: 30 }))).toEqual([]);
    expect(
      describeChange(before, runningConfiguration({}, { log_level: 'error', telemetry_interval_seconds: 2 })),
    ).toEqual(['telemetry_interval_seconds 5 → 2', 'log_level info → error']);
  });
});
