/**
 * What happens to a simulated charger (`simulated-charger.ts`): vehicles plug in and leave, connectors fault
 * and recover — at random times drawn from its seeded stream, or when a test or the HAL asks — and how the
 * simulation moves forward in time between those events.
 */
import { afterEnergy, createRandomEv, type Ev } from './ev-model.js';
import { exponentialDelay, pickOne, uniformBetween } from './seeded-random.js';
import {
  emit,
  MS_PER_HOUR,
  MS_PER_MINUTE,
  NOMINAL_VOLTAGE_V,
  refresh,
  type SimulatedCharger,
  type SimulatedConnector,
} from './simulated-charger.js';

/** Codes the simulator raises; 0 means no fault, as on the wire. */
export const SIMULATED_FAULT_CODES = {
  groundFault: 101,
  overTemperature: 102,
  vehicleCommunicationLost: 103,
  overCurrent: 104,
} as const;

/** Longest physics step; a long `tick` is split so the charging curve is followed closely. */
const MAX_STEP_MS = 1_000;

/** When a vehicle that plugs in now leaves: within the dwell range (random vehicles only). */
export function departureAt(charger: SimulatedCharger): number {
  const [dwellMin, dwellMax] = charger.settings.dwellMs;
  return charger.now + uniformBetween(charger.random, dwellMin, dwellMax);
}

export function plugIn(charger: SimulatedCharger, connector: SimulatedConnector, ev: Ev): void {
  connector.ev = ev;
  connector.arrivesAt = undefined;
  emit(charger, {
    type: 'vehicle_plugged',
    connectorId: connector.info.connectorId,
    at: new Date(charger.now),
  });
  if (charger.settings.autoStartCharging && connector.faultCode === 0) connector.session = 'charging';
  refresh(charger, connector);
}

export function unplug(charger: SimulatedCharger, connector: SimulatedConnector): void {
  connector.ev = undefined;
  connector.departsAt = undefined;
  connector.session = 'none';
  refresh(charger, connector);
  emit(charger, {
    type: 'vehicle_unplugged',
    connectorId: connector.info.connectorId,
    at: new Date(charger.now),
  });
  if (charger.settings.randomVehicles)
    connector.arrivesAt = charger.now + exponentialDelay(charger.random, charger.settings.meanVacancyMs);
}

export function raiseFault(
  charger: SimulatedCharger,
  connector: SimulatedConnector,
  faultCode: number,
): void {
  if (connector.faultCode !== 0) return;
  connector.faultCode = faultCode;
  const at = new Date(charger.now);
  emit(charger, { type: 'fault_raised', connectorId: connector.info.connectorId, at, faultCode });
  refresh(charger, connector);
}

export function clearFault(charger: SimulatedCharger, connector: SimulatedConnector): void {
  const faultCode = connector.faultCode;
  if (faultCode === 0) return;
  connector.faultCode = 0;
  connector.faultClearsAt = undefined;
  connector.faultAt =
    charger.now + exponentialDelay(charger.random, charger.settings.meanTimeBetweenFaultsMs);
  const at = new Date(charger.now);
  emit(charger, { type: 'fault_cleared', connectorId: connector.info.connectorId, at, faultCode });
  refresh(charger, connector);
}

function nextEventAt(charger: SimulatedCharger): number {
  let next = Number.POSITIVE_INFINITY;
  for (const c of charger.connectors) {
    for (const t of [c.arrivesAt, c.departsAt, c.faultClearsAt, c.faultCode === 0 ? c.faultAt : undefined]) {
      if (t !== undefined && t < next) next = t;
    }
  }
  return next;
}

function processDueEvents(charger: SimulatedCharger): void {
  const { random } = charger;
  const [faultMin, faultMax] = charger.settings.faultDurationMs;
  for (const c of charger.connectors) {
    if (c.arrivesAt !== undefined && c.arrivesAt <= charger.now && !c.ev) {
      plugIn(charger, c, createRandomEv(random));
      c.departsAt = departureAt(charger);
    }
    if (c.departsAt !== undefined && c.departsAt <= charger.now && c.ev) unplug(charger, c);
    if (c.faultCode === 0 && c.faultAt <= charger.now) {
      raiseFault(charger, c, pickOne(random, Object.values(SIMULATED_FAULT_CODES)));
      c.faultClearsAt = charger.now + uniformBetween(random, faultMin, faultMax);
    }
    if (c.faultClearsAt !== undefined && c.faultClearsAt <= charger.now) clearFault(charger, c);
  }
}

/** Integrates from now to `until` at the power in force at the start. */
function advancePhysics(charger: SimulatedCharger, until: number): void {
  const stepMs = until - charger.now;
  for (const c of charger.connectors) {
    const gridKwh = (c.powerKw * stepMs) / MS_PER_HOUR;
    if (gridKwh > 0) c.importedKwh += gridKwh;
    else c.exportedKwh -= gridKwh;
    if (c.ev && gridKwh !== 0) c.ev = afterEnergy(c.ev, gridKwh);
    // Contacts and cable warm with load, first-order toward a load-dependent temperature (τ = 10 min).
    const target = c.ambientC + 18 * (Math.abs(c.powerKw) / c.info.ratedPowerKw);
    c.temperatureC += (target - c.temperatureC) * (1 - Math.exp(-stepMs / (10 * MS_PER_MINUTE)));
    c.voltageV = NOMINAL_VOLTAGE_V + uniformBetween(charger.noise, -2, 2);
  }
  // Assigned, not summed, so that a step ending on a random event lands on it exactly.
  charger.now = until;
  for (const c of charger.connectors) refresh(charger, c);
}

/** Advances the simulation by `elapsedMs` of simulated time. */
export function tick(charger: SimulatedCharger, elapsedMs: number): void {
  const end = charger.now + Math.max(0, elapsedMs);
  processDueEvents(charger);
  while (charger.now < end) {
    // Stop exactly at the next random event so that its timing does not depend on how ticks are sliced.
    const nextEvent = nextEventAt(charger);
    const now = charger.now;
    advancePhysics(charger, Math.min(end, now + MAX_STEP_MS, nextEvent > now ? nextEvent : end));
    processDueEvents(charger);
  }
}
