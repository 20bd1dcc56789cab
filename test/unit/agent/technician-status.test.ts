import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type AgentStore, openAgentStore } from '../../../agent/store/agent-store.js';
import {
  collectCommands,
  collectSchedules,
  renderCommands,
  renderSchedules,
} from '../../../agent/technician/listings.js';
import { renderStatus } from '../../../agent/technician/render-status.js';
import { collectStatus, statusExitCode } from '../../../agent/technician/status.js';
import { tempDir } from '../../helpers/agent.js';

/** `status` and `schedules` from a store at a fixed instant: health rules, in force now and the next change. */

const T0 = Date.parse('2026-03-27T21:30:00Z'); // 22:30 in Berlin (CET)
const iso = (ms: number) => new Date(ms).toISOString();

describe('technician status', () => {
  let tmp: ReturnType<typeof tempDir>;
  let store: AgentStore;
  const alive = () => true;

  beforeEach(() => {
    tmp = tempDir('tech-status-');
    store = openAgentStore(tmp.dir, { now: () => T0 });
    store.saveConnectors([
      { connectorId: 1, ratedPowerKw: 22, v2gCapable: false },
      { connectorId: 2, ratedPowerKw: 50, v2gCapable: true },
    ]);
    store.setState('agent_process', { pid: 4242, startedAt: iso(T0 - 3_600_000), version: '0.1.0' });
    store.setState('run_config', { platformUrl: 'https://platform.example:8443', sn: 'SN-1' });
  });
  afterEach(() => {
    store.close();
    tmp.remove();
  });

  function register() {
    store.saveIdentity({
      deviceId: 'dev_1',
      secret: 'the-device-secret',
      sn: 'SN-1',
      platformUrl: 'https://platform.example:8443',
      registeredAt: iso(T0 - 86_400_000),
    });
    store.saveToken({ accessToken: 'the-access-token', expiresAt: iso(T0 + 3_600_000), obtainedAt: iso(T0) });
    store.setState('last_heartbeat', {
      at: iso(T0 - 20_000),
      ok: true,
      status: 'available',
      roundTripMs: 42,
    });
    store.setState('clock_skew', { ms: 300, at: iso(T0 - 20_000) });
  }

  it('is not_registered (exit 5) before the agent has an identity, and shows the last error', () => {
    store.setState('last_error', { at: iso(T0 - 5_000), where: 'register', message: 'HTTP 403 code 2003' });
    const r = collectStatus(store, { dataDir: tmp.dir, now: T0, isAlive: alive });
    expect(r.state).toBe('not_registered');
    expect(statusExitCode(r.state)).toBe(5);
    expect(r.platform_url).toBe('https://platform.example:8443');
    expect(r.last_error?.message).toMatch(/403/);
    expect(renderStatus(r)).toMatch(/NOT REGISTERED/);
  });

  it('is healthy (exit 0) with a recent heartbeat, and never shows the secret or the token', () => {
    register();
    const r = collectStatus(store, { dataDir: tmp.dir, now: T0, isAlive: alive });
    expect(r.problems).toEqual([]);
    expect(r.state).toBe('healthy');
    expect(statusExitCode(r.state)).toBe(0);
    expect(r.token).toMatchObject({ expired: false, expires_in_seconds: 3600 });
    const text = `${JSON.stringify(r)}${renderStatus(r)}`;
    expect(text).not.toContain('the-device-secret');
    expect(text).not.toContain('the-access-token');
  });

  it('shows a secret rotation under way, still healthy, without the secret', () => {
    register();
    let r = collectStatus(store, { dataDir: tmp.dir, now: T0, isAlive: alive });
    expect(r.identity).toMatchObject({ secret_rotated_at: null, secret_rotation_pending_since: null });
    expect(renderStatus(r)).toMatch(/Secret +never rotated/);
    store.savePendingSecret('the-new-secret', iso(T0 - 60_000));
    r = collectStatus(store, { dataDir: tmp.dir, now: T0, isAlive: alive });
    expect(r.state).toBe('healthy');
    expect(r.identity).toMatchObject({ secret_rotation_pending_since: iso(T0 - 60_000) });
    const text = `${JSON.stringify(r)}${renderStatus(r)}`;
    expect(text).toMatch(/rotation under way \(new secret stored 1 min ago\)/);
    expect(text).not.toContain('the-new-secret');
    store.promotePendingSecret('the-new-secret', iso(T0));
    r = collectStatus(store, { dataDir: tmp.dir, now: T0, isAlive: alive });
    expect(r.identity).toMatchObject({ secret_rotated_at: iso(T0), secret_rotation_pending_since: null });
    expect(renderStatus(r)).toMatch(/Secret +rotated /);
  });

  it('is degraded (exit 4) for each reason, and says which', () => {
    register();
    const cases: Array<[string, () => void, RegExp]> = [
      [
        'stale heartbeat',
        () => store.setState('last_heartbeat', { at: iso(T0 - 95_000), ok: true }),
        /more than 90 s/,
      ],
      [
        'failed heartbeat',
        () => store.setState('last_heartbeat', { at: iso(T0 - 5_000), ok: false, error: 'ECONNREFUSED' }),
        /heartbeat failed .*ECONNREFUSED/,
      ],
      [
        'clock skew',
        () => store.setState('clock_skew', { ms: -7_500, at: iso(T0) }),
        /clock is off by -7\.5 s/,
      ],
    ];
    for (const [name, spoil, message] of cases) {
      register();
      spoil();
      const r = collectStatus(store, { dataDir: tmp.dir, now: T0, isAlive: alive });
      expect(r.state, name).toBe('degraded');
      expect(statusExitCode(r.state)).toBe(4);
      expect(r.problems.join('\n'), name).toMatch(message);
    }
    register();
    const r = collectStatus(store, { dataDir: tmp.dir, now: T0, isAlive: () => false });
    expect(r.state).toBe('degraded');
    expect(r.agent).toMatchObject({ running: false, pid: 4242 });
    expect(r.problems[0]).toMatch(/not running .*did not stop cleanly/);
  });

  it('evaluates what is in force now and the next real change, stepping over edges that change nothing', () => {
    register();
    store.upsertSchedule(
      1,
      {
        schedule_id: 'night',
        enabled: true,
        type: 'daily',
        // 01:00-06:00 Berlin: tonight from 00:00Z.
        time_slots: [{ start: '01:00', end: '06:00', power_limit: 11, action: 'charge' }],
        timezone: 'Europe/Berlin',
      },
      'cmd_s',
    );
    store.upsertLimit({
      control_id: 'ctl_1',
      kind: 'power_limit',
      power_limit_percent: 40,
      starts_at: iso(T0 - 60_000),
      ends_at: iso(T0 + 15 * 60_000),
      commandId: 'cmd_l',
      receivedAt: iso(T0 - 60_000),
    });
    const r = collectStatus(store, { dataDir: tmp.dir, now: T0, isAlive: alive });
    const [c1, c2] = r.connectors;
    // Connector 1: outside its slot until 01:00 Berlin = 00:00Z; the limit ending at 21:45Z changes nothing.
    expect(c1?.in_force).toMatchObject({ mode: 'idle', schedule_id: null, limit_ids: ['ctl_1'] });
    expect(c1?.next_change).toMatchObject({
      at: '2026-03-28T00:00:00.000Z',
      mode: 'charge',
      power_limit_kw: 11,
    });
    // Connector 2: unrestricted but capped at 40 % of 50 kW until the limit ends.
    expect(c2?.in_force).toMatchObject({ mode: 'charge', power_limit_kw: 20, limit_ids: ['ctl_1'] });
    expect(c2?.next_change).toMatchObject({ at: iso(T0 + 15 * 60_000), mode: 'charge', power_limit_kw: 50 });
    expect(r.limits[0]).toMatchObject({ control_id: 'ctl_1', active: true });

    const s = collectSchedules(store, T0);
    expect(s.connectors[0]?.schedules[0]).toMatchObject({
      in_effect: true,
      schedule: { schedule_id: 'night' },
    });
    expect(s.connectors[0]?.next_change?.at).toBe('2026-03-28T00:00:00.000Z');
    expect(s.limits[0]).toMatchObject({ control_id: 'ctl_1', command_id: 'cmd_l', active: true });
  });

  it('prints what came from the platform with its control characters escaped', () => {
    register();
    const hostile = 'peak\u001b[2J\u001b]0;owned\u0007\u009b31m\nFAKE LINE\u202e';
    store.upsertLimit({
      control_id: 'ctl_esc',
      kind: 'power_limit',
      power_limit_percent: 40,
      starts_at: iso(T0 - 60_000),
      ends_at: iso(T0 + 15 * 60_000),
      reason: hostile,
      commandId: 'cmd_esc',
      receivedAt: iso(T0 - 60_000),
    });
    store.journalInsert(
      {
        commandId: 'cmd_esc',
        command: 'stop',
        params: { connector_id: 1, reason: hostile },
        expiry: iso(T0),
      },
      iso(T0 - 60_000),
    );
    store.recordCommandStatus('cmd_esc', [{ status: 'rejected', reason: hostile }], iso(T0 - 50_000));
    store.setState('last_error', { at: iso(T0 - 5_000), where: 'heartbeat', message: hostile });
    const outputs = [
      renderStatus(collectStatus(store, { dataDir: tmp.dir, now: T0, isAlive: alive })),
      renderSchedules(collectSchedules(store, T0)),
      renderCommands(collectCommands(store, 10), T0),
    ];
    for (const out of outputs) {
      // Line breaks of the report itself only; not one control character of the platform's text.
      // biome-ignore lint/suspicious/noControlCharactersInRegex: the point of the check
      expect(out).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202e]/);
      expect(out).not.toMatch(/^FAKE LINE/m);
      expect(out).toContain('peak\\e[2J');
    }
  });
});
