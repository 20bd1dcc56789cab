import type { Dispatcher } from 'undici';
import type { AgentRuntime } from '../../agent/runtime/agent-runtime.js';
import type { TelemetryRecord } from '../../shared/device-api.js';
import type { SimulatedHal } from '../../simulators/simulated-hal.js';
import type { Exchange } from './offline-link.js';
import { type Plan, RETURN_AT, type Visit } from './offline-plans.js';
import { type OracleLimit, type OracleSchedule, occurrences, oracleEvaluate } from './schedule-oracle.js';

/**
 * A charger of agent-30-days-offline.test.ts as the test follows it (its HAL, agent, what it did and what it was
 * told), and what the oracle (test/helpers/schedule-oracle.ts) says it should do.
 */

export interface Charger {
  plan: Plan;
  dir: string;
  hal: SimulatedHal;
  agent: AgentRuntime;
  deviceId: string;
  exchanges: Exchange[];
  dispatcher: { dispatcher: Dispatcher; close(): Promise<void> };
  /** Every power cap the agent set on the HAL, with the vehicle's SOC at that moment. */
  caps: Array<{ at: number; kw: number; soc: number | undefined }>;
  /** Every hardware state change. */
  states: Array<{ at: number; to: string }>;
  /** Telemetry the sampler produced, as handed to the uplink. */
  produced: TelemetryRecord[];
  schedules: OracleSchedule[];
  limits: OracleLimit[];
  visits: Visit[];
  /** Departures: the vehicle's SOC as it left, and what it arrived with. */
  departures: Array<{ at: number; soc: number; arrivedWith: number }>;
  failures: string[];
}

export const currentCap = (c: Charger) => c.caps.at(-1)?.kw;
export const socOf = (c: Charger) => {
  const ev = c.hal.vehicleOf(1);
  return ev ? Math.floor(ev.soc) : undefined;
};

/** The schedule and limit boundaries of the 30 days, from the oracle (soc unknown: the schedules' own caps). */
export function boundariesOf(c: Charger, outageAt: number): number[] {
  const edges = new Set<number>();
  for (const s of c.schedules) {
    for (const o of occurrences(s, outageAt, RETURN_AT)) edges.add(o.startsAt).add(o.endsAt);
  }
  for (const l of c.limits) edges.add(Date.parse(l.starts_at)).add(Date.parse(l.ends_at));
  return [...edges].filter((t) => t > outageAt && t < RETURN_AT).sort((a, b) => a - b);
}

/** What the oracle says of a charger at `at`, its vehicle at `soc` (if any). */
export const expectedAt = (c: Charger, at: number, soc: number | undefined) =>
  oracleEvaluate(
    {
      ratingKw: c.plan.ratingKw,
      v2gCapable: false,
      schedules: c.schedules,
      limits: c.limits,
      ...(soc !== undefined ? { soc } : {}),
      now: at,
    },
    0,
  );
