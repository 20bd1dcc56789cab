import { afterEach, describe, expect, it, vi } from 'vitest';
import type { FirmwareManifest } from '../../../agent/hal.js';
import { loadHal } from '../../../agent/hal-loader.js';
import { createSimulatedHal, type SimulatedHalOptions } from '../../../simulators/simulated-hal.js';

const START = Date.parse('2026-01-14T08:00:00Z');
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

const manifest: FirmwareManifest = {
  kind: 'firmware',
  version: '2.0.0-sim',
  target: 'SIM-AC22',
  sha256: 'a'.repeat(64),
  size: 1024,
};

function manualHal(options: SimulatedHalOptions = {}) {
  return createSimulatedHal({
    seed: 42,
    now: () => START,
    vehicles: 'manual',
    meanTimeBetweenFaultsMs: Number.POSITIVE_INFINITY,
    ...options,
  });
}

/** Settles to what the promise did, without an unhandled rejection while time is moved by hand. */
function outcomeOf(promise: Promise<void>): { current: 'pending' | 'resolved' | Error } {
  const outcome: { current: 'pending' | 'resolved' | Error } = { current: 'pending' };
  promise.then(
    () => {
      outcome.current = 'resolved';
    },
    (error: Error) => {
      outcome.current = error;
    },
  );
  return outcome;
}

const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('simulated HAL firmware, on manual ticks', () => {
  it('starts at the version it registers with', async () => {
    const hal = manualHal();
    expect(await hal.firmwareVersion?.()).toBe('1.0.0-sim');
    expect((await hal.getDeviceInfo()).firmwareVersion).toBe('1.0.0-sim');
    expect(await manualHal({ initialFirmwareVersion: '3.1' }).firmwareVersion?.()).toBe('3.1');
  });

  const cases: Array<{
    name: string;
    fault?: SimulatedHalOptions['firmwareFault'];
    outcome: 'resolved' | RegExp;
    versionAfter: string;
  }> = [
    { name: 'no fault: installs, then runs the new version', outcome: 'resolved', versionAfter: '2.0.0-sim' },
    {
      name: 'install_fails: rejects with a reason and keeps the old version',
      fault: 'install_fails',
      outcome: /simulated fault: firmware 2\.0\.0-sim failed to install/,
      versionAfter: '1.0.0-sim',
    },
    {
      name: 'verification_fails: resolves, but still runs the old version',
      fault: 'verification_fails',
      outcome: 'resolved',
      versionAfter: '1.0.0-sim',
    },
  ];
  it.each(cases)('$name', async ({ fault, outcome, versionAfter }) => {
    const hal = manualHal({ firmwareFault: fault, firmwareInstallMs: 5 * MINUTE });
    const install = outcomeOf(hal.installFirmware?.('/data/updates/fw.img', manifest) ?? Promise.resolve());
    hal.tick(5 * MINUTE - 1);
    await flush();
    expect(install.current).toBe('pending');
    expect(await hal.firmwareVersion?.()).toBe('1.0.0-sim');

    hal.tick(1);
    await flush();
    if (outcome === 'resolved') expect(install.current).toBe('resolved');
    else expect((install.current as Error).message).toMatch(outcome);
    expect(await hal.firmwareVersion?.()).toBe(versionAfter);
    expect((await hal.getDeviceInfo()).firmwareVersion).toBe(versionAfter);
  });

  it('no_firmware_capability: the HAL has neither member', () => {
    const hal = manualHal({ firmwareFault: 'no_firmware_capability' });
    expect(hal.installFirmware).toBeUndefined();
    expect(hal.firmwareVersion).toBeUndefined();
    expect('installFirmware' in hal || 'firmwareVersion' in hal).toBe(false);
  });

  it('installs one image at a time; an install that takes no time ends at once', async () => {
    const hal = manualHal();
    const first = hal.installFirmware?.('/f1', manifest);
    await expect(hal.installFirmware?.('/f2', { ...manifest, version: '3' })).rejects.toThrow(
      /2\.0\.0-sim is being installed already/,
    );
    hal.tick(2 * MINUTE); // the default install time
    await first;
    expect(await hal.firmwareVersion?.()).toBe('2.0.0-sim');

    const quick = manualHal({ firmwareInstallMs: 0 });
    await quick.installFirmware?.('/f', manifest);
    expect(await quick.firmwareVersion?.()).toBe('2.0.0-sim');
  });

  it('takes its options from a HAL config block (hal-options), like the other simulator options', async () => {
    const hal = await loadHal('simulated', {
      config: {
        seed: 5,
        vehicles: 'manual',
        initialFirmwareVersion: '0.9',
        firmwareInstallMs: 0,
        firmwareFault: 'verification_fails',
      },
    });
    await hal.installFirmware?.('/f', manifest);
    expect(await hal.firmwareVersion?.()).toBe('0.9');
    const without = await loadHal('simulated', { config: { firmwareFault: 'no_firmware_capability' } });
    expect(without.installFirmware).toBeUndefined();
  });

  it('draws no random numbers: a seeded run is the same with an install under way', async () => {
    async function run(install: boolean) {
      const hal = createSimulatedHal({
        seed: 1234,
        connectors: 2,
        now: () => START,
        autoStartCharging: true,
        meanTimeBetweenFaultsMs: 4 * HOUR,
      });
      const events: string[] = [];
      hal.subscribe((e) => events.push(`${e.at.getTime()} ${e.connectorId} ${e.type}`));
      if (install) void hal.installFirmware?.('/f', manifest);
      for (let i = 0; i < 12 * 60; i++) hal.tick(MINUTE);
      return { events, readings: await hal.readConnectors() };
    }
    expect(await run(true)).toEqual(await run(false));
  });
});

describe('simulated HAL firmware, started, on fake timers', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('an install ends when the wall clock has moved past its time', async () => {
    vi.useFakeTimers({ now: START });
    const hal = createSimulatedHal({ seed: 7, vehicles: 'manual', firmwareInstallMs: 3 * MINUTE });
    await hal.start();
    const install = outcomeOf(hal.installFirmware?.('/f', manifest) ?? Promise.resolve());
    await vi.advanceTimersByTimeAsync(3 * MINUTE - 1_000);
    expect(install.current).toBe('pending');
    await vi.advanceTimersByTimeAsync(1_000);
    expect(install.current).toBe('resolved');
    expect(await hal.firmwareVersion?.()).toBe('2.0.0-sim');
    expect(hal.now()).toBe(START + 3 * MINUTE);
    await hal.close();
  });

  it('install_fails rejects when its time is up', async () => {
    vi.useFakeTimers({ now: START });
    const hal = createSimulatedHal({ seed: 7, vehicles: 'manual', firmwareFault: 'install_fails' });
    await hal.start();
    const install = outcomeOf(hal.installFirmware?.('/f', manifest) ?? Promise.resolve());
    await vi.advanceTimersByTimeAsync(2 * MINUTE);
    expect(install.current).toBeInstanceOf(Error);
    expect(await hal.firmwareVersion?.()).toBe('1.0.0-sim');
    await hal.close();
  });
});
