import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { connectorStatus } from '../../../platform/domain/connector-status.js';
import {
  availabilityAfter,
  changedKeys,
  configurationFromEvents,
} from '../../../platform/domain/maintenance.js';
import { CONFIGURATION_KEYS } from '../../../shared/index.js';

/**
 * The pure rules of remote maintenance (DESIGN.md §20): what a finished `set_availability` sets, which
 * configuration report wins within one upload, how a connector's status reads, and that docs/api.md's
 * configuration table says what shared/configuration.ts holds.
 */

describe('availabilityAfter', () => {
  const availability = (status: string, params: Record<string, unknown>, command = 'set_availability') =>
    availabilityAfter({ command, status, params });

  it('answers the params of a set_availability that succeeded, and nothing otherwise', () => {
    expect(availability('succeeded', { connector_id: 2, available: false })).toEqual({
      connector_id: 2,
      available: false,
    });
    expect(availability('succeeded', { connector_id: 1, available: true })).toEqual({
      connector_id: 1,
      available: true,
    });
    for (const status of ['queued', 'delivered', 'accepted', 'failed', 'rejected', 'expired', 'cancelled'])
      expect(availability(status, { connector_id: 1, available: false }), status).toBeUndefined();
    expect(availability('succeeded', { connector_id: 1 }, 'unlock_connector')).toBeUndefined();
    // Params that are not what the platform queues (a row written by hand): nothing.
    expect(availability('succeeded', { connector_id: 1, available: 'no' })).toBeUndefined();
    expect(availability('succeeded', { connector_id: 0, available: false })).toBeUndefined();
  });
});

describe('configurationFromEvents', () => {
  const event = (kind: string, ts_ms: number, data: Record<string, unknown> | null) => ({
    kind,
    ts_ms,
    data,
  });

  it('takes the newest configuration_reported event, whatever the order, as the platform keeps it', () => {
    expect(configurationFromEvents([event('boot', 5, { version: '1.0.0' })])).toBeUndefined();
    expect(
      configurationFromEvents([
        event('configuration_reported', 20, {
          log_level: 'debug',
          telemetry_interval_seconds: 0,
          extra: 'kept',
        }),
        event('configuration_reported', 10, { log_level: 'warn' }),
        event('boot', 30, { version: '1.0.0' }),
      ]),
    ).toEqual({ values: { log_level: 'debug', extra: 'kept' }, reported_at_ms: 20 });
    // Of two at the same instant, the first; an event without data reports nothing known.
    expect(
      configurationFromEvents([
        event('configuration_reported', 7, null),
        event('configuration_reported', 7, {}),
      ]),
    ).toEqual({ values: {}, reported_at_ms: 7 });
  });
});

describe('changedKeys', () => {
  it.each([
    ['the first report: every key', undefined, { b: 1, a: 'x' }, ['a', 'b']],
    ['the same values: none', { a: 1, b: 'x' }, { b: 'x', a: 1 }, []],
    ['one value moved', { a: 1, b: 'x' }, { a: 2, b: 'x' }, ['a']],
    ['a key gone and one new', { a: 1, b: 'x' }, { a: 1, c: true }, ['b', 'c']],
  ])('%s', (_name, previous, next, expected) => {
    expect(changedKeys(previous, next)).toEqual(expected);
  });
});

describe('connectorStatus', () => {
  it('reads unavailable offline, before telemetry, and out of service while idle; a session shows as it is', () => {
    const cases: Array<[string | null, boolean, boolean, string]> = [
      ['charging', false, true, 'unavailable'],
      ['idle', false, false, 'unavailable'],
      [null, true, true, 'unavailable'],
      [null, true, false, 'unavailable'],
      ['idle', true, true, 'idle'],
      ['idle', true, false, 'unavailable'],
      ['charging', true, false, 'charging'],
      ['discharging', true, false, 'discharging'],
      ['fault', true, false, 'fault'],
      ['charging', true, true, 'charging'],
    ];
    for (const [state, online, available, expected] of cases)
      expect(connectorStatus(state, online, available), `${state} ${online} ${available}`).toBe(expected);
  });
});

describe('docs/api.md', () => {
  it('lists every configuration key with the type, bounds and default of shared/configuration.ts', () => {
    const doc = readFileSync(new URL('../../../docs/api.md', import.meta.url), 'utf8');
    const rows = new Map<string, string[]>();
    for (const line of doc.split('\n')) {
      const cells = line.split(/(?<!\\)\|/).map((c) => c.trim());
      const key = /^`([a-z_]+)`$/.exec(cells[1] ?? '')?.[1];
      if (key && key in CONFIGURATION_KEYS) rows.set(key, cells.slice(2, 5));
    }
    expect([...rows.keys()].sort()).toEqual(Object.keys(CONFIGURATION_KEYS).sort());
    for (const [key, spec] of Object.entries(CONFIGURATION_KEYS)) {
      const [type, bounds, defaultValue] = rows.get(key)!;
      if (spec.type === 'integer') {
        expect(type, key).toBe(`integer (${spec.unit})`);
        expect(bounds, key).toBe(`${spec.min}–${spec.max}`);
        expect(defaultValue, key).toBe(String(spec.default));
      } else {
        expect(type, key).toBe(spec.choices.map((c) => `\`${c}\``).join('\\|'));
        expect(defaultValue, key).toBe(`\`${spec.default}\``);
      }
    }
  });
});
