import { describe, expect, it } from 'vitest';
import { decideConnector, planActions } from '../../../agent/core/connector-policy.js';
import { toDeviceEvent } from '../../../agent/core/device-events.js';
import type { FlexibilityLimit } from '../../../agent/core/schedule-engine.js';
import {
  advanceSession,
  openSession,
  readingBreaksSession,
  toChargingRecord,
} from '../../../agent/core/sessions.js';
import { telemetryDue, toTelemetryRecord } from '../../../agent/core/telemetry.js';
import type { ConnectorInfo, ConnectorReading } from '../../../agent/hal.js';
import { deviceStatusOf, measureSkewMs } from '../../../agent/link/heartbeat-loop.js';
import type { SessionRow } from '../../../agent/store/agent-store.js';
import { ChargingRecordUpload } from '../../../shared/device-api.js';

const T0 = Date.parse('2026-04-01T10:00:00Z');
const reading = (over: Partial<ConnectorReading> = {}): ConnectorReading => ({
  connectorId: 1,
  state: 'charging',
  voltageV: 230.04,
  currentA: 15.9421,
  powerKw: 11.0004,
  energyKwh: 100,
  energyExportedKwh: 0,
  vehiclePresent: true,
  soc: 40.7,
  temperatureC: 25.55,
  faultCode: 0,
  ...over,
});
const v2g: ConnectorInfo = { connectorId: 1, ratedPowerKw: 22, v2gCapable: true };

describe('telemetry cadence and records', () => {
  it('is due at once on a change of state, every 5 s while active and every 60 s otherwise', () => {
    expect(telemetryDue(undefined, 'idle', T0)).toBe(true);
    expect(telemetryDue({ at: T0, state: 'idle' }, 'charging', T0 + 1)).toBe(true);
    expect(telemetryDue({ at: T0, state: 'charging' }, 'charging', T0 + 4_000)).toBe(false);
    expect(telemetryDue({ at: T0, state: 'charging' }, 'charging', T0 + 4_900)).toBe(true); // a tick a hair early
    expect(telemetryDue({ at: T0, state: 'idle' }, 'idle', T0 + 30_000)).toBe(false);
    expect(telemetryDue({ at: T0, state: 'idle' }, 'idle', T0 + 60_000)).toBe(true);
  });

  it('builds a valid wire record; power is negative while discharging, even after rounding', () => {
    expect(toTelemetryRecord(reading(), T0, 2.5)).toEqual({
      timestamp: '2026-04-01T10:00:00.000Z',
      connector_id: 1,
      state: 'charging',
      voltage: 230,
      current: 15.94,
      power: 11,
      energy_delivered: 2.5,
      soc: 40,
      temperature: 25.6,
    });
    expect(toTelemetryRecord(reading({ state: 'discharging', powerKw: -0.0002 }), T0, 0)?.power).toBe(-0.001);
    expect(toTelemetryRecord(reading({ state: 'discharging', powerKw: -7.2 }), T0, 0)?.power).toBe(-7.2);
    expect(toTelemetryRecord(reading({ temperatureC: 900 }), T0, 0)).toBeUndefined();
  });
});

describe('sessions to charging records', () => {
  it('accounts energy from the meter, max and average power, SOC start and end', () => {
    let s: SessionRow = openSession(reading({ energyKwh: 100, soc: 30 }), T0, 'rec-1');
    s = advanceSession(s, reading({ energyKwh: 105, powerKw: 22, soc: 40 }), T0 + 15 * 60_000);
    s = advanceSession(s, reading({ energyKwh: 111, powerKw: 11, soc: 50 }), T0 + 30 * 60_000);
    const record = toChargingRecord(s, new Date(T0 + 30 * 60_000).toISOString());
    expect(record).toEqual({
      record_id: 'rec-1',
      connector_id: 1,
      start_time: '2026-04-01T10:00:00.000Z',
      end_time: '2026-04-01T10:30:00.000Z',
      energy: 11,
      max_power: 22,
      avg_power: 22,
      meter_start: 100,
      meter_end: 111,
      vehicle_info: { soc_start: 30, soc_end: 50 },
    });
    expect(ChargingRecordUpload.safeParse(record).success).toBe(true);
  });

  it('records an export-only session with negative powers', () => {
    let s = openSession(reading({ state: 'discharging', powerKw: -5, energyExportedKwh: 2 }), T0, 'rec-2');
    s = advanceSession(
      s,
      reading({ state: 'discharging', powerKw: -7, energyExportedKwh: 5.5 }),
      T0 + 3_600_000,
    );
    const record = toChargingRecord(s, new Date(T0 + 3_600_000).toISOString());
    expect(record).toMatchObject({ energy: 0, max_power: -7, avg_power: -3.5 });
    expect(ChargingRecordUpload.safeParse(record).success).toBe(true);
  });

  it('notices a meter that went backwards (the hardware restarted)', () => {
    const s = openSession(reading({ energyKwh: 100 }), T0, 'rec-3');
    expect(readingBreaksSession(s, reading({ energyKwh: 100.5 }))).toBe(false);
    expect(readingBreaksSession(s, reading({ energyKwh: 0 }))).toBe(true);
  });
});

describe('connector policy', () => {
  const limits: FlexibilityLimit[] = [
    {
      control_id: 'ctl',
      kind: 'power_limit',
      power_limit_percent: 50,
      starts_at: '2026-04-01T09:00:00Z',
      ends_at: '2026-04-01T11:00:00Z',
    },
  ];

  it('a start override charges outside the schedule, still under flexibility limits, until target_soc', () => {
    const schedules = [
      {
        schedule_id: 'night',
        enabled: true,
        type: 'daily' as const,
        time_slots: [{ start: '22:00', end: '06:00', action: 'charge' as const }],
        timezone: 'UTC',
      },
    ];
    const base = { connector: v2g, schedules, limits, now: T0, reading: reading({ soc: 50 }) };
    expect(decideConnector(base).mode).toBe('idle');
    const started = decideConnector({
      ...base,
      override: { kind: 'start', commandId: 'c', since: 'x', targetSoc: 80 },
    });
    expect(started).toMatchObject({
      mode: 'charge',
      powerLimitKw: 11,
      source: 'override',
      nextChangeAt: Date.parse('2026-04-01T11:00:00Z'),
    });
    expect(started.reason).toBe('started by command c; limited to 50% by control ctl');
    expect(
      decideConnector({
        ...base,
        reading: reading({ soc: 80 }),
        override: { kind: 'start', commandId: 'c', since: 'x', targetSoc: 80 },
      }).mode,
    ).toBe('idle');
  });

  it('a discharge override ends at its window and at min_soc', () => {
    const override = {
      kind: 'discharge' as const,
      commandId: 'd',
      since: 'x',
      until: '2026-04-01T10:30:00Z',
      powerKw: 20,
      minSoc: 30,
    };
    const now = decideConnector({
      connector: v2g,
      schedules: [],
      limits,
      override,
      reading: reading({ soc: 50 }),
      now: T0,
    });
    expect(now).toMatchObject({
      mode: 'discharge',
      powerLimitKw: 11,
      nextChangeAt: Date.parse('2026-04-01T10:30:00Z'),
    });
    expect(
      decideConnector({
        connector: v2g,
        schedules: [],
        limits: [],
        override,
        reading: reading({ soc: 30 }),
        now: T0,
      }).mode,
    ).toBe('idle');
    expect(
      decideConnector({
        connector: v2g,
        schedules: [],
        limits: [],
        override,
        reading: reading(),
        now: Date.parse('2026-04-01T10:30:00Z'),
      }).reason,
    ).toMatch(/no schedule in effect/);
  });

  it('plans the HAL calls: the cap first, then start or stop; nothing without a vehicle', () => {
    const charge = decideConnector({ connector: v2g, schedules: [], limits: [], now: T0 });
    expect(planActions(charge, reading({ state: 'idle' }), {})).toEqual([
      { type: 'setPowerLimit', kw: 22 },
      { type: 'startCharging' },
    ]);
    expect(planActions(charge, reading({ state: 'charging' }), { powerLimitKw: 22 })).toEqual([]);
    expect(
      planActions(charge, reading({ state: 'idle', vehiclePresent: false }), { powerLimitKw: 22 }),
    ).toEqual([]);
    expect(planActions(charge, reading({ state: 'idle', faultCode: 101 }), { powerLimitKw: 22 })).toEqual([]);
    const idle = { ...charge, mode: 'idle' as const, powerLimitKw: 0 };
    expect(planActions(idle, reading(), { powerLimitKw: 22 })).toEqual([
      { type: 'setPowerLimit', kw: 0 },
      { type: 'stopCharging' },
    ]);
    expect(planActions(charge, undefined, {})).toEqual([{ type: 'setPowerLimit', kw: 22 }]);
  });
});

describe('heartbeat and events', () => {
  it('reports fault with the first fault code, and measures skew from the request midpoint', () => {
    expect(deviceStatusOf([reading(), reading({ connectorId: 2, faultCode: 102 })])).toEqual({
      status: 'fault',
      fault_code: 102,
    });
    expect(deviceStatusOf([reading()])).toEqual({ status: 'online', fault_code: 0 });
    expect(measureSkewMs('2026-04-01T10:00:10.000Z', T0, T0 + 200)).toBe(9_900);
  });

  it('maps hardware events to charger events (state changes are telemetry, not events)', () => {
    const at = new Date(T0);
    expect(toDeviceEvent({ type: 'fault_raised', connectorId: 2, at, faultCode: 101 }, 'ev-1')).toEqual({
      event_id: 'ev-1',
      kind: 'fault_raised',
      severity: 'error',
      timestamp: '2026-04-01T10:00:00.000Z',
      connector_id: 2,
      message: 'fault 101',
      data: { fault_code: 101 },
    });
    expect(
      toDeviceEvent({ type: 'state_changed', connectorId: 1, at, from: 'idle', to: 'charging' }, 'x'),
    ).toBeUndefined();
  });
});
