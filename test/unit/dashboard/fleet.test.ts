import { describe, expect, it } from 'vitest';
import {
  activityOf,
  applyMessage,
  applyTelemetry,
  type Devices,
  livePower,
  summarize,
  type TelemetryMessage,
} from '../../../dashboard/src/fleet.js';
import type { Device } from '../../../shared/resources.js';

const T0 = '2026-11-25T10:00:00.000Z';
const T1 = '2026-11-25T10:00:05.000Z';

function device(id: string, status: 'online' | 'offline', states: Array<[string, number?]>): Device {
  return {
    device_id: id,
    status,
    connectors: states.map(([s, p], i) => ({
      connector_id: i + 1,
      status: s as 'idle',
      power: p,
      last_telemetry_time: T0,
    })),
  };
}

function telemetry(
  deviceId: string,
  connector: number,
  state: TelemetryMessage['state'],
  power: number,
  at = T1,
) {
  return {
    type: 'telemetry',
    device_id: deviceId,
    timestamp: at,
    connector_id: connector,
    state,
    power,
  } as const;
}

describe('dashboard fleet rules', () => {
  it.each([
    ['online charging', device('a', 'online', [['charging', 11]]), 11],
    ['online discharging (negative)', device('a', 'online', [['discharging', -7]]), -7],
    ['online idle with a stale power', device('a', 'online', [['idle', 3]]), 0],
    ['offline with a last reading of 17.9 kW', device('a', 'offline', [['charging', 17.9]]), 0],
  ])('live power: %s', (_name, d, expected) => {
    expect(livePower(d, d.connectors![0]!)).toBe(expected);
  });

  it.each([
    [device('a', 'offline', [['charging', 5]]), 'offline'],
    [device('a', 'online', [['idle'], ['fault']]), 'fault'],
    [
      device('a', 'online', [
        ['charging', 5],
        ['discharging', -3],
      ]),
      'discharging',
    ],
    [device('a', 'online', [['charging', 5], ['idle']]), 'charging'],
    [device('a', 'online', [['idle']]), 'idle'],
  ])('activity %#', (d, expected) => {
    expect(activityOf(d)).toBe(expected);
  });

  it('summarizes counts and power, ignoring offline chargers power', () => {
    const devices: Devices = new Map([
      [
        'a',
        device('a', 'online', [
          ['charging', 11],
          ['charging', 7.4],
        ]),
      ],
      ['b', device('b', 'online', [['discharging', -5], ['idle']])],
      ['c', device('c', 'offline', [['charging', 17.9]])],
      ['d', device('d', 'online', [['fault']])],
    ]);
    expect(summarize(devices)).toEqual({
      total: 4,
      online: 3,
      offline: 1,
      charging: 1,
      discharging: 1,
      faulted: 1,
      importKw: 18.4,
      exportKw: 5,
    });
  });

  it('applies telemetry to its connector and marks the charger online', () => {
    const before = device('a', 'offline', [['idle'], ['idle']]);
    const after = applyTelemetry(before, { ...telemetry('a', 2, 'charging', 11), soc: 40 });
    expect(after.status).toBe('online');
    expect(after.connectors?.[1]).toMatchObject({
      status: 'charging',
      power: 11,
      soc: 40,
      last_telemetry_time: T1,
    });
    expect(after.connectors?.[0]).toEqual(before.connectors?.[0]);
    expect(before.connectors?.[1]?.status).toBe('idle');
  });

  it('ignores telemetry older than what is shown (a late batch after an outage)', () => {
    const shown = applyTelemetry(device('a', 'online', [['idle']]), telemetry('a', 1, 'charging', 11, T1));
    expect(applyTelemetry(shown, telemetry('a', 1, 'idle', 0, T0))).toBe(shown);
  });

  it('adds a connector first heard on the stream, in order', () => {
    const after = applyTelemetry(device('a', 'online', [['idle']]), telemetry('a', 3, 'charging', 7));
    expect(after.connectors?.map((c) => c.connector_id)).toEqual([1, 3]);
  });

  it('names a device it does not know, and leaves the map alone', () => {
    const devices: Devices = new Map([['a', device('a', 'online', [['idle']])]]);
    const result = applyMessage(devices, telemetry('z', 1, 'charging', 11));
    expect(result).toEqual({ devices, unknown: 'z' });
  });

  it('returns the same map when a status message changes nothing', () => {
    const devices: Devices = new Map([['a', device('a', 'online', [['idle']])]]);
    expect(
      applyMessage(devices, { type: 'device_status', device_id: 'a', status: 'online', at: T1 }).devices,
    ).toBe(devices);
    const off = applyMessage(devices, {
      type: 'device_status',
      device_id: 'a',
      status: 'offline',
      at: T1,
    }).devices;
    expect(off.get('a')?.status).toBe('offline');
    expect(devices.get('a')?.status).toBe('online');
  });
});
