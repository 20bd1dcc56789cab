/**
 * Simulated charger hardware: a HAL implementation (agent/hal.ts) with vehicles that arrive, charge on a
 * realistic curve and leave, and connectors that occasionally fault.
 *
 * Deterministic: every random draw comes from a PRNG seeded by `seed`, and time only moves when `tick` is
 * called. `start()` drives `tick` from an interval (injectable timers and clock, so tests can use fake time);
 * without `start()` nothing moves on its own.
 *
 * Electrical model: three-phase AC at 230 V per phase (22 kW = 3 × 230 V × 32 A). Power is positive into
 * the vehicle and negative while exporting; the import meter register only ever grows, and export is
 * counted in its own register.
 */
import {
  type ConnectorHardwareState,
  type ConnectorInfo,
  type ConnectorReading,
  type DeviceInfo,
  type Hal,
  HalError,
  type HalOptions,
  type HardwareEvent,
  type HardwareEventListener,
  type Unsubscribe,
} from '../agent/hal.js';
import { afterEnergy, chargePowerKw, createRandomEv, dischargePowerKw, type Ev } from './ev-model.js';
import {
  createSeededRandom,
  exponentialDelay,
  pickOne,
  randomSeed,
  uniformBetween,
} from './seeded-random.js';

const MS_PER_MINUTE = 60_000;
const MS_PER_HOUR = 3_600_000;
/** Longest physics step; a long `tick` is split so the charging curve is followed closely. */
const MAX_STEP_MS = 1_000;
const PHASES = 3;
const NOMINAL_VOLTAGE_V = 230;

/** Codes the simulator raises; 0 means no fault, as on the wire. */
export const SIMULATED_FAULT_CODES = {
  groundFault: 101,
  overTemperature: 102,
  vehicleCommunicationLost: 103,
  overCurrent: 104,
} as const;

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
}

type Session = 'none' | 'charging' | 'discharging';

interface SimulatedConnector {
  info: ConnectorInfo;
  ev?: Ev;
  session: Session;
  powerLimitKw: number;
  dischargeRequestKw: number;
  powerKw: number;
  voltageV: number;
  importedKwh: number;
  exportedKwh: number;
  ambientC: number;
  temperatureC: number;
  faultCode: number;
  state: ConnectorHardwareState;
  arrivesAt?: number;
  departsAt?: number;
  faultAt: number;
  faultClearsAt?: number;
}

export function createSimulatedHal(options: SimulatedHalOptions = {}): SimulatedHal {
  const seed = options.seed ?? randomSeed();
  const random = createSeededRandom(seed);
  // Measurement noise draws from its own stream so that reading values never shifts the event sequence.
  const noise = createSeededRandom(seed ^ 0x9e3779b9);
  const wallClock = options.now ?? Date.now;
  const timers: SimulatedTimers = options.timers ?? {
    setInterval: (callback, ms) => setInterval(callback, ms),
    clearInterval: (handle) => clearInterval(handle as NodeJS.Timeout),
  };
  const tickIntervalMs = options.tickIntervalMs ?? 1_000;
  const ratedPowerKw = options.ratedPowerKw ?? 22;
  const randomVehicles = (options.vehicles ?? 'random') === 'random';
  const meanVacancyMs = options.meanVacancyMs ?? 45 * MS_PER_MINUTE;
  const [dwellMin, dwellMax] = options.dwellMs ?? [30 * MS_PER_MINUTE, 8 * MS_PER_HOUR];
  const meanTimeBetweenFaultsMs = options.meanTimeBetweenFaultsMs ?? 500 * MS_PER_HOUR;
  const [faultMin, faultMax] = options.faultDurationMs ?? [MS_PER_MINUTE, 10 * MS_PER_MINUTE];
  const listeners = new Set<HardwareEventListener>();
  let simNow = wallClock();
  let interval: unknown;
  let lastWallTick = simNow;

  const connectorCount = Math.max(1, Math.floor(options.connectors ?? 1));
  const connectors: SimulatedConnector[] = [];
  for (let id = 1; id <= connectorCount; id++) {
    const ambientC = uniformBetween(random, 12, 26);
    const connector: SimulatedConnector = {
      info: { connectorId: id, ratedPowerKw, v2gCapable: options.v2g ?? false },
      session: 'none',
      powerLimitKw: ratedPowerKw,
      dischargeRequestKw: 0,
      powerKw: 0,
      voltageV: NOMINAL_VOLTAGE_V,
      importedKwh: 0,
      exportedKwh: 0,
      ambientC,
      temperatureC: ambientC,
      faultCode: 0,
      state: 'idle',
      faultAt: simNow + exponentialDelay(random, meanTimeBetweenFaultsMs),
    };
    if (randomVehicles) {
      if (random() < (options.initialOccupancy ?? 0.5)) {
        connector.ev = createRandomEv(random);
        if (options.autoStartCharging) {
          connector.session = 'charging';
          connector.state = 'charging';
        }
        connector.departsAt = simNow + uniformBetween(random, dwellMin, dwellMax);
      } else {
        connector.arrivesAt = simNow + exponentialDelay(random, meanVacancyMs);
      }
    }
    connectors.push(connector);
  }
  // Initial power from the initial sessions; nobody listens yet, so this emits nothing.
  for (const connector of connectors) refresh(connector);

  function emit(event: HardwareEvent): void {
    for (const listener of listeners) {
      try {
        listener(event);
      } catch {
        // A faulty listener must not stop the hardware; the HAL contract says listeners do not throw.
      }
    }
  }

  function connectorOf(connectorId: number): SimulatedConnector {
    const connector = connectors[connectorId - 1];
    if (!connector) throw new HalError('unknown_connector', `no connector ${connectorId}`);
    return connector;
  }

  /** Power and state follow from the session, the limits and the vehicle; emits a change of state. */
  function refresh(connector: SimulatedConnector): void {
    const { ev } = connector;
    const cap = Math.min(connector.info.ratedPowerKw, connector.powerLimitKw);
    if (connector.faultCode !== 0 || !ev) {
      connector.session = 'none';
    } else if (connector.session === 'charging' && ev.soc >= 100) {
      connector.session = 'none'; // the vehicle is full and ends the session itself
    } else if (connector.session === 'discharging' && dischargePowerKw(ev, 1) === 0) {
      connector.session = 'none'; // the vehicle's own floor
    }
    if (connector.session === 'charging' && ev) connector.powerKw = chargePowerKw(ev, cap);
    else if (connector.session === 'discharging' && ev) {
      connector.powerKw = -dischargePowerKw(ev, Math.min(cap, connector.dischargeRequestKw));
    } else connector.powerKw = 0;

    let state: ConnectorHardwareState = 'idle';
    if (connector.faultCode !== 0) state = 'fault';
    else if (connector.session === 'charging') state = 'charging';
    // Reported as discharging only while energy actually flows out (the wire requires negative power).
    else if (connector.session === 'discharging' && connector.powerKw < 0) state = 'discharging';
    if (state !== connector.state) {
      const from = connector.state;
      connector.state = state;
      emit({
        type: 'state_changed',
        connectorId: connector.info.connectorId,
        at: new Date(simNow),
        from,
        to: state,
      });
    }
  }

  function plugIn(connector: SimulatedConnector, ev: Ev): void {
    connector.ev = ev;
    connector.arrivesAt = undefined;
    emit({ type: 'vehicle_plugged', connectorId: connector.info.connectorId, at: new Date(simNow) });
    if (options.autoStartCharging && connector.faultCode === 0) connector.session = 'charging';
    refresh(connector);
  }

  function unplug(connector: SimulatedConnector): void {
    connector.ev = undefined;
    connector.departsAt = undefined;
    connector.session = 'none';
    refresh(connector);
    emit({ type: 'vehicle_unplugged', connectorId: connector.info.connectorId, at: new Date(simNow) });
    if (randomVehicles) connector.arrivesAt = simNow + exponentialDelay(random, meanVacancyMs);
  }

  function raiseFault(connector: SimulatedConnector, faultCode: number): void {
    if (connector.faultCode !== 0) return;
    connector.faultCode = faultCode;
    emit({ type: 'fault_raised', connectorId: connector.info.connectorId, at: new Date(simNow), faultCode });
    refresh(connector);
  }

  function clearFault(connector: SimulatedConnector): void {
    const faultCode = connector.faultCode;
    if (faultCode === 0) return;
    connector.faultCode = 0;
    connector.faultClearsAt = undefined;
    connector.faultAt = simNow + exponentialDelay(random, meanTimeBetweenFaultsMs);
    emit({ type: 'fault_cleared', connectorId: connector.info.connectorId, at: new Date(simNow), faultCode });
    refresh(connector);
  }

  function nextEventAt(): number {
    let next = Number.POSITIVE_INFINITY;
    for (const c of connectors) {
      for (const t of [
        c.arrivesAt,
        c.departsAt,
        c.faultClearsAt,
        c.faultCode === 0 ? c.faultAt : undefined,
      ]) {
        if (t !== undefined && t < next) next = t;
      }
    }
    return next;
  }

  function processDueEvents(): void {
    for (const c of connectors) {
      if (c.arrivesAt !== undefined && c.arrivesAt <= simNow && !c.ev) {
        plugIn(c, createRandomEv(random));
        c.departsAt = simNow + uniformBetween(random, dwellMin, dwellMax);
      }
      if (c.departsAt !== undefined && c.departsAt <= simNow && c.ev) unplug(c);
      if (c.faultCode === 0 && c.faultAt <= simNow) {
        raiseFault(c, pickOne(random, Object.values(SIMULATED_FAULT_CODES)));
        c.faultClearsAt = simNow + uniformBetween(random, faultMin, faultMax);
      }
      if (c.faultClearsAt !== undefined && c.faultClearsAt <= simNow) clearFault(c);
    }
  }

  /** Integrates from now to `until` at the power in force at the start. */
  function advancePhysics(until: number): void {
    const stepMs = until - simNow;
    for (const c of connectors) {
      const gridKwh = (c.powerKw * stepMs) / MS_PER_HOUR;
      if (gridKwh > 0) c.importedKwh += gridKwh;
      else c.exportedKwh -= gridKwh;
      if (c.ev && gridKwh !== 0) c.ev = afterEnergy(c.ev, gridKwh);
      // Contacts and cable warm with load, first-order toward a load-dependent temperature (τ = 10 min).
      const target = c.ambientC + 18 * (Math.abs(c.powerKw) / c.info.ratedPowerKw);
      c.temperatureC += (target - c.temperatureC) * (1 - Math.exp(-stepMs / (10 * MS_PER_MINUTE)));
      c.voltageV = NOMINAL_VOLTAGE_V + uniformBetween(noise, -2, 2);
    }
    // Assigned, not summed, so that a step ending on a random event lands on it exactly.
    simNow = until;
    for (const c of connectors) refresh(c);
  }

  function tick(elapsedMs: number): void {
    const end = simNow + Math.max(0, elapsedMs);
    processDueEvents();
    while (simNow < end) {
      // Stop exactly at the next random event so that its timing does not depend on how ticks are sliced.
      const nextEvent = nextEventAt();
      advancePhysics(Math.min(end, simNow + MAX_STEP_MS, nextEvent > simNow ? nextEvent : end));
      processDueEvents();
    }
  }

  /**
   * Once started, the simulation follows the wall clock: the interval advances it, and so does every reading
   * and every command in between, so that readings are current and a change of power takes effect at the
   * instant it was made, however long the interval (the fleet ticks at the telemetry cadence to save CPU).
   */
  function catchUp(): void {
    if (interval === undefined) return;
    const wallNow = wallClock();
    if (wallNow > lastWallTick) tick(wallNow - lastWallTick);
    lastWallTick = wallNow;
  }

  function reading(c: SimulatedConnector): ConnectorReading {
    const present = c.ev !== undefined;
    const result: ConnectorReading = {
      connectorId: c.info.connectorId,
      state: c.state,
      voltageV: round(c.voltageV, 1),
      currentA: round((c.powerKw * 1000) / (PHASES * c.voltageV), 2),
      powerKw: round(c.powerKw, 3),
      energyKwh: round(c.importedKwh, 3),
      energyExportedKwh: round(c.exportedKwh, 3),
      vehiclePresent: present,
      temperatureC: round(c.temperatureC, 1),
      faultCode: c.faultCode,
    };
    if (c.ev) result.soc = Math.floor(c.ev.soc);
    return result;
  }

  return {
    seed,
    now: () => simNow,
    tick,

    async getDeviceInfo(): Promise<DeviceInfo> {
      return {
        connectorCount,
        connectors: connectors.map((c) => ({ ...c.info })),
        model: 'SIM-AC22',
        manufacturer: 'Simulated',
        firmwareVersion: '1.0.0-sim',
      };
    },
    async readConnector(connectorId) {
      catchUp();
      return reading(connectorOf(connectorId));
    },
    async readConnectors() {
      catchUp();
      return connectors.map(reading);
    },

    async setPowerLimit(connectorId, kw) {
      catchUp();
      const c = connectorOf(connectorId);
      if (!Number.isFinite(kw) || kw < 0)
        throw new HalError('invalid_power', `power limit must be ≥ 0 kW, got ${kw}`);
      c.powerLimitKw = kw;
      refresh(c);
    },
    async startCharging(connectorId) {
      catchUp();
      const c = connectorOf(connectorId);
      if (c.faultCode !== 0)
        throw new HalError('fault', `connector ${connectorId} is in fault ${c.faultCode}`);
      if (!c.ev) throw new HalError('no_vehicle', `no vehicle on connector ${connectorId}`);
      c.session = 'charging';
      refresh(c);
    },
    async stopCharging(connectorId) {
      catchUp();
      const c = connectorOf(connectorId);
      c.session = 'none';
      refresh(c);
    },
    async startDischarging(connectorId, kw) {
      catchUp();
      const c = connectorOf(connectorId);
      if (!c.info.v2gCapable)
        throw new HalError('not_v2g_capable', `connector ${connectorId} is not V2G-capable`);
      if (!Number.isFinite(kw) || kw <= 0)
        throw new HalError('invalid_power', `discharge power must be > 0 kW, got ${kw}`);
      if (c.faultCode !== 0)
        throw new HalError('fault', `connector ${connectorId} is in fault ${c.faultCode}`);
      if (!c.ev) throw new HalError('no_vehicle', `no vehicle on connector ${connectorId}`);
      c.session = 'discharging';
      c.dischargeRequestKw = kw;
      refresh(c);
    },

    subscribe(listener): Unsubscribe {
      listeners.add(listener);
      return () => {
        listeners.delete(listener);
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

    plugIn(connectorId, ev) {
      const c = connectorOf(connectorId);
      if (c.ev) unplug(c);
      plugIn(c, { ...createRandomEv(random), ...ev });
      c.departsAt = randomVehicles ? simNow + uniformBetween(random, dwellMin, dwellMax) : undefined;
    },
    unplug(connectorId) {
      const c = connectorOf(connectorId);
      if (c.ev) unplug(c);
    },
    raiseFault(connectorId, faultCode = SIMULATED_FAULT_CODES.groundFault) {
      raiseFault(connectorOf(connectorId), faultCode);
    },
    clearFault(connectorId) {
      clearFault(connectorOf(connectorId));
    },
    vehicleOf(connectorId) {
      const ev = connectorOf(connectorId).ev;
      return ev ? { ...ev } : undefined;
    },
  };
}

function round(value: number, decimals: number): number {
  const factor = 10 ** decimals;
  return Math.round(value * factor) / factor;
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
  return options;
}

/** The HAL-module contract (agent/hal-loader.ts): the simulator is loaded like any OEM HAL. */
export function createHal(options: HalOptions): SimulatedHal {
  return createSimulatedHal({ ...simulatorOptionsFrom(options.config), ...options });
}
export default createHal;
