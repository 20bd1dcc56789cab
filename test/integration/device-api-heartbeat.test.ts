import { describe, expect, it } from 'vitest';
import { deviceCalls, expectValidation } from '../helpers/device-calls.js';
import { registerDevice } from '../helpers/platform.js';
import { platformPerFile } from '../helpers/platform-per-file.js';

/**
 * The charger-side surface (DESIGN.md §3, §4, §7) over real HTTPS and SQLite: the heartbeat, and the pending
 * commands it delivers. One platform for the file; every test uses its own tenant and serial numbers.
 */

const tp = platformPerFile();

const { advance, platformNow, isoNow, sn, tenant, freshToken, heartbeat, telemetry, operatorDevice } =
  deviceCalls(() => tp);

describe('POST /v1/device/heartbeat', () => {
  it('answers commands and server_time from the platform clock', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const res = await heartbeat(d.token);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      code: 0,
      message: 'success',
      data: { commands: [], server_time: expect.any(String) },
    });
    const serverTime = res.body.data.server_time as string;
    expect(new Date(serverTime).toISOString()).toBe(serverTime);
    // The fake clock is ahead of the wall clock (tp.now()): server_time follows the platform's clock.
    expect(Math.abs(Date.parse(serverTime) - platformNow())).toBeLessThan(5_000);
  });

  it('records the heartbeat: last_heartbeat shows on the operator view', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const before = await operatorDevice(t.token, d.deviceId);
    expect(before.last_heartbeat).toBeUndefined();
    const res = await heartbeat(d.token, { timestamp: isoNow(), status: 'fault', fault_code: 17 });
    expect(res.status).toBe(200);
    const view = await operatorDevice(t.token, d.deviceId);
    expect(view.last_heartbeat).toBe(res.body.data.server_time);
    // A charger reporting a fault is still connected.
    expect(view.status).toBe('online');
  });

  it.each(['timestamp', 'status', 'fault_code'])(
    'refuses a heartbeat without %s: 400/1001',
    async (field) => {
      const t = await tenant();
      const d = await registerDevice(tp, sn(), t.siteId);
      const body: Record<string, unknown> = { timestamp: isoNow(), status: 'online', fault_code: 0 };
      delete body[field];
      expectValidation(await heartbeat(d.token, body), field, null);
    },
  );

  it.each([
    ['status', 'sleeping'],
    ['status', 'ONLINE'],
    ['status', ''],
    ['fault_code', -1],
    ['fault_code', 1.5],
    ['fault_code', '0'],
    ['fault_code', 2_147_483_648],
    ['timestamp', 'yesterday'],
    ['timestamp', '2025-13-01T00:00:00Z'],
    ['timestamp', '2025-06-01 12:00:00'],
    ['timestamp', 1_750_000_000],
  ])('refuses %s %j: 400/1001', async (field, value) => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const body = { timestamp: isoNow(), status: 'online', fault_code: 0, [field]: value };
    expectValidation(await heartbeat(d.token, body), field, value);
  });

  it('accepts a timestamp with an explicit offset', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const res = await heartbeat(d.token, {
      timestamp: '2025-06-01T14:00:00+02:00',
      status: 'online',
      fault_code: 0,
    });
    expect(res.status).toBe(200);
  });

  describe('pending commands', () => {
    const schedule = {
      schedule_id: 'night',
      type: 'daily',
      time_slots: [{ start: '22:00', end: '06:00', power_limit: 11 }],
      timezone: 'Europe/Berlin',
    };

    it('delivers stop, schedule and flexibility commands with command_id, command, params and expiry', async () => {
      const t = await tenant();
      const d = await registerDevice(tp, sn(), t.siteId);

      const t0 = platformNow();
      const stop = await tp.http.post(`/v1/operator/devices/${d.deviceId}/connectors/1/stop`, {
        token: t.token,
        json: { reason: 'time_limit' },
      });
      expect(stop.status).toBe(200);
      expect(stop.body.data.status).toBe('queued');
      const sched = await tp.http.post(`/v1/operator/devices/${d.deviceId}/connectors/2/schedule`, {
        token: t.token,
        json: schedule,
      });
      expect(sched.status).toBe(200);
      const flex = await tp.http.post('/v1/operator/control/flexibility', {
        token: t.token,
        json: {
          target_type: 'site',
          target_ids: [t.siteId],
          command: 'set_power_limit',
          params: { power_limit_percent: 40, duration: 3_600, reason: 'grid peak' },
        },
      });
      expect(flex.status).toBe(200);
      expect(flex.body.data).toMatchObject({ status: 'executing', device_count: 1 });
      const t1 = platformNow();

      const res = await heartbeat(d.token);
      expect(res.status).toBe(200);
      const commands = res.body.data.commands as Array<Record<string, unknown>>;
      expect(commands).toHaveLength(3);
      for (const c of commands) {
        expect(Object.keys(c).sort()).toEqual(['command', 'command_id', 'expiry', 'params']);
        expect(new Date(c.expiry as string).toISOString()).toBe(c.expiry);
      }
      const byName = new Map(commands.map((c) => [c.command, c]));

      const stopCmd = byName.get('stop')!;
      expect(stopCmd.command_id).toBe(stop.body.data.command_id);
      expect(stopCmd.params).toEqual({ connector_id: 1, reason: 'time_limit' });
      const stopExpiry = Date.parse(stopCmd.expiry as string);
      expect(stopExpiry).toBeGreaterThanOrEqual(t0 + 15 * 60_000);
      expect(stopExpiry).toBeLessThanOrEqual(t1 + 15 * 60_000);

      const schedCmd = byName.get('set_schedule')!;
      expect(schedCmd.command_id).toBe(sched.body.data.command_id);
      expect(schedCmd.params).toEqual({
        connector_id: 2,
        schedule: {
          ...schedule,
          enabled: true,
          time_slots: [{ start: '22:00', end: '06:00', power_limit: 11, action: 'charge' }],
        },
      });
      const schedExpiry = Date.parse(schedCmd.expiry as string);
      expect(schedExpiry).toBeGreaterThanOrEqual(t0 + 7 * 86_400_000);
      expect(schedExpiry).toBeLessThanOrEqual(t1 + 7 * 86_400_000);

      const flexCmd = byName.get('set_power_limit')!;
      expect(flexCmd.command_id).toMatch(/^cmd_/);
      expect(flexCmd.params).toEqual({
        control_id: flex.body.data.control_id,
        power_limit_percent: 40,
        duration: 3_600,
        reason: 'grid peak',
        starts_at: expect.any(String),
        ends_at: flexCmd.expiry,
      });
      const params = flexCmd.params as { starts_at: string; ends_at: string };
      expect(Date.parse(params.ends_at) - Date.parse(params.starts_at)).toBe(3_600_000);
    });

    it('delivers a command again on the next heartbeat (at least once), and never after its expiry', async () => {
      const t = await tenant();
      const d = await registerDevice(tp, sn(), t.siteId);
      const stop = await tp.http.post(`/v1/operator/devices/${d.deviceId}/connectors/1/stop`, {
        token: t.token,
        json: {},
      });
      expect(stop.status).toBe(200);
      const sched = await tp.http.post(`/v1/operator/devices/${d.deviceId}/connectors/1/schedule`, {
        token: t.token,
        json: schedule,
      });
      expect(sched.status).toBe(200);
      const flex = await tp.http.post('/v1/operator/control/flexibility', {
        token: t.token,
        json: {
          target_type: 'operator',
          target_ids: [t.operatorId],
          command: 'pause_charging',
          params: { duration: 1_800 },
        },
      });
      expect(flex.status).toBe(200);

      const pending = async (token: string) => {
        const res = await heartbeat(token);
        expect(res.status).toBe(200);
        return res.body.data.commands as Array<{ command: string; command_id: string; expiry: string }>;
      };
      const names = async (token: string) => (await pending(token)).map((c) => c.command).sort();

      const first = await pending(d.token);
      expect(first.map((c) => c.command).sort()).toEqual(['pause_charging', 'set_schedule', 'stop']);
      // Delivered, not yet reported: sent again, with the same ids, on every heartbeat.
      const again = await pending(d.token);
      expect(again.map((c) => c.command_id).sort()).toEqual(first.map((c) => c.command_id).sort());
      expect(again.find((c) => c.command === 'stop')?.command_id).toBe(stop.body.data.command_id);
      expect(await names(d.token)).toEqual(['pause_charging', 'set_schedule', 'stop']);

      const expiry = (name: string) => Date.parse(first.find((c) => c.command === name)!.expiry);
      const stopExpiry = expiry('stop');
      const pauseExpiry = expiry('pause_charging');
      const scheduleExpiry = expiry('set_schedule');
      expect(stopExpiry).toBeLessThan(pauseExpiry);
      expect(pauseExpiry).toBeLessThan(scheduleExpiry);
      /** Moves the fake clock forward to the instant `ms`. */
      const advanceTo = (ms: number) => {
        const delta = ms - platformNow();
        expect(delta).toBeGreaterThan(0);
        advance(delta);
      };

      // Stop: 15 minutes. Still there just before its expiry, never after it.
      advanceTo(stopExpiry - 20_000);
      expect(await names(d.token)).toEqual(['pause_charging', 'set_schedule', 'stop']);
      advanceTo(stopExpiry + 1_000);
      expect(await names(d.token)).toEqual(['pause_charging', 'set_schedule']);

      // Pause: its 30-minute window.
      advanceTo(pauseExpiry - 20_000);
      expect(await names(d.token)).toEqual(['pause_charging', 'set_schedule']);
      advanceTo(pauseExpiry + 1_000);
      expect(await names(d.token)).toEqual(['set_schedule']);

      // Schedule: up to 7 days (the device token lives 24 h: take a new one).
      advanceTo(scheduleExpiry - 20_000);
      const token = await freshToken(d.deviceId, d.secret);
      expect(await names(token)).toEqual(['set_schedule']);
      advanceTo(scheduleExpiry + 1_000);
      expect(await names(token)).toEqual([]);
    });

    it('delivers only to the addressed charger', async () => {
      const t = await tenant();
      const a = await registerDevice(tp, sn(), t.siteId);
      const b = await registerDevice(tp, sn(), t.siteId);
      const stop = await tp.http.post(`/v1/operator/devices/${a.deviceId}/connectors/1/stop`, {
        token: t.token,
        json: {},
      });
      expect(stop.status).toBe(200);
      expect((await heartbeat(b.token)).body.data.commands).toEqual([]);
      expect((await heartbeat(a.token)).body.data.commands).toHaveLength(1);
    });

    it('holds commands back while the charger reports offline and delivers them once it is online', async () => {
      const t = await tenant();
      const d = await registerDevice(tp, sn(), t.siteId);
      const stop = await tp.http.post(`/v1/operator/devices/${d.deviceId}/connectors/1/stop`, {
        token: t.token,
        json: {},
      });
      expect(stop.status).toBe(200);
      const offline = await heartbeat(d.token, { timestamp: isoNow(), status: 'offline', fault_code: 0 });
      expect(offline.status).toBe(200);
      expect(offline.body.data.commands).toEqual([]);
      const online = await heartbeat(d.token);
      expect(online.body.data.commands.map((c: { command_id: string }) => c.command_id)).toEqual([
        stop.body.data.command_id,
      ]);
    });
  });

  it('a heartbeat with status offline marks the device offline at once, connectors unavailable', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    expect((await heartbeat(d.token)).status).toBe(200);
    const tel = await telemetry(d.token, {
      timestamp: isoNow(),
      connector_id: 1,
      state: 'charging',
      power: 7,
    });
    expect(tel.status).toBe(200);
    const online = await operatorDevice(t.token, d.deviceId);
    expect(online.status).toBe('online');
    expect(online.connectors[0].status).toBe('charging');

    const res = await heartbeat(d.token, { timestamp: isoNow(), status: 'offline', fault_code: 0 });
    expect(res.status).toBe(200);
    const view = await operatorDevice(t.token, d.deviceId);
    expect(view.status).toBe('offline');
    expect(view.connectors.map((c: { status: string }) => c.status)).toEqual(['unavailable', 'unavailable']);

    // The next online heartbeat brings it back.
    expect((await heartbeat(d.token)).status).toBe(200);
    const back = await operatorDevice(t.token, d.deviceId);
    expect(back.status).toBe('online');
    expect(back.connectors[0].status).toBe('charging');
  });
});
