import { describe, expect, it } from 'vitest';
import { checkCommand } from '../../../agent/core/command-checks.js';
import { connectors } from '../../helpers/executor-rig.js';

/** The agent's checks of a command before it runs (agent/core/command-checks.ts): what passes, what is refused and why. */

describe('checkCommand', () => {
  const ctx = { now: Date.parse('2026-05-01T12:00:00Z'), connectors };
  const expiry = '2026-05-01T12:15:00Z';

  it('accepts each known command with valid params', () => {
    expect(checkCommand({ command: 'stop', params: { connector_id: 1 }, expiry }, ctx).ok).toBe(true);
    expect(
      checkCommand({ command: 'start', params: { connector_id: 1, target_soc: 80 }, expiry }, ctx).ok,
    ).toBe(true);
    expect(
      checkCommand(
        {
          command: 'discharge',
          params: { connector_id: 2, discharge_power: 5, duration: 60, min_soc: 20 },
          expiry,
        },
        ctx,
      ).ok,
    ).toBe(true);
  });

  it('refuses, with reasons a person can act on', () => {
    const reason = (c: Parameters<typeof checkCommand>[0]) => {
      const r = checkCommand(c, ctx);
      return r.ok ? 'ok' : r.reason;
    };
    expect(reason({ command: 'reboot', params: {}, expiry })).toMatch(/unsupported command "reboot"/);
    expect(reason({ command: 'stop', params: { connector_id: 1 }, expiry: '2026-05-01T11:59:59Z' })).toMatch(
      /expired/,
    );
    expect(reason({ command: 'stop', params: { connector_id: 7 }, expiry })).toMatch(
      /unknown connector 7 \(this charger has 1, 2\)/,
    );
    expect(reason({ command: 'stop', params: {}, expiry })).toMatch(/invalid params: connector_id/);
    expect(
      reason({
        command: 'discharge',
        params: { connector_id: 1, discharge_power: 5, duration: 60, min_soc: 20 },
        expiry,
      }),
    ).toMatch(/no V2G hardware/);
    expect(
      reason({
        command: 'set_schedule',
        params: {
          connector_id: 1,
          schedule: {
            schedule_id: 's',
            type: 'daily',
            time_slots: [{ start: '10:00', end: '11:00', action: 'discharge' }],
            timezone: 'Europe/Berlin',
          },
        },
        expiry,
      }),
    ).toMatch(/discharge slots/);
    expect(
      reason({
        command: 'set_power_limit',
        params: {
          control_id: 'c',
          power_limit_percent: 140,
          duration: 60,
          starts_at: expiry,
          ends_at: expiry,
        },
        expiry,
      }),
    ).toMatch(/invalid params: power_limit_percent/);
  });
});
