import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createSimulatedHal, type SimulatedHal } from '../../../simulators/simulated-hal.js';
import type { MaintenanceFault } from '../../../simulators/simulated-maintenance.js';
import { command, tempDir, waitFor } from '../../helpers/agent.js';
import { ev, finalReason, type Rig, rigWith, statusesOf } from '../../helpers/executor-rig.js';

/**
 * Remote maintenance in the agent (agent/runtime/maintenance.ts, DESIGN.md §20) with the simulated HAL and a real
 * store: availability, unlock, configuration and reset, each with its reports and its refusals.
 */

const halWith = (faults: MaintenanceFault[] = []): SimulatedHal =>
  createSimulatedHal({
    connectors: 2,
    v2g: true,
    seed: 3,
    vehicles: 'manual',
    meanTimeBetweenFaultsMs: Number.POSITIVE_INFINITY,
    maintenanceFaults: faults,
  });
const resultOf = (r: Rig, commandId: string) =>
  r
    .reports()
    .filter((p) => p.command_id === commandId)
    .at(-1)?.result;

describe('remote maintenance in the agent', () => {
  let tmp: ReturnType<typeof tempDir>;
  let r: Rig;
  const setUp = (options: Parameters<typeof rigWith>[1]) => {
    r = rigWith(tmp.dir, options);
    return r;
  };
  beforeEach(() => {
    tmp = tempDir();
  });
  afterEach(() => {
    r.store.close();
    tmp.remove();
  });

  it('an idle connector set unavailable refuses starts and stays idle until set available again', async () => {
    setUp({ hal: halWith(), maintenance: {} });
    const off = command('set_availability', { connector_id: 1, available: false });
    await r.run(off);
    expect(statusesOf(r, off.command_id)).toEqual(['accepted', 'succeeded']);
    expect(resultOf(r, off.command_id)).toEqual({ connector_id: 1, available: false });
    expect(r.store.getState('availability')?.['1']).toMatchObject({ afterVehicleLeaves: false });

    r.hal.plugIn(1, ev);
    const start = command('start', { connector_id: 1 });
    await r.run(start);
    expect(statusesOf(r, start.command_id)).toEqual(['rejected']);
    expect(finalReason(r, start.command_id)).toMatch(/connector 1 is out of service/);
    await r.loop.applyNow();
    expect((await r.hal.readConnector(1)).state).toBe('idle');
    expect(r.loop.targets().get(1)?.reason).toMatch(/out of service/);
    // The other connector is not touched.
    r.hal.plugIn(2, ev);
    const start2 = command('start', { connector_id: 2 });
    await r.run(start2);
    expect(statusesOf(r, start2.command_id)).toEqual(['accepted', 'succeeded']);

    const on = command('set_availability', { connector_id: 1, available: true });
    await r.run(on);
    expect(r.store.getState('availability')).toEqual({});
    const again = command('start', { connector_id: 1 });
    await r.run(again);
    expect(statusesOf(r, again.command_id)).toEqual(['accepted', 'succeeded']);
    expect((await r.hal.readConnector(1)).state).toBe('charging');
  });

  it('a charging connector set unavailable finishes its session and goes out of service when the vehicle leaves', async () => {
    setUp({ hal: halWith(), maintenance: {} });
    r.hal.plugIn(1, ev);
    await r.run(command('start', { connector_id: 1 }));
    expect((await r.hal.readConnector(1)).state).toBe('charging');

    const off = command('set_availability', { connector_id: 1, available: false });
    await r.run(off);
    expect(resultOf(r, off.command_id)).toEqual({
      connector_id: 1,
      available: false,
      effective: 'when_vehicle_leaves',
    });
    expect(finalReason(r, off.command_id)).toMatch(/when the vehicle charging on it leaves/);
    await r.loop.applyNow();
    expect((await r.hal.readConnector(1)).state).toBe('charging');

    r.hal.unplug(1);
    await r.loop.applyNow();
    expect(r.store.getState('availability')?.['1']).toMatchObject({ afterVehicleLeaves: false });
    r.hal.plugIn(1, ev);
    const start = command('start', { connector_id: 1 });
    await r.run(start);
    expect(statusesOf(r, start.command_id)).toEqual(['rejected']);
    await r.loop.applyNow();
    expect((await r.hal.readConnector(1)).state).toBe('idle');
  });

  it('unlocks through the HAL while no energy flows, and says why not otherwise', async () => {
    setUp({ hal: halWith(), maintenance: {} });
    const unlock = command('unlock_connector', { connector_id: 2 });
    await r.run(unlock);
    expect(statusesOf(r, unlock.command_id)).toEqual(['accepted', 'succeeded']);
    expect(r.hal.maintenance.unlocks.get(2)).toBe(1);

    r.hal.plugIn(1, ev);
    await r.run(command('start', { connector_id: 1 }));
    const busy = command('unlock_connector', { connector_id: 1 });
    await r.run(busy);
    expect(statusesOf(r, busy.command_id)).toEqual(['rejected']);
    expect(finalReason(r, busy.command_id)).toBe('connector 1 is charging: stop it before unlocking');
    expect(r.hal.maintenance.unlocks.get(1)).toBeUndefined();
  });

  it.each([
    ['no_unlock', ['rejected'], /cannot unlock connectors \(no unlockConnector\(\)\)/],
    ['unlock_stuck', ['accepted', 'failed'], /unlock refused: the cable lock of connector 1 did not open/],
  ] as const)('a HAL with %s: the unlock is %j', async (fault, statuses, reason) => {
    setUp({ hal: halWith([fault]), maintenance: {} });
    const unlock = command('unlock_connector', { connector_id: 1 });
    await r.run(unlock);
    expect(statusesOf(r, unlock.command_id)).toEqual(statuses);
    expect(finalReason(r, unlock.command_id)).toMatch(reason);
  });

  it('set_configuration stores the values, applies them live and reports the whole configuration', async () => {
    setUp({ hal: halWith(), maintenance: {} });
    const set = command('set_configuration', {
      values: { telemetry_interval_seconds: 1, heartbeat_interval_seconds: 15, log_level: 'debug' },
    });
    await r.run(set);
    expect(statusesOf(r, set.command_id)).toEqual(['accepted', 'succeeded']);
    expect(finalReason(r, set.command_id)).toBe(
      'telemetry_interval_seconds 5 → 1, heartbeat_interval_seconds 30 → 15, log_level info → debug',
    );
    const values = {
      telemetry_interval_seconds: 1,
      idle_telemetry_interval_seconds: 60,
      heartbeat_interval_seconds: 15,
      command_poll_wait_seconds: 25,
      log_level: 'debug',
      secret_rotation_days: 90,
    };
    expect(resultOf(r, set.command_id)).toEqual({ values });
    expect(r.applied.heartbeatMs).toEqual([15_000]);
    expect(r.applied.intervals).toEqual([{ activeMs: 1_000, idleMs: 60_000 }]);
    // Reported as an event in the same transaction, and kept across a restart of the store.
    const events = r.store.outbox.peek(100, 'event').map((i) => i.payload as { kind: string; data: unknown });
    expect(events.filter((e) => e.kind === 'configuration_reported').map((e) => e.data)).toEqual([values]);
    expect(r.store.getState('configuration')).toEqual({
      telemetry_interval_seconds: 1,
      heartbeat_interval_seconds: 15,
      log_level: 'debug',
    });
  });

  it.each([
    [{ telemetry_interval_seconds: 0 }, 'invalid params: values.telemetry_interval_seconds'],
    [{ log_level: 'trace' }, 'invalid params: values.log_level'],
    [{ cadence: 5 }, 'invalid params: values.cadence: unknown field'],
    [{}, 'invalid params: values: must set at least one key'],
  ])('set_configuration %j is rejected: %s', async (values, reason) => {
    setUp({ hal: halWith(), maintenance: {} });
    const set = command('set_configuration', { values });
    await r.run(set);
    expect(statusesOf(r, set.command_id)).toEqual(['rejected']);
    expect(finalReason(r, set.command_id)).toContain(reason);
    expect(r.store.getState('configuration')).toBeUndefined();
  });

  it('an immediate reset reports succeeded, then restarts the agent once', async () => {
    setUp({ hal: halWith(), maintenance: {} });
    const reset = command('reset', { mode: 'immediate', target: 'agent' });
    await r.run(reset);
    expect(statusesOf(r, reset.command_id)).toEqual(['accepted', 'succeeded']);
    expect(finalReason(r, reset.command_id)).toBe('restarting the agent');
    expect(r.restarts).toBe(1);
    expect(r.hal.maintenance.reboots).toBe(0);
  });

  it('a when_idle reset waits for the session to end', async () => {
    setUp({ hal: halWith(), maintenance: {} });
    r.hal.plugIn(1, ev);
    await r.run(command('start', { connector_id: 1 }));
    const reset = command('reset', { mode: 'when_idle', target: 'agent' });
    await r.run(reset);
    expect(statusesOf(r, reset.command_id)).toEqual(['accepted']);
    r.recheck();
    await r.executor.idle();
    expect(r.restarts).toBe(0);

    await r.run(command('stop', { connector_id: 1 })); // its report makes the reset look again
    await waitFor(
      () => r.restarts,
      (n) => n > 0,
    );
    expect(statusesOf(r, reset.command_id)).toEqual(['accepted', 'succeeded']);
    expect(r.restarts).toBe(1);
  });

  it('a charger reset reboots through the HAL, then restarts the agent', async () => {
    setUp({ hal: halWith(), maintenance: {} });
    r.hal.plugIn(1, ev);
    await r.run(command('start', { connector_id: 1 }));
    const reset = command('reset', { mode: 'immediate', target: 'charger' });
    await r.run(reset);
    expect(finalReason(r, reset.command_id)).toBe('rebooting the charger');
    expect(r.hal.maintenance.reboots).toBe(1);
    expect((await r.hal.readConnector(1)).state).toBe('idle');
    expect(r.restarts).toBe(1);
  });

  it.each([
    [
      'a HAL without reboot()',
      { hal: halWith(['no_reboot']), maintenance: {} },
      'charger',
      /cannot reboot it/,
    ],
    [
      'an agent without a way to restart',
      { hal: halWith(), maintenance: { restart: false } },
      'agent',
      /without a way to restart/,
    ],
  ] as const)('%s rejects the reset, saying so', async (_name, options, target, reason) => {
    setUp(options);
    const reset = command('reset', { mode: 'immediate', target });
    await r.run(reset);
    expect(statusesOf(r, reset.command_id)).toEqual(['rejected']);
    expect(finalReason(r, reset.command_id)).toMatch(reason);
    expect(r.restarts).toBe(0);
  });
});
