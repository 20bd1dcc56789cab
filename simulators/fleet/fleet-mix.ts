/**
 * Who is in the fleet: a seeded, reproducible mix of chargers (same seed, same fleet).
 *
 * - Connectors: 60 % single, 40 % twin.
 * - Rating: AC wallboxes, 11 kW (50 %), 22 kW (40 %), 7.4 kW (10 %); V2G chargers are 11 kW bidirectional.
 * - V2G: exactly round(count × v2gShare) chargers (default 20 %), picked at random.
 * - Vehicles (realistic mix): the simulated HAL's model — half the connectors occupied at the start, a free
 *   connector waits 45 min on average for the next car, a car stays 30 min to 8 h; faults at a low rate (one per
 *   500 h per connector, cleared after 1-10 min).
 *   `allCharging`: every connector has a car with a very large battery that charges continuously for days and
 *   never faults — the steady load of a fully busy fleet (telemetry every interval, from every connector).
 * - Network outages: exactly round(count × outageShare) chargers (default 5 %) lose their network once, for a
 *   while (see `outageWindowFor`).
 * - Start: charger n starts at n × ramp / count, so registration does not stampede.
 * - Pace (`FleetPace`): `sandbox` makes vehicles come and go within minutes (`paceHalOptions`).
 */
import { BATTERY_CAPACITIES_KWH, ONBOARD_CHARGER_KW } from '../ev-model.js';
import { createSeededRandom, pickOne, type RandomSource, uniformBetween } from '../seeded-random.js';
import type { SimulatedHalOptions } from '../simulated-hal.js';

export interface OutageWindowOptions {
  /** Offsets from the fleet's start at which outages begin, ms: uniform in [min, max]. */
  startMs: [number, number];
  /** How long an outage lasts, ms: uniform in [min, max]. */
  durationMs: [number, number];
}

export interface MixOptions {
  count: number;
  seed: number;
  rampMs: number;
  /** Share of V2G chargers, 0..1. */
  v2gShare: number;
  /** Share of chargers that lose their network once, 0..1. */
  outageShare: number;
  /** Run length, if known: outages are placed inside it. */
  durationMs?: number;
  outageWindow?: OutageWindowOptions;
  /** Share of twin-connector chargers; default 0.4. */
  twinShare?: number;
  /** At least this many V2G chargers, whatever round(count × v2gShare) gives (at most count); default 0. */
  minV2g?: number;
}

export interface ChargerPlan {
  index: number;
  sn: string;
  /** Seeds this charger's HAL and its agent's jitter. */
  seed: number;
  connectors: number;
  v2g: boolean;
  ratedPowerKw: number;
  /** Offset from the fleet's start, ms. */
  startAtMs: number;
  /** Offsets from the fleet's start, ms. */
  outage?: { startMs: number; endMs: number };
}

export function serialNumber(seed: number, n: number): string {
  return `SIM-${seed}-${n}`;
}

/** `k` distinct indices of `0..n-1`, chosen at random (partial Fisher-Yates). */
function pickIndices(random: RandomSource, n: number, k: number): Set<number> {
  const indices = Array.from({ length: n }, (_, i) => i);
  const take = Math.max(0, Math.min(n, k));
  for (let i = 0; i < take; i++) {
    const j = i + Math.floor(random() * (n - i));
    [indices[i], indices[j]] = [indices[j]!, indices[i]!];
  }
  return new Set(indices.slice(0, take));
}

/**
 * When the fleet's outages happen, as offsets from its start. With a known duration D: they begin between
 * 10 % and 50 % of D and last between min(30 s, 10 % of D) and min(120 s, 30 % of D) — over well before the
 * end, so the backlog drains while the fleet still runs. Without one: they begin 30 s to 5 min after the ramp
 * and last 30 s to 2 min.
 */
export function outageWindowFor(durationMs: number | undefined, rampMs: number): OutageWindowOptions {
  if (durationMs !== undefined && durationMs > 0) {
    return {
      startMs: [0.1 * durationMs, 0.5 * durationMs],
      durationMs: [Math.min(30_000, 0.1 * durationMs), Math.min(120_000, 0.3 * durationMs)],
    };
  }
  return { startMs: [rampMs + 30_000, rampMs + 300_000], durationMs: [30_000, 120_000] };
}

export function planFleet(options: MixOptions): ChargerPlan[] {
  const { count, seed, rampMs } = options;
  const random = createSeededRandom(seed);
  const v2g = pickIndices(random, count, Math.max(options.minV2g ?? 0, Math.round(count * options.v2gShare)));
  const outages = pickIndices(random, count, Math.round(count * options.outageShare));
  const window = options.outageWindow ?? outageWindowFor(options.durationMs, rampMs);
  const twinShare = options.twinShare ?? 0.4;
  const plans: ChargerPlan[] = [];
  for (let index = 0; index < count; index++) {
    const isV2g = v2g.has(index);
    const roll = random();
    const plan: ChargerPlan = {
      index,
      sn: serialNumber(seed, index + 1),
      seed: Math.floor(random() * 4_294_967_296),
      connectors: random() < twinShare ? 2 : 1,
      v2g: isV2g,
      ratedPowerKw: isV2g ? 11 : roll < 0.5 ? 11 : roll < 0.9 ? 22 : 7.4,
      startAtMs: count <= 1 ? 0 : Math.round((index * rampMs) / count),
    };
    if (outages.has(index)) {
      const start = Math.max(plan.startAtMs, uniformBetween(random, ...window.startMs));
      plan.outage = {
        startMs: Math.round(start),
        endMs: Math.round(start + uniformBetween(random, ...window.durationMs)),
      };
    }
    plans.push(plan);
  }
  return plans;
}

/**
 * How fast vehicles come and go. `realistic` (the default): the simulated HAL's own model above, a day's
 * rhythm. `sandbox`: an evaluation's pace, so that a handful of chargers shows sessions starting and ending,
 * status changes and new charging records within minutes — three in four connectors have a car at the start,
 * a free connector waits 2 min on average for the next one, a car stays 2 to 8 min (about seven in ten
 * connectors busy at any time); and at least one V2G charger, unless the V2G share is 0 (`fleet-runner.ts`).
 */
export const FLEET_PACES = ['realistic', 'sandbox'] as const;
export type FleetPace = (typeof FLEET_PACES)[number];

const MINUTE_MS = 60_000;

/** The simulated-HAL options of a pace; explicit `hal` options (`FleetOptions.hal`) win over them. */
export function paceHalOptions(pace: FleetPace): Partial<SimulatedHalOptions> {
  if (pace === 'realistic') return {};
  return { initialOccupancy: 0.75, meanVacancyMs: 2 * MINUTE_MS, dwellMs: [2 * MINUTE_MS, 8 * MINUTE_MS] };
}

export interface HalMode {
  allCharging: boolean;
  /** Extra simulated-HAL options (tests, benchmarks): they win over the mix. */
  overrides?: Partial<SimulatedHalOptions>;
}

/** The simulated HAL's options for one planned charger. */
export function halOptionsFor(plan: ChargerPlan, mode: HalMode): SimulatedHalOptions {
  const base: SimulatedHalOptions = {
    connectors: plan.connectors,
    v2g: plan.v2g,
    ratedPowerKw: plan.ratedPowerKw,
    seed: plan.seed,
  };
  if (mode.allCharging) {
    base.vehicles = 'manual';
    base.meanTimeBetweenFaultsMs = Number.POSITIVE_INFINITY;
  }
  return { ...base, ...mode.overrides };
}

/** A car that charges for days: all-charging mode plugs one into every connector. */
export function tirelessVehicle(random: RandomSource): {
  capacityKwh: number;
  soc: number;
  maxChargeKw: number;
  maxDischargeKw: number;
} {
  const maxChargeKw = pickOne(random, ONBOARD_CHARGER_KW);
  return {
    // 20x the largest real battery: at 22 kW, 10 % → 80 % takes about 60 hours.
    capacityKwh: 20 * Math.max(...BATTERY_CAPACITIES_KWH),
    soc: Math.round(uniformBetween(random, 10, 40)),
    maxChargeKw,
    maxDischargeKw: Math.min(maxChargeKw, 11),
  };
}
