import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTenant,
  expectError,
  type RegisteredDevice,
  registerDevice,
  type TestPlatform,
} from '../helpers/platform.js';
import { startTwoTenants } from '../helpers/two-tenants.js';

/**
 * The operator API's remote commands (stop, discharge, schedule) and flexibility controls over real HTTPS: what
 * is queued for the charger and what is refused.
 */

let tp: TestPlatform;
let tenant: Awaited<ReturnType<typeof createTenant>>;
let other: Awaited<ReturnType<typeof createTenant>>;
let dev: RegisteredDevice;
let otherDev: RegisteredDevice;

beforeAll(async () => {
  ({ tp, tenant, other, dev, otherDev } = await startTwoTenants());
});
afterAll(async () => {
  await tp.stop();
});

describe('remote commands', () => {
  const connectorPath = (deviceId: string, connector: number, action: string) =>
    `/v1/operator/devices/${deviceId}/connectors/${connector}/${action}`;

  it('queues a stop, with or without a reason, and delivers it on the heartbeat', async () => {
    const res = await tp.http.post(connectorPath(dev.deviceId, 1, 'stop'), {
      token: tenant.token,
      json: { reason: 'time_limit' },
    });
    expect(res.status).toBe(200);
    expect(res.body.data.status).toBe('queued');
    const bare = await tp.http.post(connectorPath(dev.deviceId, 2, 'stop'), { token: tenant.token });
    expect(bare.body.data.status).toBe('queued');

    const hb = await tp.http.post('/v1/device/heartbeat', {
      token: dev.token,
      json: { timestamp: new Date().toISOString(), status: 'online', fault_code: 0 },
    });
    const cmds = hb.body.data.commands as Array<{ command_id: string; command: string; params: unknown }>;
    expect(cmds.find((c) => c.command_id === res.body.data.command_id)).toMatchObject({
      command: 'stop',
      params: { connector_id: 1, reason: 'time_limit' },
    });
    expect(cmds.find((c) => c.command_id === bare.body.data.command_id)?.params).toEqual({
      connector_id: 2,
      reason: 'user_request',
    });
  });

  it('refuses stop for unknown connectors, foreign devices and bad bodies', async () => {
    expectError(
      await tp.http.post(connectorPath(dev.deviceId, 9, 'stop'), { token: tenant.token, json: {} }),
      404,
      3001,
    );
    expectError(
      await tp.http.post(connectorPath(otherDev.deviceId, 1, 'stop'), { token: tenant.token, json: {} }),
      404,
      3001,
    );
    const zero = expectError(
      await tp.http.post(connectorPath(dev.deviceId, 0, 'stop'), { token: tenant.token, json: {} }),
      400,
      1001,
    );
    expect(zero.details).toEqual({ field: 'connector_id', value: '0' });
    const extra = expectError(
      await tp.http.post(connectorPath(dev.deviceId, 1, 'stop'), {
        token: tenant.token,
        json: { reason: 'x', force: true },
      }),
      400,
      1001,
    );
    expect(extra.details).toEqual({ field: 'force', value: true });
  });

  it('queues a discharge only on a V2G-capable connector', async () => {
    const ok = await tp.http.post(connectorPath(dev.deviceId, 2, 'discharge'), {
      token: tenant.token,
      json: { discharge_power: 7.4, duration: 1800, min_soc: 30 },
    });
    expect(ok.status).toBe(200);
    expect(ok.body.data).toEqual({ command_id: expect.stringMatching(/^cmd_/), status: 'queued' });
    expectError(
      await tp.http.post(connectorPath(dev.deviceId, 1, 'discharge'), {
        token: tenant.token,
        json: { discharge_power: 7.4, duration: 1800 },
      }),
      409,
      4001,
    );
    const soc = expectError(
      await tp.http.post(connectorPath(dev.deviceId, 2, 'discharge'), {
        token: tenant.token,
        json: { discharge_power: 7.4, duration: 1800, min_soc: 101 },
      }),
      400,
      1001,
    );
    expect(soc.details).toEqual({ field: 'min_soc', value: 101 });
    const power = expectError(
      await tp.http.post(connectorPath(dev.deviceId, 2, 'discharge'), {
        token: tenant.token,
        json: { discharge_power: -3, duration: 1800 },
      }),
      400,
      1001,
    );
    expect(power.details.field).toBe('discharge_power');
  });

  const schedule = {
    schedule_id: 'night-1',
    type: 'weekly',
    timezone: 'Europe/Berlin',
    target_soc: 80,
    effective_from: '2026-01-01T00:00:00Z',
    effective_until: '2027-01-01T00:00:00Z',
    time_slots: [
      {
        day_of_week: ['mon', 'tue', 'wed', 'thu', 'fri'],
        start: '22:00',
        end: '06:00',
        power_limit: 11,
        action: 'charge',
      },
    ],
  };

  it('stores a schedule and queues it for the charger', async () => {
    const res = await tp.http.post(connectorPath(dev.deviceId, 1, 'schedule'), {
      token: tenant.token,
      json: schedule,
    });
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({
      device_id: dev.deviceId,
      connector_id: 1,
      status: 'queued',
      schedule: { ...schedule, enabled: true },
    });
    const hb = await tp.http.post('/v1/device/heartbeat', {
      token: dev.token,
      json: { timestamp: new Date().toISOString(), status: 'online', fault_code: 0 },
    });
    const cmd = hb.body.data.commands.find(
      (c: { command_id: string }) => c.command_id === res.body.data.command_id,
    );
    expect(cmd).toMatchObject({
      command: 'set_schedule',
      params: { connector_id: 1, schedule: { schedule_id: 'night-1' } },
    });
  });

  it.each([
    [{ ...schedule, timezone: 'Mars/Olympus' }, 'timezone', 'Mars/Olympus'],
    [{ ...schedule, type: 'monthly' }, 'type', 'monthly'],
    [{ ...schedule, target_soc: 101 }, 'target_soc', 101],
    [{ ...schedule, effective_from: '2026-02-30T25:00:00Z' }, 'effective_from', '2026-02-30T25:00:00Z'],
    [
      { ...schedule, time_slots: [{ ...schedule.time_slots[0], start: '24:00' }] },
      'time_slots.0.start',
      '24:00',
    ],
    [
      { ...schedule, time_slots: [{ ...schedule.time_slots[0], day_of_week: ['funday'] }] },
      'time_slots.0.day_of_week.0',
      'funday',
    ],
    [
      { ...schedule, time_slots: [{ ...schedule.time_slots[0], action: 'fly' }] },
      'time_slots.0.action',
      'fly',
    ],
    [{ ...schedule, time_slots: [] }, 'time_slots', '[array of 0]'],
    [{ ...schedule, effective_until: '2025-01-01T00:00:00Z' }, 'effective_until', '2025-01-01T00:00:00Z'],
  ])('refuses an invalid schedule (%#) naming the field', async (body, field, value) => {
    const res = await tp.http.post(connectorPath(dev.deviceId, 1, 'schedule'), {
      token: tenant.token,
      json: body,
    });
    expect(expectError(res, 400, 1001).details).toEqual({ field, value });
  });

  it('refuses discharge slots on a connector without V2G', async () => {
    const res = await tp.http.post(connectorPath(dev.deviceId, 1, 'schedule'), {
      token: tenant.token,
      json: { ...schedule, time_slots: [{ ...schedule.time_slots[0], action: 'discharge' }] },
    });
    expectError(res, 409, 4001);
  });
});

describe('POST /v1/operator/control/flexibility', () => {
  const path = '/v1/operator/control/flexibility';

  it('fans out one command per charger of the targeted site', async () => {
    const site2 = await tp.store.createSite({
      operator_id: tenant.operatorId,
      name: 'Flex site',
      timezone: 'UTC',
    });
    const a = await registerDevice(tp, 'FLEX-A', site2.site_id);
    const b = await registerDevice(tp, 'FLEX-B', site2.site_id);
    const res = await tp.http.post(path, {
      token: tenant.token,
      json: {
        target_type: 'site',
        target_ids: [site2.site_id],
        command: 'set_power_limit',
        params: { power_limit_percent: 50, duration: 3600, reason: 'grid_peak' },
      },
    });
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({
      control_id: expect.stringMatching(/^ctl_/),
      status: 'executing',
      device_count: 2,
    });
    for (const d of [a, b]) {
      const hb = await tp.http.post('/v1/device/heartbeat', {
        token: d.token,
        json: { timestamp: new Date().toISOString(), status: 'online', fault_code: 0 },
      });
      expect(hb.body.data.commands).toHaveLength(1);
      expect(hb.body.data.commands[0]).toMatchObject({
        command: 'set_power_limit',
        params: {
          power_limit_percent: 50,
          duration: 3600,
          reason: 'grid_peak',
          control_id: res.body.data.control_id,
        },
      });
      const p = hb.body.data.commands[0].params;
      expect(Date.parse(p.ends_at) - Date.parse(p.starts_at)).toBe(3_600_000);
      expect(hb.body.data.commands[0].expiry).toBe(p.ends_at);
    }
  });

  it('targets every visible charger with all and only the tenant’s', async () => {
    const res = await tp.http.post(path, {
      token: other.token,
      json: { target_type: 'all', command: 'pause_charging', params: { duration: 600 } },
    });
    expect(res.body.data.device_count).toBe(1);
    const hb = await tp.http.post('/v1/device/heartbeat', {
      token: otherDev.token,
      json: { timestamp: new Date().toISOString(), status: 'online', fault_code: 0 },
    });
    expect(hb.body.data.commands.map((c: { command: string }) => c.command)).toContain('pause_charging');
  });

  it('refuses another tenant’s site or operator as 404/3001', async () => {
    const body = { command: 'pause_charging', params: { duration: 60 } };
    expectError(
      await tp.http.post(path, {
        token: tenant.token,
        json: { ...body, target_type: 'site', target_ids: [other.siteId] },
      }),
      404,
      3001,
    );
    expectError(
      await tp.http.post(path, {
        token: tenant.token,
        json: { ...body, target_type: 'operator', target_ids: [other.operatorId] },
      }),
      404,
      3001,
    );
  });

  it.each([
    [{ target_type: 'site', command: 'pause_charging', params: { duration: 60 } }, 'target_ids', null],
    [{ target_type: 'galaxy', command: 'pause_charging', params: { duration: 60 } }, 'target_type', 'galaxy'],
    [{ target_type: 'all', command: 'explode', params: { duration: 60 } }, 'command', 'explode'],
    [
      { target_type: 'all', command: 'set_power_limit', params: { power_limit_percent: 101, duration: 60 } },
      'params.power_limit_percent',
      101,
    ],
    [
      { target_type: 'all', command: 'set_power_limit', params: { power_limit_percent: -1, duration: 60 } },
      'params.power_limit_percent',
      -1,
    ],
    [
      { target_type: 'all', command: 'set_power_limit', params: { duration: 60 } },
      'params.power_limit_percent',
      null,
    ],
    [{ target_type: 'all', command: 'pause_charging', params: { duration: 0 } }, 'params.duration', 0],
  ])('refuses an invalid control (%#)', async (body, field, value) => {
    const res = await tp.http.post(path, { token: tenant.token, json: body });
    expect(expectError(res, 400, 1001).details).toEqual({ field, value });
  });

  it('needs the write scope', async () => {
    const reader = await createTenant(tp, 'Delta Read', ['read']);
    const res = await tp.http.post(path, {
      token: reader.token,
      json: { target_type: 'all', command: 'pause_charging', params: { duration: 60 } },
    });
    expectError(res, 403, 2003);
  });
});
