/**
 * The simulated charger's firmware (DESIGN.md §19): what the simulated HAL's optional `installFirmware` and
 * `firmwareVersion` do. An install takes a set span of simulated time and settles on the first advance of the
 * simulation that reaches its end (`settle`), so it follows `tick` and, once the HAL is started, the wall clock,
 * like everything else in the simulator. It draws no random numbers: seeded runs stay as they were. Faults are
 * chosen up front, by option.
 */
import type { FirmwareManifest } from '../agent/hal.js';

export const FIRMWARE_FAULTS = ['install_fails', 'verification_fails', 'no_firmware_capability'] as const;
/**
 * `install_fails`: every install rejects at its end; `verification_fails`: installs resolve but the old version
 * stays (the updater fell back); `no_firmware_capability`: the HAL lacks `installFirmware`/`firmwareVersion`.
 */
export type FirmwareFault = (typeof FIRMWARE_FAULTS)[number];

/** What the simulated charger runs until an install changes it (and reports at registration). */
export const SIMULATED_FIRMWARE_VERSION = '1.0.0-sim';
/** An install, with its reboot, takes two minutes of simulated time unless told otherwise. */
export const DEFAULT_FIRMWARE_INSTALL_MS = 2 * 60_000;

export function isFirmwareFault(value: unknown): value is FirmwareFault {
  return (FIRMWARE_FAULTS as readonly unknown[]).includes(value);
}

export interface SimulatedFirmwareSettings {
  version: string;
  installMs: number;
  fault?: FirmwareFault;
}

export interface SimulatedFirmware {
  version(): string;
  /** Begins an install at simulated instant `now`; one at a time. */
  install(manifest: FirmwareManifest, now: number): Promise<void>;
  /** Ends an install whose time has come; called after every advance of the simulation. */
  settle(now: number): void;
}

interface PendingInstall {
  manifest: FirmwareManifest;
  doneAt: number;
  resolve: () => void;
  reject: (error: Error) => void;
}

export function createSimulatedFirmware(settings: SimulatedFirmwareSettings): SimulatedFirmware {
  let version = settings.version;
  let pending: PendingInstall | undefined;

  function settle(now: number): void {
    if (!pending || now < pending.doneAt) return;
    const done = pending;
    pending = undefined;
    if (settings.fault === 'install_fails') {
      done.reject(new Error(`simulated fault: firmware ${done.manifest.version} failed to install`));
      return;
    }
    if (settings.fault !== 'verification_fails') version = done.manifest.version;
    done.resolve();
  }

  return {
    version: () => version,
    install(manifest, now) {
      if (pending) {
        return Promise.reject(new Error(`firmware ${pending.manifest.version} is being installed already`));
      }
      const promise = new Promise<void>((resolve, reject) => {
        pending = {
          manifest: { ...manifest },
          doneAt: now + Math.max(0, settings.installMs),
          resolve,
          reject,
        };
      });
      settle(now); // an install that takes no time ends at once
      return promise;
    },
    settle,
  };
}
