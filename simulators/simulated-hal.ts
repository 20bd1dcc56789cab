/**
 * Simulated charger hardware: a HAL implementation (agent/hal.ts) with vehicles that arrive, charge on a
 * realistic curve and leave, and connectors that occasionally fault. The hardware's state and model are in
 * `simulated-charger.ts`, what happens to it over time in `simulated-events.ts`, its firmware installs in
 * `simulated-firmware.ts`; this is the HAL over them.
 *
 * Deterministic: every random draw comes from a PRNG seeded by `seed`, and time only moves when `tick` is
 * called. `start()` drives `tick` from an interval (injectable timers and clock, so tests can use fake time);
 * without `start()` nothing moves on its own.
 */
import { type DeviceInfo, type Hal, HalError, type HalOptions, type Unsubscribe } from '../agent/hal.js';
import { createRandomEv, type Ev } from './ev-model.js';
import { randomSeed } from './seeded-random.js';
import {
  connectorOf,
  createSimulatedCharger,
  MS_PER_HOUR,
  MS_PER_MINUTE,
  readingOf,
  refresh,
  type SimulatedCharger,
  type SimulationSettings,
} from './simulated-charger.js';
import {
  clearFault,
  departureAt,
  plugIn,
  raiseFault,
  SIMULATED_FAULT_CODES,
  tick,
  unplug,
} from './simulated-events.js';
import {
  createSimulatedFirmware,
  DEFAULT_FIRMWARE_INSTALL_MS,
  type FirmwareFault,
  isFirmwareFault,
  SIMULATED_FIRMWARE_VERSION,
  type SimulatedFirmware,
} from './simulated-firmware.js';
import {
  createMaintenanceLog,
  isMaintenanceFault,
  type MaintenanceFault,
  type MaintenanceLog,
  maintenanceMembers,
} from './simulated-maintenance.js';

export interface SimulatedTimers {
  setInterval(callback: () => void, ms: number): unknown;
  clearInterval(handle: unknown): void;
}

export interface SimulatedHalOptions extends HalOptions {
  connectors?: number;
  v2g?: boolean;
  /** kW per connector; default 22. */
  ratedPowerKw?: number;
  /** Same seed and same ticks give the same run. Random when absent. */
  seed?: number;
  /** Wall clock, ms; used by `start()` to measure elapsed time and as the simulation's starting instant. */
  now?: () => number;
  timers?: SimulatedTimers;
  /** Interval of `start()`, ms; default 1000. */
  tickIntervalMs?: number;
  /** `random`: vehicles come and go by themselves; `manual`: only `plugIn`/`unplug` (tests). Default random. */
  vehicles?: 'random' | 'manual';
  /** Share of connectors occupied at start (random vehicles only); default 0.5. */
  initialOccupancy?: number;
  /** Mean time a free connector waits for the next vehicle; default 45 min. */
  meanVacancyMs?: number;
  /** A vehicle stays between these, ms; default 30 min to 8 h. */
  dwellMs?: [number, number];
  /** Mean time between faults per connector; default 500 h. Infinity turns random faults off. */
  meanTimeBetweenFaultsMs?: number;
  /** A fault clears after between these, ms; default 1 to 10 min. */
  faultDurationMs?: [number, number];
  /** Start charging as soon as a vehicle plugs in (when no agent drives the simulator). Default false. */
  autoStartCharging?: boolean;
  /** The firmware version at start (`getDeviceInfo`, `firmwareVersion()`); default 1.0.0-sim. */
  initialFirmwareVersion?: string;
  /** Simulated time an `installFirmware` takes, ms; default 2 min. */
  firmwareInstallMs?: number;
  /** A firmware fault to simulate (`simulated-firmware.ts`); none by default. */
  firmwareFault?: FirmwareFault;
  /** Remote-maintenance faults to simulate (`simulated-maintenance.ts`); none by default. */
  maintenanceFaults?: MaintenanceFault[];
}

export interface SimulatedHal extends Hal {
  start(): Promise<void>;
  close(): Promise<void>;
  /** Advance the simulation by `elapsedMs` of simulated time. */
  tick(elapsedMs: number): void;
  /** The simulation's current instant, ms. */
  now(): number;
  readonly seed: number;
  plugIn(connectorId: number, ev?: Partial<Ev>): void;
  unplug(connectorId: number): void;
  raiseFault(connectorId: number, faultCode?: number): void;
  clearFault(connectorId: number): void;
  /** The plugged-in vehicle, for tests and the fleet runner. */
  vehicleOf(connectorId: number): Ev | undefined;
  /** Reboots and cable unlocks the hardware went through. */
  readonly maintenance: MaintenanceLog;
}

function settingsFrom(options: SimulatedHalOptions): SimulationSettings {
  return {
    connectors: Math.max(1, Math.floor(options.connectors ?? 1)),
    ratedPowerKw: options.ratedPowerKw ?? 22,
    v2g: options.v2g ?? false,
    randomVehicles: (options.vehicles ?? 'random') === 'random',
    initialOccupancy: options.initialOccupancy ?? 0.5,
    meanVacancyMs: options.meanVacancyMs ?? 45 * MS_PER_MINUTE,
    dwellMs: options.dwellMs ?? [30 * MS_PER_MINUTE, 8 * MS_PER_HOUR],
    meanTimeBetweenFaultsMs: options.meanTimeBetweenFaultsMs ?? 500 * MS_PER_HOUR,
    faultDurationMs: options.faultDurationMs ?? [MS_PER_MINUTE, 10 * MS_PER_MINUTE],
    autoStartCharging: options.autoStartCharging ?? false,
  };
}

/** The HAL's commands; each first brings the simulation up to the wall clock (`catchUp`). */
function halCommands(
  charger: SimulatedCharger,
  catchUp: () => void,
): Pick<Hal, 'setPowerLimit' | 'startCharging' | 'stopCharging' | 'startDischarging'> {
  return {
    async setPowerLimit(connectorId, kw) {
      catchUp();
      const c = connectorOf(charger, connectorId);
      if (!Number.isFinite(kw) || kw < 0)
        throw new HalError('invalid_power', `power limit must be ≥ 0 kW, got ${kw}`);
      c.powerLimitKw = kw;
      refresh(charger, c);
    },
    async startCharging(connectorId) {
      catchUp();
      const c = connectorOf(charger, connectorId);
      if (c.faultCode !== 0)
        throw new HalError('fault', `connector ${connectorId} is in fault ${c.faultCode}`);
      if (!c.ev) throw new HalError('no_vehicle', `no vehicle on connector ${connectorId}`);
      c.session = 'charging';
      refresh(charger, c);
    },
    async stopCharging(connectorId) {
      catchUp();
      const c = connectorOf(charger, connectorId);
      c.session = 'none';
      refresh(charger, c);
    },
    async startDischarging(connectorId, kw) {
      catchUp();
      const c = connectorOf(charger, connectorId);
      if (!c.info.v2gCapable)
        throw new HalError('not_v2g_capable', `connector ${connectorId} is not V2G-capable`);
      if (!Number.isFinite(kw) || kw <= 0)
        throw new HalError('invalid_power', `discharge power must be > 0 kW, got ${kw}`);
      if (c.faultCode !== 0)
        throw new HalError('fault', `connector ${connectorId} is in fault ${c.faultCode}`);
      if (!c.ev) throw new HalError('no_vehicle', `no vehicle on connector ${connectorId}`);
      c.session = 'discharging';
      c.dischargeRequestKw = kw;
      refresh(charger, c);
    },
  };
}

/** The HAL's optional firmware members, absent with the `no_firmware_capability` fault. */
function firmwareMembers(
  firmware: SimulatedFirmware,
  fault: FirmwareFault | undefined,
  catchUp: () => void,
  simulatedNow: () => number,
): Pick<Hal, 'installFirmware' | 'firmwareVersion'> {
  if (fault === 'no_firmware_capability') return {};
  return {
    async installFirmware(_file, manifest) {
      catchUp();
      return firmware.install(manifest, simulatedNow());
    },
    async firmwareVersion() {
      catchUp();
      return firmware.version();
    },
  };
}

/** What tests and the fleet do to the hardware by hand: vehicles, faults. */
function manualControls(
  charger: SimulatedCharger,
): Pick<SimulatedHal, 'plugIn' | 'unplug' | 'raiseFault' | 'clearFault' | 'vehicleOf'> {
  return {
    plugIn(connectorId, ev) {
      const c = connectorOf(charger, connectorId);
      if (c.ev) unplug(charger, c);
      plugIn(charger, c, { ...createRandomEv(charger.random), ...ev });
      c.departsAt = charger.settings.randomVehicles ? departureAt(charger) : undefined;
    },
    unplug(connectorId) {
      const c = connectorOf(charger, connectorId);
      if (c.ev) unplug(charger, c);
    },
    raiseFault(connectorId, faultCode = SIMULATED_FAULT_CODES.groundFault) {
      raiseFault(charger, connectorOf(charger, connectorId), faultCode);
    },
    clearFault(connectorId) {
      clearFault(charger, connectorOf(charger, connectorId));
    },
    vehicleOf(connectorId) {
      const ev = connectorOf(charger, connectorId).ev;
      return ev ? { ...ev } : undefined;
    },
  };
}

export function createSimulatedHal(options: SimulatedHalOptions = {}): SimulatedHal {
  const seed = options.seed ?? randomSeed();
  const wallClock = options.now ?? Date.now;
  const timers: SimulatedTimers = options.timers ?? {
    setInterval: (callback, ms) => setInterval(callback, ms),
    clearInterval: (handle) => clearInterval(handle as NodeJS.Timeout),
  };
  const tickIntervalMs = options.tickIntervalMs ?? 1_000;
  const charger = createSimulatedCharger(settingsFrom(options), seed, wallClock());
  const firmware = createSimulatedFirmware({
    version: options.initialFirmwareVersion ?? SIMULATED_FIRMWARE_VERSION,
    installMs: options.firmwareInstallMs ?? DEFAULT_FIRMWARE_INSTALL_MS,
    fault: options.firmwareFault,
  });
  const maintenance = createMaintenanceLog();
  let interval: unknown;
  let lastWallTick = charger.now;

  /** Every advance of the simulation goes through here, so that a firmware install ends when its time comes. */
  function advance(elapsedMs: number): void {
    tick(charger, elapsedMs);
    firmware.settle(charger.now);
  }

  /**
   * Once started, the simulation follows the wall clock: the interval advances it, and so does every reading
   * and every command in between, so that readings are current and a change of power takes effect at the
   * instant it was made, however long the interval (the fleet ticks at the telemetry cadence to save CPU).
   */
  function catchUp(): void {
    if (interval === undefined) return;
    const wallNow = wallClock();
    if (wallNow > lastWallTick) advance(wallNow - lastWallTick);
    lastWallTick = wallNow;
  }

  return {
    seed,
    now: () => charger.now,
    tick: advance,
    async getDeviceInfo(): Promise<DeviceInfo> {
      return {
        connectorCount: charger.connectors.length,
        connectors: charger.connectors.map((c) => ({ ...c.info })),
        model: 'SIM-AC22',
        manufacturer: 'Simulated',
        firmwareVersion: firmware.version(),
      };
    },
    async readConnector(connectorId) {
      catchUp();
      return readingOf(connectorOf(charger, connectorId));
    },
    async readConnectors() {
      catchUp();
      return charger.connectors.map(readingOf);
    },
    ...halCommands(charger, catchUp),
    subscribe(listener): Unsubscribe {
      charger.listeners.add(listener);
      return () => {
        charger.listeners.delete(listener);
      };
    },
    async start() {
      if (interval !== undefined) return;
      lastWallTick = wallClock();
      interval = timers.setInterval(catchUp, tickIntervalMs);
    },
    async close() {
      if (interval !== undefined) timers.clearInterval(interval);
      interval = undefined;
    },
    ...firmwareMembers(firmware, options.firmwareFault, catchUp, () => charger.now),
    ...maintenanceMembers(charger, maintenance, options.maintenanceFaults ?? [], catchUp),
    maintenance,
    ...manualControls(charger),
  };
}

/** Options a HAL config block may carry for the simulator (`--config` file, `hal` section). */
function simulatorOptionsFrom(config: Record<string, unknown> | undefined): SimulatedHalOptions {
  if (!config) return {};
  const options: SimulatedHalOptions = {};
  const number = (key: string) => (typeof config[key] === 'number' ? (config[key] as number) : undefined);
  const seed = number('seed');
  if (seed !== undefined) options.seed = seed;
  const rated = number('ratedPowerKw');
  if (rated !== undefined) options.ratedPowerKw = rated;
  const occupancy = number('initialOccupancy');
  if (occupancy !== undefined) options.initialOccupancy = occupancy;
  const vacancy = number('meanVacancyMs');
  if (vacancy !== undefined) options.meanVacancyMs = vacancy;
  const mtbf = number('meanTimeBetweenFaultsMs');
  if (mtbf !== undefined) options.meanTimeBetweenFaultsMs = mtbf;
  // JSON has no Infinity: `"faults": false` turns random faults off.
  if (config.faults === false) options.meanTimeBetweenFaultsMs = Number.POSITIVE_INFINITY;
  const tick = number('tickIntervalMs');
  if (tick !== undefined) options.tickIntervalMs = tick;
  const range = (key: string): [number, number] | undefined => {
    const value = config[key];
    return Array.isArray(value) && value.length === 2 && value.every((v) => typeof v === 'number')
      ? [value[0] as number, value[1] as number]
      : undefined;
  };
  const dwell = range('dwellMs');
  if (dwell) options.dwellMs = dwell;
  const faultDuration = range('faultDurationMs');
  if (faultDuration) options.faultDurationMs = faultDuration;
  if (config.vehicles === 'random' || config.vehicles === 'manual') options.vehicles = config.vehicles;
  if (typeof config.autoStartCharging === 'boolean') options.autoStartCharging = config.autoStartCharging;
  const installMs = number('firmwareInstallMs');
  if (installMs !== undefined) options.firmwareInstallMs = installMs;
  if (typeof config.initialFirmwareVersion === 'string')
    options.initialFirmwareVersion = config.initialFirmwareVersion;
  if (isFirmwareFault(config.firmwareFault)) options.firmwareFault = config.firmwareFault;
  if (Array.isArray(config.maintenanceFaults))
    options.maintenanceFaults = config.maintenanceFaults.filter(isMaintenanceFault);
  return options;
}

/** The HAL-module contract (agent/hal-loader.ts): the simulator is loaded like any OEM HAL. */
export function createHal(options: HalOptions): SimulatedHal {
  return createSimulatedHal({ ...simulatorOptionsFrom(options.config), ...options });
}
export default createHal;
