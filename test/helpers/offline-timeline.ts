import { expect } from 'vitest';
import type { AgentRuntime } from '../../agent/runtime/agent-runtime.js';
import { boundariesOf, type Charger, currentCap, expectedAt, socOf } from './offline-chargers.js';
import { BOUND_MS, HOUR, MINUTE, OUTBOX_CAP, RETURN_AT } from './offline-plans.js';
import type { VirtualClock } from './virtual-clock.js';

/**
 * The 30 days offline of agent-30-days-offline.test.ts as a timeline run on the agents' virtual clock, in order:
 * vehicles arriving and leaving, probes of the cap and state against the oracle (just before and a bound after
 * every boundary, and every 20 minutes), the hourly outbox check, and each charger's reboot. What does not hold
 * is collected in each charger's `failures`; the reboot asserts at once.
 */

type Action = { at: number; order: number; run: () => Promise<void> | void };

interface Month {
  chargers: Charger[];
  outageAt: number;
  clock: VirtualClock;
  /** A new agent runtime on the charger's store (the reboot). */
  startRuntime: (c: Charger) => Promise<AgentRuntime>;
  actions: Action[];
  /** Per charger, the instants of its vehicles' arrivals and departures (a change under way after each). */
  causes: Map<Charger, number[]>;
}

export interface MonthResult {
  /** Per charger, the schedule and limit boundaries of the 30 days. */
  boundaries: Map<Charger, number[]>;
  /** Boundaries at which the cap must change (given the vehicle's SOC just before), and to what. */
  due: Map<Charger, Array<{ at: number; to: number }>>;
  /** The open sessions before and after each charger's reboot. */
  reboots: Map<Charger, { openBefore: string[]; openAfter: string[] }>;
  /** The largest outbox of the hourly checks. */
  maxOutbox: number;
}

/** Builds the month's timeline and runs it to RETURN_AT. */
export async function runOfflineMonth(
  chargers: Charger[],
  outageAt: number,
  clock: VirtualClock,
  startRuntime: (c: Charger) => Promise<AgentRuntime>,
): Promise<MonthResult> {
  const month: Month = { chargers, outageAt, clock, startRuntime, actions: [], causes: new Map() };
  vehicles(month);
  const { boundaries, due } = boundaryChecks(month);
  const outbox = outboxChecks(month);
  const reboots = rebootsOf(month);
  const { actions } = month;
  actions.sort((a, b) => a.at - b.at || a.order - b.order);
  for (const action of actions) {
    await clock.advanceTo(action.at);
    await action.run();
  }
  await clock.advanceTo(RETURN_AT);
  return { boundaries, due, reboots, maxOutbox: outbox.max };
}

function vehicles({ chargers, actions, causes }: Month): void {
  for (const c of chargers) {
    const list: number[] = [];
    causes.set(c, list);
    for (const v of c.visits) {
      list.push(v.arriveAt, v.departAt);
      actions.push({
        at: v.arriveAt,
        order: 1,
        run: async () => {
          await c.hal.readConnectors(); // the simulation up to now, then the vehicle
          c.hal.plugIn(1, v.ev);
        },
      });
      actions.push({
        at: v.departAt,
        order: 1,
        run: async () => {
          await c.hal.readConnectors();
          c.departures.push({ at: v.departAt, soc: socOf(c) ?? -1, arrivedWith: v.ev.soc });
          c.hal.unplug(1);
        },
      });
    }
  }
}

/** The cap and state must be what the oracle says, unless a change is under way (within the bound). */
function probe({ actions, causes }: Month, c: Charger, at: number, why: string): void {
  actions.push({
    at,
    order: 2,
    run: async () => {
      const recent = (causes.get(c) ?? []).some((t) => t <= at && at < t + BOUND_MS);
      if (recent) return;
      const soc = socOf(c);
      const expected = expectedAt(c, at, soc);
      const cap = currentCap(c);
      const state = (await c.hal.readConnector(1)).state;
      const present = soc !== undefined;
      // Just reached the target: the agent sees it at its next sample (a minute at most); at the target
      // exactly, the cap may still be the slot's.
      const reaching =
        expected.maxPowerKw === 0 &&
        soc !== undefined &&
        expectedAt(c, at, soc - 1).maxPowerKw === cap &&
        expected.active.some((o) => o.targetSoc === soc);
      if (reaching) return;
      if (
        cap !== expected.maxPowerKw ||
        state !== (present && expected.maxPowerKw > 0 ? 'charging' : 'idle')
      ) {
        c.failures.push(
          `${why} at ${new Date(at).toISOString()}: cap ${cap} kW and ${state} (soc ${soc}), oracle ${expected.maxPowerKw} kW`,
        );
      }
    },
  });
}

function boundaryChecks(month: Month): Pick<MonthResult, 'boundaries' | 'due'> {
  const { chargers, actions, outageAt } = month;
  const boundaries = new Map<Charger, number[]>();
  /** Boundaries at which the cap must change (given the vehicle's SOC just before), and to what. */
  const due = new Map<Charger, Array<{ at: number; to: number }>>();
  for (const c of chargers) {
    const edges = boundariesOf(c, outageAt);
    boundaries.set(c, edges);
    const changes: Array<{ at: number; to: number }> = [];
    due.set(c, changes);
    for (const b of edges) {
      probe(month, c, b - 1, 'just before a boundary');
      probe(month, c, b + BOUND_MS, 'a bound after a boundary');
      actions.push({
        at: b - 1,
        order: 3,
        run: () => {
          const soc = socOf(c);
          const from = expectedAt(c, b - 1, soc).maxPowerKw;
          const to = expectedAt(c, b, soc).maxPowerKw;
          // A vehicle a point below a target may reach it any moment: then the change is not the boundary's.
          const settled =
            soc === undefined ||
            (expectedAt(c, b - 1, soc + 1).maxPowerKw === from &&
              expectedAt(c, b, soc + 1).maxPowerKw === to);
          if (from !== to && settled) changes.push({ at: b, to });
        },
      });
    }
    for (let t = outageAt + 7 * MINUTE + 31_000; t < RETURN_AT; t += 20 * MINUTE)
      probe(month, c, t, 'periodic');
  }
  return { boundaries, due };
}

// The outbox within its cap, dropping only telemetry: checked every hour.
function outboxChecks({ chargers, actions, outageAt }: Month): { max: number } {
  const outbox = { max: 0 };
  for (let t = outageAt + HOUR; t < RETURN_AT; t += HOUR) {
    actions.push({
      at: t,
      order: 3,
      run: () => {
        for (const c of chargers) {
          const size = c.agent.store.outbox.size();
          outbox.max = Math.max(outbox.max, size.items);
          if (size.items > OUTBOX_CAP.maxItems || size.bytes > OUTBOX_CAP.maxBytes)
            c.failures.push(`outbox over its cap at ${new Date(t).toISOString()}: ${JSON.stringify(size)}`);
          const dropped = c.agent.store.outbox.droppedCounts();
          if (dropped.event + dropped.charging_record + dropped.command_status > 0)
            c.failures.push(`dropped more than telemetry: ${JSON.stringify(dropped)}`);
        }
      },
    });
  }
  return outbox;
}

// The reboot: stop the runtime and start a new one on the same store at the same instant.
function rebootsOf({ chargers, actions, clock, startRuntime }: Month): MonthResult['reboots'] {
  const reboots = new Map<Charger, { openBefore: string[]; openAfter: string[] }>();
  for (const c of chargers) {
    actions.push({
      at: c.plan.rebootAt,
      order: 0,
      run: async () => {
        const before = {
          cap: currentCap(c),
          state: (await c.hal.readConnector(1)).state,
          outbox: c.agent.store.outbox.peek(1_000_000),
          open: c.agent.store.openSessions().map((s) => s.recordId),
          caps: c.caps.length,
          states: c.states.length,
          dropped: c.agent.store.outbox.droppedCounts(),
        };
        expect(before.state, `${c.plan.name} charges when it reboots`).toBe('charging');
        await c.agent.stop();
        c.agent = await startRuntime(c);
        await clock.advanceTo(c.plan.rebootAt); // its first passes, at the same instant
        expect(clock.now()).toBe(c.plan.rebootAt);
        // Nothing changed on the hardware: still charging, the same cap set again at most.
        expect(c.states.slice(before.states)).toEqual([]);
        expect((await c.hal.readConnector(1)).state).toBe('charging');
        expect(c.caps.slice(before.caps).every((x) => x.kw === before.cap)).toBe(true);
        // The outbox survived: everything still there, plus the boot and configuration events and the first
        // sample (which, at the cap, pushed out as many of the oldest telemetry records).
        const after = c.agent.store.outbox.peek(1_000_000);
        const dropped = c.agent.store.outbox.droppedCounts();
        const pushedOut = new Set(
          before.outbox
            .filter((i) => i.kind === 'telemetry')
            .slice(0, dropped.telemetry - before.dropped.telemetry)
            .map((i) => i.seq),
        );
        const kept = before.outbox.filter((i) => !pushedOut.has(i.seq)).map((i) => i.seq);
        expect(after.slice(0, kept.length).map((i) => i.seq)).toEqual(kept);
        expect(
          after
            .slice(kept.length)
            .map((i) => i.kind)
            .sort(),
        ).toEqual(['event', 'event', 'telemetry']);
        expect({ ...dropped, telemetry: 0 }).toEqual({ ...before.dropped, telemetry: 0 });
        reboots.set(c, {
          openBefore: before.open,
          openAfter: c.agent.store.openSessions().map((s) => s.recordId),
        });
      },
    });
  }
  return reboots;
}
