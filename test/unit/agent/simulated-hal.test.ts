import { describe, expect, it } from 'vitest';
import type { HardwareEvent } from '../../../agent/hal.js';
import { chargeAcceptance, chargePowerKw, type Ev } from '../../../simulators/ev-model.js';
import { createSeededRandom } from '../../../simulators/seeded-random.js';
import { createSimulatedHal, type SimulatedHalOptions } from '../../../simulators/simulated-hal.js';

const START = Date.parse('2026-01-14T08:00:00Z');
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

function manualHal(options: SimulatedHalOptions = {}) {
  const hal = createSimulatedHal({
    seed: 42,
    now: () => START,
    vehicles: 'manual',
    meanTimeBetweenFaultsMs: Number.POSITIVE_INFINITY,
    ...options,
  });
  const events: HardwareEvent[] = [];
  hal.subscribe((e) => events.push(e));
  return { hal, events };
}

const testEv: Partial<Ev> = { capacityKwh: 60, soc: 70, maxChargeKw: 22, maxDischargeKw: 11 };

describe('EV model', () => {
  it('accepts full power up to 80 % and tapers to 10 % near full', () => {
    expect(chargeAcceptance(20)).toBe(1);
    expect(chargeAcceptance(80)).toBe(1);
    expect(chargeAcceptance(90)).toBeCloseTo(0.55, 10);
    expect(chargeAcceptance(99.999)).toBeCloseTo(0.1, 3);
    expect(chargeAcceptance(100)).toBe(0);
    const ev: Ev = { capacityKwh: 60, soc: 50, maxChargeKw: 11, maxDischargeKw: 11 };
    expect(chargePowerKw(ev, 22)).toBe(11); // the on-board charger limits
    expect(chargePowerKw(ev, 7)).toBe(7); // the offer limits
  });

  it('seeded random is reproducible and in [0, 1)', () => {
    const a = createSeededRandom(7);
    const b = createSeededRandom(7);
    const xs = Array.from({ length: 1000 }, () => a());
    expect(Array.from({ length: 1000 }, () => b())).toEqual(xs);
    expect(Math.min(...xs)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...xs)).toBeLessThan(1);
    expect(createSeededRandom(8)()).not.toBe(xs[0]);
  });
});

describe('simulated HAL with a fake clock', () => {
  it('describes the device', async () => {
    const hal = createSimulatedHal({ connectors: 2, v2g: true, seed: 1, vehicles: 'manual' });
    const info = await hal.getDeviceInfo();
    expect(info.connectorCount).toBe(2);
    expect(info.connectors).toEqual([
      { connectorId: 1, ratedPowerKw: 22, v2gCapable: true },
      { connectorId: 2, ratedPowerKw: 22, v2gCapable: true },
    ]);
  });

  it('charges at full power below 80 %, tapers above it, and raises SOC and meter monotonically', async () => {
    const { hal, events } = manualHal();
    hal.plugIn(1, testEv);
    await hal.startCharging(1);
    expect(events.map((e) => e.type)).toEqual(['vehicle_plugged', 'state_changed']);

    hal.tick(MINUTE);
    const early = await hal.readConnector(1);
    expect(early.state).toBe('charging');
    expect(early.powerKw).toBe(22);
    expect(early.currentA).toBeGreaterThan(30);
    expect(early.currentA).toBeLessThan(33);
    expect(early.energyKwh).toBeCloseTo(22 / 60, 2);

    let lastEnergy = early.energyKwh;
    let lastSoc = early.soc ?? 0;
    let powerAt95: number | undefined;
    for (let i = 0; i < 6 * 60 && (await hal.readConnector(1)).state === 'charging'; i++) {
      hal.tick(MINUTE);
      const r = await hal.readConnector(1);
      expect(r.energyKwh).toBeGreaterThanOrEqual(lastEnergy);
      expect(r.soc ?? 0).toBeGreaterThanOrEqual(lastSoc);
      lastEnergy = r.energyKwh;
      lastSoc = r.soc ?? 0;
      if (powerAt95 === undefined && lastSoc >= 95) powerAt95 = r.powerKw;
    }
    // At 95 % the car accepts 1 - 0.9 × 15/20 = 32.5 % of its maximum.
    expect(powerAt95).toBeGreaterThan(0.25 * 22);
    expect(powerAt95).toBeLessThan(0.4 * 22);
    const full = await hal.readConnector(1);
    expect(full.soc).toBe(100);
    expect(full.state).toBe('idle');
    expect(full.powerKw).toBe(0);
    // 30 % of 60 kWh at 92 % efficiency from the grid.
    expect(full.energyKwh).toBeCloseTo((0.3 * 60) / 0.92, 1);
    expect(events.at(-1)).toMatchObject({ type: 'state_changed', from: 'charging', to: 'idle' });
  });

  it('respects the power limit', async () => {
    const { hal } = manualHal();
    hal.plugIn(1, testEv);
    await hal.setPowerLimit(1, 7);
    await hal.startCharging(1);
    hal.tick(10 * MINUTE);
    const r = await hal.readConnector(1);
    expect(r.powerKw).toBe(7);
    expect(r.energyKwh).toBeCloseTo(7 / 6, 3);
  });

  it('refuses to charge without a vehicle, and discharge on non-V2G hardware', async () => {
    const { hal } = manualHal();
    await expect(hal.startCharging(1)).rejects.toMatchObject({ name: 'HalError', code: 'no_vehicle' });
    hal.plugIn(1, testEv);
    await expect(hal.startDischarging(1, 5)).rejects.toMatchObject({ code: 'not_v2g_capable' });
    await expect(hal.readConnector(3)).rejects.toMatchObject({ code: 'unknown_connector' });
  });

  it('discharges with negative power, an export register, a steady import meter and falling SOC', async () => {
    const { hal, events } = manualHal({ v2g: true });
    hal.plugIn(1, { ...testEv, soc: 60 });
    await hal.startDischarging(1, 8);
    hal.tick(30 * MINUTE);
    const r = await hal.readConnector(1);
    expect(r.state).toBe('discharging');
    expect(r.powerKw).toBe(-8);
    expect(r.currentA).toBeLessThan(0);
    expect(r.energyKwh).toBe(0);
    expect(r.energyExportedKwh).toBeCloseTo(4, 3);
    // 4 kWh out of the grid side is 4 / 0.92 kWh out of a 60 kWh battery.
    expect(hal.vehicleOf(1)?.soc).toBeCloseTo(60 - (4 / 0.92 / 60) * 100, 3);
    expect(events.some((e) => e.type === 'state_changed' && e.to === 'discharging')).toBe(true);
  });

  it('raises and clears faults with events, and refuses to charge while faulted', async () => {
    const { hal, events } = manualHal();
    hal.plugIn(1, testEv);
    await hal.startCharging(1);
    events.length = 0;
    hal.raiseFault(1, 102);
    const faulted = await hal.readConnector(1);
    expect(faulted).toMatchObject({ state: 'fault', faultCode: 102, powerKw: 0 });
    await expect(hal.startCharging(1)).rejects.toMatchObject({ code: 'fault' });
    hal.clearFault(1);
    expect((await hal.readConnector(1)).state).toBe('idle');
    expect(events.map((e) => e.type)).toEqual([
      'fault_raised',
      'state_changed',
      'fault_cleared',
      'state_changed',
    ]);
    expect(events[0]).toMatchObject({ connectorId: 1, faultCode: 102, at: new Date(START) });
  });

  it('time-stamps events with simulated time', async () => {
    const { hal, events } = manualHal();
    hal.tick(5 * MINUTE);
    hal.plugIn(1, testEv);
    expect(events[0]?.at.toISOString()).toBe('2026-01-14T08:05:00.000Z');
    expect(hal.now()).toBe(START + 5 * MINUTE);
  });

  it('start() advances by wall-clock elapsed time on the injected timers; close() stops it', async () => {
    let wall = START;
    const callbacks: Array<() => void> = [];
    const cleared: unknown[] = [];
    const hal = createSimulatedHal({
      seed: 3,
      vehicles: 'manual',
      now: () => wall,
      timers: {
        setInterval: (callback, ms) => {
          expect(ms).toBe(500);
          callbacks.push(callback);
          return 'handle';
        },
        clearInterval: (handle) => cleared.push(handle),
      },
      tickIntervalMs: 500,
    });
    await hal.start();
    expect(callbacks).toHaveLength(1);
    wall += 2 * MINUTE;
    callbacks[0]?.();
    expect(hal.now()).toBe(START + 2 * MINUTE);
    await hal.close();
    expect(cleared).toEqual(['handle']);
  });

  it('once started, reads and commands bring it up to the wall clock between ticks', async () => {
    let wall = START;
    const hal = createSimulatedHal({
      seed: 3,
      vehicles: 'manual',
      ratedPowerKw: 11,
      now: () => wall,
      // A tick that never comes: only reads and commands move the simulation.
      timers: { setInterval: () => 'handle', clearInterval: () => undefined },
      tickIntervalMs: HOUR,
    });
    hal.plugIn(1, { soc: 20, capacityKwh: 200, maxChargeKw: 22 });
    await hal.startCharging(1);
    expect(hal.now()).toBe(START); // not started: time stands still
    await hal.start();
    wall += 30 * MINUTE;
    const charging = await hal.readConnector(1);
    expect(hal.now()).toBe(START + 30 * MINUTE);
    expect(charging.energyKwh).toBeCloseTo(5.5, 1); // 11 kW for half an hour
    // The stop takes effect at its own instant: nothing more flows after it, however late the next read.
    wall += 30 * MINUTE;
    await hal.stopCharging(1);
    wall += 2 * HOUR;
    expect((await hal.readConnector(1)).energyKwh).toBeCloseTo(11, 1);
    await hal.close();
  });
});

describe('simulated HAL randomness', () => {
  async function run(seed: number) {
    const hal = createSimulatedHal({
      seed,
      connectors: 3,
      now: () => START,
      autoStartCharging: true,
      meanTimeBetweenFaultsMs: 4 * HOUR,
    });
    const events: string[] = [];
    hal.subscribe((e) => events.push(`${e.at.toISOString()} ${e.connectorId} ${e.type}`));
    for (let i = 0; i < 24 * 60; i++) hal.tick(MINUTE);
    return { events, readings: await hal.readConnectors() };
  }

  it('replays exactly from the same seed and differs with another', async () => {
    const a = await run(1234);
    const b = await run(1234);
    const c = await run(999);
    expect(b).toEqual(a);
    expect(c.events).not.toEqual(a.events);
  });

  it('brings vehicles, takes them away and raises faults that clear', async () => {
    const { events, readings } = await run(1234);
    const count = (type: string) => events.filter((e) => e.endsWith(` ${type}`)).length;
    expect(count('vehicle_plugged')).toBeGreaterThan(3);
    expect(count('vehicle_unplugged')).toBeGreaterThan(3);
    expect(count('fault_raised')).toBeGreaterThan(0);
    expect(count('fault_cleared')).toBeGreaterThan(0);
    expect(readings.reduce((sum, r) => sum + r.energyKwh, 0)).toBeGreaterThan(20);
  });

  it('does not depend on how time is sliced into ticks', async () => {
    const make = () =>
      createSimulatedHal({ seed: 77, connectors: 2, now: () => START, meanTimeBetweenFaultsMs: 6 * HOUR });
    const coarse = make();
    const fine = make();
    const coarseEvents: string[] = [];
    const fineEvents: string[] = [];
    coarse.subscribe((e) => coarseEvents.push(`${e.at.getTime()} ${e.connectorId} ${e.type}`));
    fine.subscribe((e) => fineEvents.push(`${e.at.getTime()} ${e.connectorId} ${e.type}`));
    coarse.tick(12 * HOUR);
    // Uneven slices, off the simulator's 1-second physics grid.
    for (let done = 0; done < 12 * HOUR; done += 7_777) fine.tick(Math.min(7_777, 12 * HOUR - done));
    expect(fine.now()).toBe(coarse.now());
    expect(coarseEvents.length).toBeGreaterThan(0);
    expect(fineEvents).toEqual(coarseEvents);
  });
});
