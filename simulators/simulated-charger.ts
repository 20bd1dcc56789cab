/**
 * The state of one simulated charger's hardware (`simulated-hal.ts`): its connectors, the simulation's clock,
 * its random streams and listeners; how a connector's power and state follow from its session, limits and
 * vehicle; and what a reading of it shows.
 *
 * Electrical model: three-phase AC at 230 V per phase (22 kW = 3 × 230 V × 32 A). Power is positive into
 * the vehicle and negative while exporting; the import meter register only ever grows, and export is
 * counted in its own register.
 */
import {
  type ConnectorHardwareState,
  type ConnectorInfo,
  type ConnectorReading,
  HalError,
  type HardwareEvent,
  type HardwareEventListener,
} from '../agent/hal.js';
import { chargePowerKw, createRandomEv, dischargePowerKw, type Ev } from './ev-model.js';
import { createSeededRandom, exponentialDelay, type RandomSource, uniformBetween } from './seeded-random.js';

export const MS_PER_MINUTE = 60_000;
export const MS_PER_HOUR = 3_600_000;
const PHASES = 3;
export const NOMINAL_VOLTAGE_V = 230;

type Session = 'none' | 'charging' | 'discharging';

export interface SimulatedConnector {
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

/** The simulated HAL's options with their defaults applied. */
export interface SimulationSettings {
  connectors: number;
  ratedPowerKw: number;
  v2g: boolean;
  randomVehicles: boolean;
  initialOccupancy: number;
  meanVacancyMs: number;
  dwellMs: [number, number];
  meanTimeBetweenFaultsMs: number;
  faultDurationMs: [number, number];
  autoStartCharging: boolean;
}

export interface SimulatedCharger {
  readonly settings: SimulationSettings;
  readonly connectors: SimulatedConnector[];
  /** The simulation's current instant, ms. */
  now: number;
  readonly random: RandomSource;
  /** Measurement noise draws from its own stream so that reading values never shift the event sequence. */
  readonly noise: RandomSource;
  readonly listeners: Set<HardwareEventListener>;
}

function newConnector(charger: SimulatedCharger, id: number): SimulatedConnector {
  const { settings, random, now } = charger;
  const ambientC = uniformBetween(random, 12, 26);
  const connector: SimulatedConnector = {
    info: { connectorId: id, ratedPowerKw: settings.ratedPowerKw, v2gCapable: settings.v2g },
    session: 'none',
    powerLimitKw: settings.ratedPowerKw,
    dischargeRequestKw: 0,
    powerKw: 0,
    voltageV: NOMINAL_VOLTAGE_V,
    importedKwh: 0,
    exportedKwh: 0,
    ambientC,
    temperatureC: ambientC,
    faultCode: 0,
    state: 'idle',
    faultAt: now + exponentialDelay(random, settings.meanTimeBetweenFaultsMs),
  };
  if (settings.randomVehicles) {
    if (random() < settings.initialOccupancy) {
      connector.ev = createRandomEv(random);
      if (settings.autoStartCharging) {
        connector.session = 'charging';
        connector.state = 'charging';
      }
      connector.departsAt = now + uniformBetween(random, settings.dwellMs[0], settings.dwellMs[1]);
    } else {
      connector.arrivesAt = now + exponentialDelay(random, settings.meanVacancyMs);
    }
  }
  return connector;
}

/** A charger at `now` with its connectors as they start: some with a vehicle, some waiting for one. */
export function createSimulatedCharger(
  settings: SimulationSettings,
  seed: number,
  now: number,
): SimulatedCharger {
  const charger: SimulatedCharger = {
    settings,
    connectors: [],
    now,
    random: createSeededRandom(seed),
    noise: createSeededRandom(seed ^ 0x9e3779b9),
    listeners: new Set(),
  };
  for (let id = 1; id <= settings.connectors; id++) charger.connectors.push(newConnector(charger, id));
  // Initial power from the initial sessions; nobody listens yet, so this emits nothing.
  for (const connector of charger.connectors) refresh(charger, connector);
  return charger;
}

export function emit(charger: SimulatedCharger, event: HardwareEvent): void {
  for (const listener of charger.listeners) {
    try {
      listener(event);
    } catch {
      // A faulty listener must not stop the hardware; the HAL contract says listeners do not throw.
    }
  }
}

export function connectorOf(charger: SimulatedCharger, connectorId: number): SimulatedConnector {
  const connector = charger.connectors[connectorId - 1];
  if (!connector) throw new HalError('unknown_connector', `no connector ${connectorId}`);
  return connector;
}

/** The session goes on only while there is a vehicle, no fault, and the vehicle has room (or charge) left. */
function sessionOf(connector: SimulatedConnector): Session {
  const { ev } = connector;
  if (connector.faultCode !== 0 || !ev) return 'none';
  if (connector.session === 'charging' && ev.soc >= 100) return 'none'; // the vehicle is full and ends it
  if (connector.session === 'discharging' && dischargePowerKw(ev, 1) === 0) return 'none'; // its own floor
  return connector.session;
}

/** Power and state follow from the session, the limits and the vehicle; emits a change of state. */
export function refresh(charger: SimulatedCharger, connector: SimulatedConnector): void {
  const { ev } = connector;
  const cap = Math.min(connector.info.ratedPowerKw, connector.powerLimitKw);
  connector.session = sessionOf(connector);
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
    emit(charger, {
      type: 'state_changed',
      connectorId: connector.info.connectorId,
      at: new Date(charger.now),
      from,
      to: state,
    });
  }
}

function round(value: number, decimals: number): number {
  const factor = 10 ** decimals;
  return Math.round(value * factor) / factor;
}

export function readingOf(c: SimulatedConnector): ConnectorReading {
  const result: ConnectorReading = {
    connectorId: c.info.connectorId,
    state: c.state,
    voltageV: round(c.voltageV, 1),
    currentA: round((c.powerKw * 1000) / (PHASES * c.voltageV), 2),
    powerKw: round(c.powerKw, 3),
    energyKwh: round(c.importedKwh, 3),
    energyExportedKwh: round(c.exportedKwh, 3),
    vehiclePresent: c.ev !== undefined,
    temperatureC: round(c.temperatureC, 1),
    faultCode: c.faultCode,
  };
  if (c.ev) result.soc = Math.floor(c.ev.soc);
  return result;
}
