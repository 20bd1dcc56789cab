import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { systemClock } from '../../../agent/clock.js';
import type { StoredSchedule } from '../../../agent/core/schedule-engine.js';
import type { ConnectorHardwareState, ConnectorInfo } from '../../../agent/hal.js';
import { type ControlLoop, createControlLoop } from '../../../agent/runtime/control-loop.js';
import { createSerialRunner } from '../../../agent/runtime/serial-runner.js';
import { type AgentStore, openAgentStore } from '../../../agent/store/agent-store.js';
import { createSimulatedHal, type SimulatedHal } from '../../../simulators/simulated-hal.js';
import { quietLogger, tempDir } from '../../helpers/agent.js';

/**
 * The control loop driving the simulated HAL under fake time: a day of schedule in milliseconds, limits that
 * start and end, a reboot in the middle, a wall-clock jump with no timer firing.
 */

const HOUR = 3_600_000;
const MINUTE = 60_000;
// 18:00 in Berlin (UTC+1 in January).
const START = Date.parse('2026-01-14T17:00:00Z');
const connectors: ConnectorInfo[] = [{ connectorId: 1, ratedPowerKw: 22, v2gCapable: false }];

const night: StoredSchedule = {
  schedule_id: 'night',
  enabled: true,
  type: 'daily',
  time_slots: [{ start: '22:00', end: '06:00', power_limit: 11, action: 'charge' }],
  timezone: 'Europe/Berlin',
};

describe('control loop with the simulated HAL and fake time', () => {
  let tmp: ReturnType<typeof tempDir>;
  let store: AgentStore;
  let hal: SimulatedHal;
  let loop: ControlLoop;
  let transitions: Array<{ at: number; to: ConnectorHardwareState }>;

  function startLoop(safetyIntervalMs = 15 * MINUTE): ControlLoop {
    const l = createControlLoop({
      store,
      hal,
      runner: createSerialRunner(),
      clock: systemClock,
      logger: quietLogger(),
      connectors: () => connectors,
      safetyIntervalMs,
    });
    l.start();
    return l;
  }
  const state = async () => (await hal.readConnector(1)).state;

  beforeEach(async () => {
    vi.useFakeTimers({
      now: START,
      toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'],
    });
    tmp = tempDir();
    store = openAgentStore(tmp.dir);
    hal = createSimulatedHal({
      connectors: 1,
      seed: 3,
      vehicles: 'manual',
      meanTimeBetweenFaultsMs: Number.POSITIVE_INFINITY,
      tickIntervalMs: MINUTE,
    });
    transitions = [];
    hal.subscribe((e) => {
      if (e.type === 'state_changed') transitions.push({ at: e.at.getTime(), to: e.to });
    });
    await hal.start();
  });
  afterEach(async () => {
    loop?.stop();
    await hal.close();
    store.close();
    tmp.remove();
    vi.useRealTimers();
  });

  it('charges only inside the night slot, at its power limit, across 24 h', async () => {
    store.upsertSchedule(1, night, 'cmd_1');
    // A big battery at 20 % cannot fill up in one night: the slot alone decides.
    hal.plugIn(1, { capacityKwh: 200, soc: 20, maxChargeKw: 22, maxDischargeKw: 11 });
    loop = startLoop();
    await vi.advanceTimersByTimeAsync(1);
    expect(await state()).toBe('idle');

    await vi.advanceTimersByTimeAsync(4 * HOUR); // 22:00 Berlin
    expect(await state()).toBe('charging');
    await vi.advanceTimersByTimeAsync(MINUTE);
    expect((await hal.readConnector(1)).powerKw).toBeCloseTo(11, 3);

    await vi.advanceTimersByTimeAsync(8 * HOUR); // 06:00 Berlin
    expect(await state()).toBe('idle');
    await vi.advanceTimersByTimeAsync(12 * HOUR);
    expect(await state()).toBe('idle');

    // Exactly at the slot edges (21:00Z and 05:00Z): timers sit on nextChangeAt, not on a polling grid.
    expect(transitions.map((t) => [new Date(t.at).toISOString(), t.to])).toEqual([
      ['2026-01-14T21:00:00.000Z', 'charging'],
      ['2026-01-15T05:00:00.000Z', 'idle'],
    ]);
  });

  it('stops at target_soc', async () => {
    store.upsertSchedule(
      1,
      { ...night, time_slots: [{ start: '18:00', end: '06:00', action: 'charge' }], target_soc: 60 },
      'c',
    );
    hal.plugIn(1, { capacityKwh: 40, soc: 55, maxChargeKw: 11, maxDischargeKw: 11 });
    loop = startLoop();
    await vi.advanceTimersByTimeAsync(1);
    expect(await state()).toBe('charging');
    // The loop reacts to SOC through `observe` (the sampler calls it); feed it a reading every minute.
    for (let i = 0; i < 60 && (await state()) === 'charging'; i++) {
      await vi.advanceTimersByTimeAsync(MINUTE);
      loop.observe(await hal.readConnectors());
      await vi.advanceTimersByTimeAsync(0);
    }
    const reading = await hal.readConnector(1);
    expect(reading.state).toBe('idle');
    expect(reading.soc).toBe(60);
    expect(loop.targets().get(1)?.reason).toMatch(/target_soc 60% reached/);
  });

  it('applies a pause and a power limit for exactly their windows', async () => {
    hal.plugIn(1, { capacityKwh: 200, soc: 20, maxChargeKw: 22, maxDischargeKw: 11 });
    const at = (ms: number) => new Date(START + ms).toISOString();
    store.upsertLimit({
      control_id: 'pause',
      kind: 'pause',
      starts_at: at(HOUR),
      ends_at: at(2 * HOUR),
      commandId: 'c1',
      receivedAt: at(0),
    });
    store.upsertLimit({
      control_id: 'half',
      kind: 'power_limit',
      power_limit_percent: 50,
      starts_at: at(3 * HOUR),
      ends_at: at(4 * HOUR),
      commandId: 'c2',
      receivedAt: at(0),
    });
    loop = startLoop();
    await vi.advanceTimersByTimeAsync(MINUTE);
    expect((await hal.readConnector(1)).powerKw).toBeCloseTo(22, 3);
    await vi.advanceTimersByTimeAsync(HOUR);
    expect(await state()).toBe('idle');
    await vi.advanceTimersByTimeAsync(HOUR);
    expect(await state()).toBe('charging');
    await vi.advanceTimersByTimeAsync(HOUR + MINUTE);
    expect((await hal.readConnector(1)).powerKw).toBeCloseTo(11, 3);
    await vi.advanceTimersByTimeAsync(HOUR);
    expect((await hal.readConnector(1)).powerKw).toBeCloseTo(22, 3);
    expect(transitions.map((t) => [new Date(t.at).toISOString(), t.to])).toEqual([
      ['2026-01-14T17:00:00.000Z', 'charging'],
      ['2026-01-14T18:00:00.000Z', 'idle'],
      ['2026-01-14T19:00:00.000Z', 'charging'],
    ]);
  });

  it('lands in the right state after a reboot, from the store alone', async () => {
    store.upsertSchedule(1, night, 'cmd_1');
    hal.plugIn(1, { capacityKwh: 200, soc: 20, maxChargeKw: 22, maxDischargeKw: 11 });
    loop = startLoop();
    await vi.advanceTimersByTimeAsync(1);
    expect(await state()).toBe('idle');
    loop.stop(); // the agent dies at 18:00 ...
    await vi.advanceTimersByTimeAsync(5 * HOUR);
    expect(await state()).toBe('idle'); // ... nobody switched the charger on at 22:00 ...
    loop = startLoop(); // ... and it comes back at 23:00
    await vi.advanceTimersByTimeAsync(1);
    expect(await state()).toBe('charging');
  });

  it('catches a wall-clock jump that no timer announced, within the safety interval', async () => {
    store.upsertSchedule(1, night, 'cmd_1');
    hal.plugIn(1, { capacityKwh: 200, soc: 20, maxChargeKw: 22, maxDischargeKw: 11 });
    loop = startLoop(MINUTE);
    await vi.advanceTimersByTimeAsync(1);
    expect(await state()).toBe('idle');
    // NTP fixes a clock that was 4 h behind: the wall clock jumps, timers (monotonic) do not fire.
    vi.setSystemTime(START + 4 * HOUR + 30 * MINUTE);
    expect(await state()).toBe('idle');
    await vi.advanceTimersByTimeAsync(MINUTE);
    expect(await state()).toBe('charging');
  });
});
