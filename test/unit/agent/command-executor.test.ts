import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createSimulatedHal } from '../../../simulators/simulated-hal.js';
import { command, tempDir } from '../../helpers/agent.js';
import { ev, finalReason, inMinutes, type Rig, rig, statusesOf } from '../../helpers/executor-rig.js';

/**
 * The command executor with the simulated HAL (agent/runtime/command-executor.ts): each command's effect on the
 * hardware and its reports, once per command across redelivery and restarts; update commands. The rig is in
 * test/helpers/executor-rig.ts; the checks a command passes first are in command-checks.test.ts.
 */

describe('command executor with the simulated HAL', () => {
  let tmp: ReturnType<typeof tempDir>;
  let r: Rig;
  beforeEach(() => {
    tmp = tempDir();
    r = rig(tmp.dir);
  });
  afterEach(() => {
    r.store.close();
    tmp.remove();
  });

  it('set_schedule stores the schedule and reports accepted then succeeded; delete_schedule removes it', async () => {
    const schedule = {
      schedule_id: 'night',
      type: 'daily',
      time_slots: [{ start: '22:00', end: '06:00', power_limit: 7 }],
      timezone: 'Europe/Berlin',
    };
    const set = command('set_schedule', { connector_id: 1, schedule }, inMinutes(60));
    await r.run(set);
    expect(statusesOf(r, set.command_id)).toEqual(['accepted', 'succeeded']);
    const stored = r.store.listSchedules(1);
    expect(stored).toHaveLength(1);
    expect(stored[0]?.schedule).toMatchObject({
      schedule_id: 'night',
      enabled: true,
      received_at: expect.any(String),
    });
    expect(r.store.journalGet(set.command_id)?.status).toBe('succeeded');

    const del = command('delete_schedule', { connector_id: 1, schedule_id: 'night' });
    await r.run(del);
    expect(statusesOf(r, del.command_id)).toEqual(['accepted', 'succeeded']);
    expect(r.store.listSchedules(1)).toEqual([]);
  });

  it('stop holds the connector idle until the vehicle leaves; start resumes charging', async () => {
    r.hal.plugIn(1, ev);
    await r.loop.applyNow();
    expect((await r.hal.readConnector(1)).state).toBe('charging');

    const stop = command('stop', { connector_id: 1, reason: 'user_request' });
    await r.run(stop);
    expect(statusesOf(r, stop.command_id)).toEqual(['accepted', 'succeeded']);
    expect((await r.hal.readConnector(1)).state).toBe('idle');
    // Re-evaluation (a timer, a reboot) does not undo the stop.
    await r.loop.applyNow();
    expect((await r.hal.readConnector(1)).state).toBe('idle');

    const start = command('start', { connector_id: 1, power_limit: 7 });
    await r.run(start);
    expect(statusesOf(r, start.command_id)).toEqual(['accepted', 'succeeded']);
    expect(finalReason(r, start.command_id)).toMatch(/up to 7 kW/);
    r.hal.tick(1000);
    const reading = await r.hal.readConnector(1);
    expect(reading.state).toBe('charging');
    expect(reading.powerKw).toBeCloseTo(7, 3);

    await r.run(command('stop', { connector_id: 1 }));
    r.hal.unplug(1);
    await r.loop.applyNow();
    expect(r.store.listOverrides().size).toBe(0);
    r.hal.plugIn(1, ev);
    await r.loop.applyNow();
    expect((await r.hal.readConnector(1)).state).toBe('charging'); // no schedule: unrestricted again
  });

  it('stop without a vehicle succeeds with nothing to stop, even where a schedule would allow charging', async () => {
    const stop = command('stop', { connector_id: 1 });
    await r.run(stop);
    expect(statusesOf(r, stop.command_id)).toEqual(['accepted', 'succeeded']);
    expect(finalReason(r, stop.command_id)).toBe('nothing to stop: no vehicle on connector 1');
    expect(r.store.listOverrides().size).toBe(0);
  });

  it('start is refused without a vehicle, and fails when its target_soc is already reached', async () => {
    const noVehicle = command('start', { connector_id: 1 });
    await r.run(noVehicle);
    expect(statusesOf(r, noVehicle.command_id)).toEqual(['rejected']);
    expect(finalReason(r, noVehicle.command_id)).toBe('no vehicle on connector 1');

    r.hal.plugIn(1, { ...ev, soc: 85 });
    const reached = command('start', { connector_id: 1, target_soc: 80 });
    await r.run(reached);
    expect(statusesOf(r, reached.command_id)).toEqual(['accepted', 'failed']);
    expect(finalReason(r, reached.command_id)).toMatch(/target_soc 80% reached/);
    expect(r.store.listOverrides().size).toBe(0);
  });

  it('discharge runs on V2G hardware within its window and min_soc; refuses otherwise', async () => {
    r.hal.plugIn(2, ev);
    const dis = command('discharge', { connector_id: 2, discharge_power: 5, duration: 3600, min_soc: 20 });
    await r.run(dis);
    expect(statusesOf(r, dis.command_id)).toEqual(['accepted', 'succeeded']);
    r.hal.tick(1000);
    const reading = await r.hal.readConnector(2);
    expect(reading.state).toBe('discharging');
    expect(reading.powerKw).toBeCloseTo(-5, 3);
    const override = r.store.listOverrides().get(2);
    expect(override?.kind).toBe('discharge');

    const nonV2g = command('discharge', { connector_id: 1, discharge_power: 5, duration: 60, min_soc: 20 });
    await r.run(nonV2g);
    expect(statusesOf(r, nonV2g.command_id)).toEqual(['rejected']);
    expect(finalReason(r, nonV2g.command_id)).toMatch(/no V2G hardware/);

    const belowMin = command('discharge', { connector_id: 2, discharge_power: 5, duration: 60, min_soc: 60 });
    await r.run(belowMin);
    expect(statusesOf(r, belowMin.command_id)).toEqual(['rejected']);
    expect(finalReason(r, belowMin.command_id)).toMatch(/at or below min_soc 60%/);
  });

  it("reports failed with the hardware's reason when the hardware refuses", async () => {
    r.store.close();
    const noV2gHardware = createSimulatedHal({ connectors: 2, seed: 1, vehicles: 'manual' });
    r = rig(tmp.dir, noV2gHardware);
    r.hal.plugIn(2, ev);
    const dis = command('discharge', { connector_id: 2, discharge_power: 5, duration: 60, min_soc: 20 });
    await r.run(dis);
    expect(statusesOf(r, dis.command_id)).toEqual(['accepted', 'failed']);
    expect(finalReason(r, dis.command_id)).toMatch(/hardware refused: connector 2 is not V2G-capable/);
    expect(r.store.listOverrides().size).toBe(0);
  });

  it('set_power_limit caps every connector; the same control_id with ends_at now lifts it; pause stops', async () => {
    r.hal.plugIn(1, ev);
    await r.loop.applyNow();
    const window = { starts_at: new Date().toISOString(), ends_at: inMinutes(30), duration: 1800 };
    const limit = command(
      'set_power_limit',
      { control_id: 'ctl_1', power_limit_percent: 25, ...window },
      window.ends_at,
    );
    await r.run(limit);
    expect(statusesOf(r, limit.command_id)).toEqual(['accepted', 'succeeded']);
    expect(r.loop.targets().get(1)?.powerLimitKw).toBe(5.5);
    expect(r.loop.targets().get(2)?.powerLimitKw).toBe(5.5);

    const reversal = command(
      'set_power_limit',
      { control_id: 'ctl_1', power_limit_percent: 25, ...window, ends_at: new Date().toISOString() },
      window.ends_at,
    );
    await r.run(reversal);
    expect(finalReason(r, reversal.command_id)).toMatch(/lifted/);
    expect(r.loop.targets().get(1)?.powerLimitKw).toBe(22);

    const pause = command('pause_charging', { control_id: 'ctl_2', ...window }, window.ends_at);
    await r.run(pause);
    expect(statusesOf(r, pause.command_id)).toEqual(['accepted', 'succeeded']);
    expect((await r.hal.readConnector(1)).state).toBe('idle');
    expect(r.loop.targets().get(1)?.reason).toMatch(/paused by control ctl_2/);

    // A start during the pause is accepted but cannot charge: it fails with the pause as the reason.
    const start = command('start', { connector_id: 1 });
    await r.run(start);
    expect(statusesOf(r, start.command_id)).toEqual(['accepted', 'failed']);
    expect(finalReason(r, start.command_id)).toMatch(/paused by control ctl_2/);
  });

  it('refuses expired commands, invalid params and unknown connectors with reasons', async () => {
    const expired = command('stop', { connector_id: 1 }, new Date(Date.now() - 1000).toISOString());
    const invalid = command('set_power_limit', { control_id: 'c' });
    const unknown = command('stop', { connector_id: 9 });
    const unsupported = command('reboot', {});
    await r.run(expired, invalid, unknown, unsupported);
    expect(statusesOf(r, expired.command_id)).toEqual(['rejected']);
    expect(finalReason(r, expired.command_id)).toMatch(/expired/);
    expect(finalReason(r, invalid.command_id)).toMatch(/^invalid params: power_limit_percent/);
    expect(finalReason(r, unknown.command_id)).toMatch(/unknown connector 9/);
    expect(finalReason(r, unsupported.command_id)).toMatch(/unsupported command/);
  });

  it('runs each command once, even when delivered again and across a restart', async () => {
    r.hal.plugIn(1, ev);
    const stop = command('stop', { connector_id: 1 });
    const first = r.executor.receive([stop, stop]);
    expect(first).toEqual({ fresh: 1, repeats: 1 });
    await r.executor.idle();
    expect(r.executor.receive([stop])).toEqual({ fresh: 0, repeats: 1 });
    const reportsBefore = r.reports().length;

    r.store.close();
    const again = rig(tmp.dir, r.hal);
    r = again;
    expect(again.executor.receive([stop])).toEqual({ fresh: 0, repeats: 1 });
    await again.executor.idle();
    expect(again.reports().length).toBe(reportsBefore);
    expect(statusesOf(again, stop.command_id)).toEqual(['accepted', 'succeeded']);
  });

  it('finishes a command that a crash interrupted after it was accepted', async () => {
    r.hal.plugIn(1, ev);
    await r.loop.applyNow();
    const stop = command('stop', { connector_id: 1 });
    // As the executor leaves the journal when power is lost between "accepted" and the HAL call.
    r.store.journalInsert(
      { commandId: stop.command_id, command: 'stop', params: stop.params, expiry: stop.expiry },
      new Date().toISOString(),
    );
    r.store.recordCommandStatus(stop.command_id, [{ status: 'accepted' }], new Date().toISOString());
    r.store.close();

    r = rig(tmp.dir, r.hal);
    r.executor.resumeUnfinished();
    await r.executor.idle();
    expect(statusesOf(r, stop.command_id)).toEqual(['accepted', 'succeeded']);
    expect((await r.hal.readConnector(1)).state).toBe('idle');
  });
});

describe('command executor: update commands', () => {
  const update = () =>
    command('update', {
      update_id: 'upd-1',
      artifact_id: 'art-1',
      kind: 'firmware',
      version: '2.0.0',
      target: '',
      sha256: 'a'.repeat(64),
      size: 10,
      signature: `${'A'.repeat(86)}==`,
      install: 'when_idle',
    });
  let tmp: ReturnType<typeof tempDir>;
  beforeEach(() => {
    tmp = tempDir();
  });
  afterEach(() => tmp.remove());

  it('rejects an update when the agent has no update runner', async () => {
    const r = rig(tmp.dir);
    const c = update();
    await r.run(c);
    expect(statusesOf(r, c.command_id)).toEqual(['rejected']);
    expect(finalReason(r, c.command_id)).toBe('this agent takes no updates');
    r.store.close();
  });

  it('hands an update to the update runner, which answers for it', async () => {
    const r = rig(tmp.dir, undefined, true);
    const c = update();
    await r.run(c);
    expect(statusesOf(r, c.command_id)).toEqual(['rejected']);
    expect(finalReason(r, c.command_id)).toMatch(/trusts no update key/);
    r.store.close();
  });
});
