import { describe, expect, it } from 'vitest';
import {
  expectWithin,
  ids,
  lifecycleCalls,
  type Pending,
  type Tenant,
} from '../helpers/command-lifecycle.js';
import { expectError, type RegisteredDevice, registerDevice } from '../helpers/platform.js';
import { platformPerFile } from '../helpers/platform-per-file.js';

/**
 * Flexibility controls over real HTTPS and SQLite (DESIGN.md §5): fan-out to a site's chargers, per-charger
 * progress, completion, cancellation with reversal commands. One platform for the file; every test has its own
 * tenant and chargers. The fake clock only moves forward.
 */

const tp = platformPerFile();

const { advance, sn, tenant, heartbeat, poll, report, reportOk, command, during } = lifecycleCalls(() => tp);

describe('flexibility controls', () => {
  async function fleet(n: number) {
    const t = await tenant();
    const devices: RegisteredDevice[] = [];
    for (let i = 0; i < n; i++) devices.push(await registerDevice(tp, sn(), t.siteId));
    devices.sort((a, b) => (a.deviceId < b.deviceId ? -1 : 1));
    return { t, devices };
  }
  async function flex(t: Tenant, duration: number, command = 'set_power_limit') {
    const params = command === 'set_power_limit' ? { power_limit_percent: 50, duration } : { duration };
    const res = await tp.http.post('/v1/operator/control/flexibility', {
      token: t.token,
      json: { target_type: 'site', target_ids: [t.siteId], command, params },
    });
    expect(res.status).toBe(200);
    expect(res.body.data.status).toBe('executing');
    return res.body.data.control_id as string;
  }
  // biome-ignore lint/suspicious/noExplicitAny: response bodies are inspected field by field
  async function control(t: Tenant, controlId: string): Promise<any> {
    const res = await tp.http.get(`/v1/operator/control/${controlId}`, { token: t.token });
    expect(res.status).toBe(200);
    return res.body.data;
  }
  const commandOf = (
    view: { devices: Array<{ device_id: string; command_id: string }> },
    d: RegisteredDevice,
  ) => view.devices.find((x) => x.device_id === d.deviceId)!.command_id;

  it('shows per-charger progress that moves as chargers receive and report the command', async () => {
    const { t, devices } = await fleet(3);
    const [a, b, c] = devices as [RegisteredDevice, RegisteredDevice, RegisteredDevice];
    const created = await during(() => flex(t, 3_600));
    const controlId = created.result;

    let view = await control(t, controlId);
    expect(view).toEqual({
      control_id: controlId,
      status: 'executing',
      command: 'set_power_limit',
      params: {
        power_limit_percent: 50,
        duration: 3_600,
        control_id: controlId,
        starts_at: view.created_at,
        ends_at: view.ends_at,
      },
      target_type: 'site',
      target_ids: [t.siteId],
      created_at: expect.any(String),
      ends_at: expect.any(String),
      device_count: 3,
      progress: { queued: 3 },
      devices: devices.map((d) => ({
        device_id: d.deviceId,
        command_id: expect.any(String),
        status: 'queued',
      })),
    });
    expectWithin(view.created_at, created);
    expect(Date.parse(view.ends_at) - Date.parse(view.created_at)).toBe(3_600_000);
    expect(new Set(view.devices.map((x: { command_id: string }) => x.command_id)).size).toBe(3);

    // Each per-charger command is a command like any other, linked to its control.
    const cmdA = commandOf(view, a);
    const cmdView = await command(t, cmdA);
    expect(cmdView).toMatchObject({
      command_id: cmdA,
      device_id: a.deviceId,
      command: 'set_power_limit',
      control_id: controlId,
      status: 'queued',
      expiry: view.ends_at,
      params: view.params,
    });

    expect(ids(await heartbeat(a))).toEqual([cmdA]);
    view = await control(t, controlId);
    expect(view.progress).toEqual({ queued: 2, delivered: 1 });

    await reportOk(a, cmdA, { status: 'accepted' }, { status: 'accepted', changed: true });
    expect(ids(await poll(b))).toEqual([commandOf(view, b)]);
    view = await control(t, controlId);
    expect(view.progress).toEqual({ queued: 1, delivered: 1, accepted: 1 });

    await reportOk(a, cmdA, { status: 'succeeded' }, { status: 'succeeded', changed: true });
    await reportOk(b, commandOf(view, b), { status: 'rejected' }, { status: 'rejected', changed: true });
    view = await control(t, controlId);
    expect(view.progress).toEqual({ queued: 1, succeeded: 1, rejected: 1 });
    expect(view.devices).toEqual([
      { device_id: a.deviceId, command_id: cmdA, status: 'succeeded' },
      { device_id: b.deviceId, command_id: commandOf(view, b), status: 'rejected' },
      { device_id: c.deviceId, command_id: commandOf(view, c), status: 'queued' },
    ]);
    expect(view.status).toBe('executing');
  });

  it('is completed once its duration has passed; its undelivered commands expire', async () => {
    const { t, devices } = await fleet(2);
    const [a] = devices as [RegisteredDevice, RegisteredDevice];
    const controlId = await flex(t, 60, 'pause_charging');
    let view = await control(t, controlId);
    await heartbeat(a);
    await reportOk(a, commandOf(view, a), { status: 'succeeded' }, { status: 'succeeded', changed: true });

    advance(30_000);
    await tp.platform.sweep();
    expect((await control(t, controlId)).status).toBe('executing');
    expect((await tp.store.getControl(controlId))?.control.status).toBe('executing');

    advance(31_000);
    await tp.platform.sweep();
    view = await control(t, controlId);
    expect(view.status).toBe('completed');
    // Stored as completed by the sweep, not only computed on read.
    expect((await tp.store.getControl(controlId))?.control.status).toBe('completed');
    expect(view.progress).toEqual({ succeeded: 1, expired: 1 });
    expect(await heartbeat(devices[1]!)).toEqual([]);

    // Completed: nothing left to cancel.
    const err = expectError(
      await tp.http.delete(`/v1/operator/control/${controlId}`, { token: t.token }),
      409,
      4001,
    );
    expect(err.message).toContain('completed');
    expect((await control(t, controlId)).status).toBe('completed');
  });

  it('DELETE cancels: queued commands are cancelled, chargers that received it get a reversal ending now', async () => {
    const { t, devices } = await fleet(3);
    const [a, b, c] = devices as [RegisteredDevice, RegisteredDevice, RegisteredDevice];
    const controlId = await flex(t, 3_600);
    let view = await control(t, controlId);
    const original = { a: commandOf(view, a), b: commandOf(view, b), c: commandOf(view, c) };

    expect(ids(await heartbeat(a))).toEqual([original.a]); // delivered, not reported
    expect(ids(await heartbeat(b))).toEqual([original.b]);
    await reportOk(b, original.b, { status: 'accepted' }, { status: 'accepted', changed: true });
    // c never asked: its command is still queued.

    advance(10_000);
    const cancelled = await during(() =>
      tp.http.delete(`/v1/operator/control/${controlId}`, { token: t.token }),
    );
    expect(cancelled.result.status).toBe(200);
    expect(cancelled.result.body).toEqual({
      code: 0,
      message: 'success',
      data: { control_id: controlId, status: 'cancelled' },
    });

    view = await control(t, controlId);
    expect(view.status).toBe('cancelled');
    expect(view.progress).toEqual({ delivered: 1, accepted: 1, cancelled: 1 });
    const cView = await command(t, original.c);
    expect(cView.status).toBe('cancelled');
    expect(cView.history.at(-1)).toEqual({
      status: 'cancelled',
      at: expect.any(String),
      reason: 'control cancelled',
    });
    expectWithin(cView.history.at(-1).at, cancelled);

    // The reversal: same command name and control_id, the window ended at the cancellation.
    const checkReversal = (cmds: Pending[]) => {
      const reversals = cmds.filter((x) => x.command_id !== original.a && x.command_id !== original.b);
      expect(reversals).toHaveLength(1);
      const r = reversals[0]!;
      expect(r.command).toBe('set_power_limit');
      expect(r.params).toEqual({ ...view.params, ends_at: expect.any(String) });
      expect(r.params.control_id).toBe(controlId);
      expectWithin(r.params.ends_at as string, cancelled);
      expect(r.expiry).toBe(view.ends_at);
      return r.command_id;
    };
    const revA = checkReversal(await heartbeat(a));
    const revB = checkReversal(await poll(b));
    expect(revA).not.toBe(revB);
    // Nothing for the charger that never received the limit.
    expect(await heartbeat(c)).toEqual([]);
    expect(await poll(c)).toEqual([]);
    expectError(await report(c, original.c, { status: 'accepted' }), 409, 4001);

    // The reversal is a command like any other: the charger reports it.
    await reportOk(a, revA, { status: 'succeeded' }, { status: 'succeeded', changed: true });
    expect((await command(t, revA)).status).toBe('succeeded');

    // Cancelled: a second DELETE conflicts and queues nothing more.
    expectError(await tp.http.delete(`/v1/operator/control/${controlId}`, { token: t.token }), 409, 4001);
    expect(ids(await heartbeat(c))).toEqual([]);
    expect((await heartbeat(a)).filter((x) => x.command_id !== original.a)).toEqual([]);
  });

  it('answers 404/3001 for another tenant’s control and an unknown one, on GET and DELETE', async () => {
    const { t } = await fleet(1);
    const other = await tenant();
    const controlId = await flex(t, 600);
    expectError(await tp.http.get(`/v1/operator/control/${controlId}`, { token: other.token }), 404, 3001);
    expectError(await tp.http.delete(`/v1/operator/control/${controlId}`, { token: other.token }), 404, 3001);
    expectError(
      await tp.http.get('/v1/operator/control/ctl_00000000000000000000', { token: t.token }),
      404,
      3001,
    );
    expectError(
      await tp.http.delete('/v1/operator/control/ctl_00000000000000000000', { token: t.token }),
      404,
      3001,
    );
    expect((await control(t, controlId)).status).toBe('executing');
  });
});
