/**
 * A plugged-in electric vehicle, as seen from the charger: battery size, state of charge and how much power
 * it accepts. Pure functions; the simulated HAL owns time and randomness.
 */
import { pickOne, type RandomSource, uniformBetween } from './seeded-random.js';

/** Usable battery sizes of common cars, kWh. */
export const BATTERY_CAPACITIES_KWH = [40, 50, 58, 64, 77, 82, 100] as const;
/** On-board AC charger limits of common cars, kW. */
export const ONBOARD_CHARGER_KW = [7.4, 11, 11, 11, 22] as const;

/** Full power up to this SOC, then a linear taper. */
export const TAPER_START_SOC = 80;
/** Fraction of full power still accepted just below 100 %. */
export const TAPER_END_FRACTION = 0.1;
/** Share of grid energy that reaches the battery (and of battery energy that reaches the grid). */
export const CHARGING_EFFICIENCY = 0.92;
/** The vehicle's own floor for V2G export; the agent's `min_soc` normally stops discharge well before. */
export const VEHICLE_MIN_DISCHARGE_SOC = 5;

export interface Ev {
  capacityKwh: number;
  /** Percent, fractional; the charger reports it rounded down. */
  soc: number;
  maxChargeKw: number;
  maxDischargeKw: number;
}

export function createRandomEv(random: RandomSource): Ev {
  const maxChargeKw = pickOne(random, ONBOARD_CHARGER_KW);
  return {
    capacityKwh: pickOne(random, BATTERY_CAPACITIES_KWH),
    soc: Math.round(uniformBetween(random, 10, 70)),
    maxChargeKw,
    maxDischargeKw: Math.min(maxChargeKw, 11),
  };
}

/** Share of the vehicle's maximum it accepts at `soc`: 1 up to 80 %, tapering to 10 % near 100 %, 0 when full. */
export function chargeAcceptance(soc: number): number {
  if (soc >= 100) return 0;
  if (soc <= TAPER_START_SOC) return 1;
  return 1 - (1 - TAPER_END_FRACTION) * ((soc - TAPER_START_SOC) / (100 - TAPER_START_SOC));
}

/** Power the vehicle draws when the charger offers `offeredKw`. */
export function chargePowerKw(ev: Ev, offeredKw: number): number {
  return Math.max(0, Math.min(offeredKw, ev.maxChargeKw * chargeAcceptance(ev.soc)));
}

/** Power the vehicle exports when asked for `requestedKw` (positive). */
export function dischargePowerKw(ev: Ev, requestedKw: number): number {
  if (ev.soc <= VEHICLE_MIN_DISCHARGE_SOC) return 0;
  return Math.max(0, Math.min(requestedKw, ev.maxDischargeKw));
}

/** The vehicle after `gridKwh` crossed the connector: positive into the car, negative out of it. */
export function afterEnergy(ev: Ev, gridKwh: number): Ev {
  const batteryKwh = gridKwh >= 0 ? gridKwh * CHARGING_EFFICIENCY : gridKwh / CHARGING_EFFICIENCY;
  const soc = Math.min(100, Math.max(0, ev.soc + (batteryKwh / ev.capacityKwh) * 100));
  return { ...ev, soc };
}
