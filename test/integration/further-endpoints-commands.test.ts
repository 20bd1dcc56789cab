import { describe, expect, it } from 'vitest';
import { expectValidation } from '../helpers/device-calls.js';
import { furtherCalls, okData, type Tenant } from '../helpers/further-calls.js';
import { expectError, type RegisteredDevice, registerDevice } from '../helpers/platform.js';
import { platformPerFile } from '../helpers/platform-per-file.js';

/**
 * The further endpoints of DESIGN.md §9 over real HTTPS and SQLite: starting a connector, and a connector's
 * schedules (listed, deleted). One platform for the file; every test has its own tenant and chargers.
 */

const tp = platformPerFile();

const { platformNow, sn, tenant, get, heartbeat } = furtherCalls(() => tp);

describe('POST .../connectors/{connector_id}/start', () => {
  const start = (t: Tenant, deviceId: string, connector: number | string, json?: unknown) =>
    tp.http.post(`/v1/operator/devices/${deviceId}/connectors/${connector}/start`, {
      token: t.token,
      ...(json === undefined ? {} : { json }),
    });

  it('queues a start with or without a body and delivers it on the heartbeat', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const before = platformNow();
    const withBody = await okData(start(t, d.deviceId, 1, { target_soc: 80, power_limit: 7.4 }));
    const bare = await okData(start(t, d.deviceId, 2));
    const after = platformNow();
    expect(withBody).toEqual({ command_id: expect.stringMatching(/^cmd_/), status: 'queued' });
    expect(bare).toEqual({ command_id: expect.stringMatching(/^cmd_/), status: 'queued' });

    const hb = await heartbeat(d);
    const cmds = hb.body.data.commands;
    expect(cmds.map((c: { command_id: string }) => c.command_id)).toEqual([
      withBody.command_id,
      bare.command_id,
    ]);
    expect(cmds[0]).toMatchObject({
      command: 'start',
      params: { connector_id: 1, target_soc: 80, power_limit: 7.4 },
    });
    expect(cmds[1]).toMatchObject({ command: 'start', params: { connector_id: 2 } });
    const expiry = Date.parse(cmds[0].expiry);
    expect(expiry).toBeGreaterThanOrEqual(before + 15 * 60_000);
    expect(expiry).toBeLessThanOrEqual(after + 15 * 60_000);
  });

  it('refuses bad bodies (400/1001), unknown connectors and foreign devices (404/3001)', async () => {
    const t = await tenant();
    const other = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const foreign = await registerDevice(tp, sn(), other.siteId);
    expectValidation(await start(t, d.deviceId, 1, { target_soc: 101 }), 'target_soc', 101);
    expectValidation(await start(t, d.deviceId, 1, { target_soc: 50.5 }), 'target_soc', 50.5);
    expectValidation(await start(t, d.deviceId, 1, { power_limit: -1 }), 'power_limit', -1);
    expectValidation(await start(t, d.deviceId, 1, { soc: 50 }), 'soc', 50);
    expectValidation(await start(t, d.deviceId, 0), 'connector_id', '0');
    expectError(await start(t, d.deviceId, 9), 404, 3001);
    expectError(await start(t, foreign.deviceId, 1), 404, 3001);
    expectError(await start(t, 'dev_00000000000000000000', 1), 404, 3001);
    // Nothing was queued by any of these.
    expect((await heartbeat(d)).body.data.commands).toEqual([]);
    expect((await heartbeat(foreign)).body.data.commands).toEqual([]);
  });
});

describe('schedules: GET .../schedules and DELETE .../schedules/{schedule_id}', () => {
  const schedule = (id: string, start: string) => ({
    schedule_id: id,
    type: 'daily',
    time_slots: [{ start, end: '06:00', power_limit: 11 }],
    timezone: 'Europe/Berlin',
  });
  const stored = (id: string, start: string) => ({
    schedule_id: id,
    enabled: true,
    type: 'daily',
    time_slots: [{ start, end: '06:00', power_limit: 11, action: 'charge' }],
    timezone: 'Europe/Berlin',
  });
  const base = (d: RegisteredDevice, connector = 1) =>
    `/v1/operator/devices/${d.deviceId}/connectors/${connector}`;

  it('lists what POST .../schedule stored, by schedule_id, paged; a repeat id replaces', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    for (const [id, start] of [
      ['night', '22:00'],
      ['evening', '19:00'],
      ['weekend', '00:00'],
      ['night', '23:00'],
    ] as const) {
      await okData(tp.http.post(`${base(d)}/schedule`, { token: t.token, json: schedule(id, start) }));
    }
    const list = await okData(get(t, `${base(d)}/schedules`));
    expect(list).toEqual({
      total: 3,
      page: 1,
      size: 20,
      items: [stored('evening', '19:00'), stored('night', '23:00'), stored('weekend', '00:00')],
    });
    expect(await okData(get(t, `${base(d)}/schedules?size=2&page=2`))).toEqual({
      total: 3,
      page: 2,
      size: 2,
      items: [stored('weekend', '00:00')],
    });
    expect(await okData(get(t, `${base(d, 2)}/schedules`))).toEqual({
      total: 0,
      page: 1,
      size: 20,
      items: [],
    });
    expectValidation(await get(t, `${base(d)}/schedules?size=0`), 'size', '0');
    expectError(await get(t, `${base(d, 7)}/schedules`), 404, 3001);
  });

  it('DELETE queues delete_schedule for the charger and removes it from the list; unknown → 404/3001', async () => {
    const t = await tenant();
    const other = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    await okData(tp.http.post(`${base(d)}/schedule`, { token: t.token, json: schedule('a', '20:00') }));
    await okData(tp.http.post(`${base(d)}/schedule`, { token: t.token, json: schedule('b', '21:00') }));
    // The set_schedule commands are delivered and done.
    const hb = await heartbeat(d);
    for (const c of hb.body.data.commands) {
      await okData(
        tp.http.post(`/v1/device/commands/${c.command_id}/status`, {
          token: d.token,
          json: { status: 'succeeded' },
        }),
      );
    }

    const deleted = await okData(tp.http.delete(`${base(d)}/schedules/a`, { token: t.token }));
    expect(deleted).toEqual({
      schedule_id: 'a',
      command_id: expect.stringMatching(/^cmd_/),
      status: 'queued',
    });
    const next = await heartbeat(d);
    expect(next.body.data.commands).toEqual([
      {
        command_id: deleted.command_id,
        command: 'delete_schedule',
        params: { connector_id: 1, schedule_id: 'a' },
        expiry: expect.any(String),
      },
    ]);
    const cmd = await okData(get(t, `/v1/operator/commands/${deleted.command_id}`));
    expect(cmd).toMatchObject({ command: 'delete_schedule', status: 'delivered', device_id: d.deviceId });
    expect(Date.parse(cmd.expiry) - Date.parse(cmd.created_at)).toBe(7 * 86_400_000);

    expect(await okData(get(t, `${base(d)}/schedules`))).toEqual({
      total: 1,
      page: 1,
      size: 20,
      items: [stored('b', '21:00')],
    });
    expectError(await tp.http.delete(`${base(d)}/schedules/a`, { token: t.token }), 404, 3001);
    expectError(await tp.http.delete(`${base(d)}/schedules/never`, { token: t.token }), 404, 3001);
    // The schedule lives on connector 1 only.
    expectError(await tp.http.delete(`${base(d, 2)}/schedules/b`, { token: t.token }), 404, 3001);
    // Another tenant can neither see nor delete it.
    expectError(await tp.http.delete(`${base(d)}/schedules/b`, { token: other.token }), 404, 3001);
    expectError(await get(other, `${base(d)}/schedules`), 404, 3001);
    expectValidation(
      await tp.http.delete(`${base(d)}/schedules/a%20b`, { token: t.token }),
      'schedule_id',
      'a b',
    );
    // None of the refusals queued anything.
    expect((await heartbeat(d)).body.data.commands.map((c: { command_id: string }) => c.command_id)).toEqual([
      deleted.command_id,
    ]);
    expect((await okData(get(t, `${base(d)}/schedules`))).total).toBe(1);
  });
});
