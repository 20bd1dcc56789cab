import { describe, expect, it } from 'vitest';
import { applyTelemetry, connectorStatus } from '../../../dashboard/src/fleet.js';
import {
  availabilityNote,
  boundsText,
  configurationEdit,
  configurationFieldOf,
  DEFAULT_DIAGNOSTICS_WINDOW,
  diagnosticsFileName,
  diagnosticsPending,
  diagnosticsRequest,
  newBoot,
  reportedHolds,
  resetConsequence,
  unknownReportedKeys,
  valueText,
} from '../../../dashboard/src/maintenance-rules.js';
import { DIAGNOSTICS_DEFAULT_WINDOW_HOURS } from '../../../shared/diagnostics.js';

/** The charger page's remote-maintenance rules (dashboard/src/maintenance-rules.ts), by table. */

describe('the configuration table', () => {
  it.each([
    ['telemetry_interval_seconds', '1–60 s'],
    ['secret_rotation_days', '0–3650 days'],
    ['log_level', 'debug, info, warn, error'],
  ] as const)('shows the bounds of %s as %s', (key, text) => {
    expect(boundsText(key)).toBe(text);
  });

  it('lists reported keys it does not know, sorted', () => {
    expect(unknownReportedKeys({ log_level: 'info', zeta: 1, alpha: true })).toEqual(['alpha', 'zeta']);
    expect(valueText(undefined)).toBe('');
    expect(valueText(false)).toBe('false');
  });
});

describe('an edit of the configuration', () => {
  const from = {
    telemetry_interval_seconds: '5',
    idle_telemetry_interval_seconds: '60',
    heartbeat_interval_seconds: '30',
    command_poll_wait_seconds: '25',
    log_level: 'info',
    secret_rotation_days: '90',
  };

  it.each([
    ['nothing changed', {}, {}, {}],
    ['one number', { telemetry_interval_seconds: '2' }, { telemetry_interval_seconds: 2 }, {}],
    ['spaces around it', { telemetry_interval_seconds: ' 2 ' }, { telemetry_interval_seconds: 2 }, {}],
    ['the same value typed again', { telemetry_interval_seconds: '5' }, {}, {}],
    ['a bound', { command_poll_wait_seconds: '0' }, { command_poll_wait_seconds: 0 }, {}],
    ['the level', { log_level: 'debug' }, { log_level: 'debug' }, {}],
    [
      'two keys',
      { heartbeat_interval_seconds: '300', secret_rotation_days: '0' },
      { heartbeat_interval_seconds: 300, secret_rotation_days: 0 },
      {},
    ],
    [
      'above the bound',
      { telemetry_interval_seconds: '61' },
      {},
      { telemetry_interval_seconds: 'must be a whole number from 1 to 60' },
    ],
    [
      'below the bound',
      { idle_telemetry_interval_seconds: '9' },
      {},
      { idle_telemetry_interval_seconds: 'must be a whole number from 10 to 3600' },
    ],
    [
      'a fraction',
      { telemetry_interval_seconds: '2.5' },
      {},
      { telemetry_interval_seconds: 'must be a whole number from 1 to 60' },
    ],
    [
      'emptied',
      { telemetry_interval_seconds: '' },
      {},
      { telemetry_interval_seconds: 'must be a whole number from 1 to 60' },
    ],
    [
      'text',
      { heartbeat_interval_seconds: 'often' },
      {},
      { heartbeat_interval_seconds: 'must be a whole number from 10 to 300' },
    ],
    [
      'an unknown level',
      { log_level: 'trace' },
      {},
      { log_level: 'must be one of debug, info, warn, error' },
    ],
    [
      'a good and a bad key',
      { telemetry_interval_seconds: '2', log_level: 'loud' },
      { telemetry_interval_seconds: 2 },
      { log_level: 'must be one of debug, info, warn, error' },
    ],
  ])('%s', (_, typed, values, errors) => {
    expect(configurationEdit({ ...from, ...typed }, from)).toEqual({ values, errors });
  });

  it('names the field of an API error only when it is a key of the table', () => {
    expect(configurationFieldOf({ field: 'values.telemetry_interval_seconds' })).toBe(
      'telemetry_interval_seconds',
    );
    expect(configurationFieldOf({ field: 'values.colour' })).toBeUndefined();
    expect(configurationFieldOf({ field: 'values' })).toBeUndefined();
    expect(configurationFieldOf({ field: 'mode' })).toBeUndefined();
    expect(configurationFieldOf(undefined)).toBeUndefined();
  });

  it('knows when the report holds what was sent', () => {
    const reported = { telemetry_interval_seconds: 2, log_level: 'info' };
    expect(reportedHolds(reported, { telemetry_interval_seconds: 2 })).toBe(true);
    expect(reportedHolds(reported, { telemetry_interval_seconds: 2, log_level: 'debug' })).toBe(false);
    expect(reportedHolds({}, { log_level: 'info' })).toBe(false);
  });
});

describe('restart, availability', () => {
  it('says what a restart does before it is sent', () => {
    expect(resetConsequence('agent', 'when_idle')).toMatch(/agent restarts.*waits until no connector/);
    expect(resetConsequence('charger', 'immediate')).toMatch(/reboots: every session.*even while/);
  });

  it('finds the boot event that was not there before', () => {
    const before = new Set(['e1', 'e2']);
    const events = [
      { event_id: 'e3', kind: 'status' },
      { event_id: 'e4', kind: 'boot' },
      { event_id: 'e1', kind: 'boot' },
    ];
    expect(newBoot(events, before)?.event_id).toBe('e4');
    expect(newBoot(events.slice(2), before)).toBeUndefined();
  });

  it.each([
    [false, { connector_id: 1, available: false }, 'Out of service.'],
    [
      false,
      { connector_id: 1, available: false, effective: 'when_vehicle_leaves' },
      'Out of service once the current session ends.',
    ],
    [false, undefined, 'Out of service.'],
    [true, { connector_id: 1, available: true }, 'Back in service.'],
  ])('available %s with result %j: %s', (available, result, note) => {
    expect(availabilityNote(available, result)).toBe(note);
  });

  it.each([
    ['idle', false, 'unavailable'],
    ['charging', false, 'charging'],
    ['fault', false, 'fault'],
    ['idle', true, 'idle'],
    ['idle', undefined, 'idle'],
  ] as const)('a connector %s with available %s shows %s', (state, available, status) => {
    expect(connectorStatus(state, available)).toBe(status);
  });

  it('keeps an out-of-service connector unavailable as its idle telemetry comes in', () => {
    const device = {
      device_id: 'd1',
      status: 'online' as const,
      connectors: [{ connector_id: 1, status: 'charging' as const, available: false }],
    };
    const m = {
      type: 'telemetry' as const,
      device_id: 'd1',
      timestamp: '2026-11-25T10:00:05.000Z',
      connector_id: 1,
      state: 'idle' as const,
      power: 0,
    };
    expect(applyTelemetry(device, m).connectors?.[0]).toMatchObject({
      status: 'unavailable',
      available: false,
    });
  });
});

describe('diagnostics', () => {
  const now = Date.parse('2026-11-25T10:00:00.000Z');

  it.each([
    ['1h', '2026-11-25T09:00:00.000Z'],
    ['24h', '2026-11-24T10:00:00.000Z'],
    ['7d', '2026-11-18T10:00:00.000Z'],
  ] as const)('asks for the window %s ending now', (window, start) => {
    expect(diagnosticsRequest(window, now)).toEqual({
      start_time: start,
      end_time: '2026-11-25T10:00:00.000Z',
    });
  });

  it('defaults to the platform’s own default window', () => {
    const { start_time, end_time } = diagnosticsRequest(DEFAULT_DIAGNOSTICS_WINDOW, now);
    expect((Date.parse(end_time) - Date.parse(start_time)) / 3_600_000).toBe(
      DIAGNOSTICS_DEFAULT_WINDOW_HOURS,
    );
  });

  it.each([
    ['requested', true],
    ['uploading', true],
    ['available', false],
    ['failed', false],
  ] as const)('reads a %s archive again: %s', (status, again) => {
    expect(diagnosticsPending(status)).toBe(again);
  });

  it('saves an archive under its id', () => {
    expect(diagnosticsFileName('diag_abc')).toBe('diag_abc.tar.gz');
  });
});
