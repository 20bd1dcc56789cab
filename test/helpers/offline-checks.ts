import { expect } from 'vitest';
import type { OutboxItem } from '../../agent/store/outbox.js';
import type { ChargingRecordUpload, DeviceEvent, TelemetryRecord } from '../../shared/device-api.js';
import { type Charger, expectedAt } from './offline-chargers.js';
import { BOUND_MS, OUTBOX_CAP, type Visit } from './offline-plans.js';
import type { MonthResult } from './offline-timeline.js';
import { occurrences } from './schedule-oracle.js';

/**
 * What agent-30-days-offline.test.ts checks once the 30 days have run: what they did on the hardware (every cap
 * change on time, stops at target_soc, the reboot), Berlin's and New York's DST nights by hand, and what each
 * agent owes the platform when it returns.
 */

/** What the 30 days did on the hardware. */
export function expectHardwareKept(chargers: Charger[], { boundaries, due, reboots }: MonthResult): void {
  for (const c of chargers) {
    const name = c.plan.name;
    expect(c.failures, name).toEqual([]);
    // Every boundary that changes the cap is met on time: the change is made at the boundary itself (timers
    // sit on nextChangeAt), within the bound in any case, and not before (the probe just before checked that).
    const changes = due.get(c) ?? [];
    for (const change of changes) {
      const made = c.caps.find((x) => x.at >= change.at);
      const what = `${name} boundary ${new Date(change.at).toISOString()}`;
      expect(made, what).toBeDefined();
      expect((made?.at ?? Number.POSITIVE_INFINITY) - change.at, what).toBeLessThanOrEqual(BOUND_MS);
      expect(made?.at, `${what} is met exactly`).toBe(change.at);
      expect(made?.kw, what).toBe(change.to);
    }
    // (Most boundaries: the others fall where a vehicle at its target holds the cap at 0 on both sides, or
    // where the limit ends inside a slot whose own cap is lower.)
    expect(changes.length, name).toBeGreaterThan((boundaries.get(c)?.length ?? 0) / 2);
    // Charging stops at target_soc. Every stop the agent made inside a slot, away from its boundaries, came
    // when the vehicle reached the lowest target of the slots in force — at it, not past it.
    const edges = new Set(boundaries.get(c));
    const lowestTarget = (at: number) =>
      Math.min(100, ...expectedAt(c, at, undefined).active.map((o) => o.targetSoc ?? 100));
    const targetStops = c.caps.filter(
      (x, i) =>
        x.kw === 0 &&
        x.soc !== undefined &&
        !edges.has(x.at) &&
        (c.caps[i - 1]?.kw ?? 0) > 0 &&
        expectedAt(c, x.at, undefined).maxPowerKw > 0,
    );
    expect(targetStops.length, `${name} vehicles reaching their target`).toBeGreaterThan(5);
    for (const x of targetStops) expect(x.soc, new Date(x.at).toISOString()).toBe(lowestTarget(x.at));
    // And no vehicle left fuller than the highest target of the slots it stood through (or than it came).
    for (const d of c.departures) {
      const visit = c.visits.find((v) => v.departAt === d.at) as Visit;
      const targets = c.schedules.flatMap((s) =>
        occurrences(s, visit.arriveAt, visit.departAt).map((o) => o.targetSoc ?? 100),
      );
      const ceiling = Math.max(d.arrivedWith, ...targets.filter((t) => t > 0));
      expect(d.soc, `${name} left at ${new Date(d.at).toISOString()}`).toBeLessThanOrEqual(ceiling);
    }
    // The reboot: the charging session carried on.
    const reboot = reboots.get(c);
    expect(reboot?.openBefore).toHaveLength(1);
    expect(reboot?.openAfter).toEqual(reboot?.openBefore);
  }
}

// DST by hand, independent of the oracle: Berlin's night of 2027-03-27/28 (no vehicle that evening).
export function expectDstByHand(chargers: Charger[]): void {
  const berlin = chargers[0] as Charger;
  const capsBetween = (c: Charger, from: string, to: string) =>
    c.caps
      .filter((x) => x.at >= Date.parse(from) && x.at < Date.parse(to))
      .map((x) => [new Date(x.at).toISOString(), x.kw]);
  expect(capsBetween(berlin, '2027-03-27T20:00:00Z', '2027-03-28T08:00:00Z')).toEqual([
    ['2027-03-27T21:00:00.000Z', 7.4], // 22:00 CET
    ['2027-03-28T01:00:00.000Z', 3.7], // 02:30 does not exist: 03:00 CEST
    ['2027-03-28T01:30:00.000Z', 7.4], // 03:30 CEST
    ['2027-03-28T04:00:00.000Z', 0], // 06:00 CEST
  ]);
  // New York's night of 2027-03-13/14: 23:30 EST to 06:30 EDT, and no 02:15-02:45 slot (wholly in the gap)...
  const newYork = chargers[1] as Charger;
  expect(capsBetween(newYork, '2027-03-14T03:00:00Z', '2027-03-14T12:00:00Z')).toEqual([
    ['2027-03-14T04:30:00.000Z', 11],
    ['2027-03-14T10:30:00.000Z', 0],
  ]);
  // ... while a week later the Sunday slot is there, in EDT.
  expect(capsBetween(newYork, '2027-03-21T06:00:00Z', '2027-03-21T07:00:00Z').map(([at]) => at)).toEqual([
    '2027-03-21T06:15:00.000Z',
    '2027-03-21T06:45:00.000Z',
  ]);
}

/** What is owed when the platform returns: each charger's outbox, checked against what it produced. */
export function owedOf(
  chargers: Charger[],
  outageAt: number,
  reboots: MonthResult['reboots'],
): Map<Charger, OutboxItem[]> {
  const owed = new Map<Charger, OutboxItem[]>();
  for (const c of chargers) {
    const items = c.agent.store.outbox.peek(1_000_000);
    owed.set(c, items);
    const of = <T>(kind: OutboxItem['kind']) =>
      items.filter((i) => i.kind === kind).map((i) => i.payload as T);
    // Only the oldest telemetry was given up: what is left is the newest, without a gap.
    const telemetry = of<TelemetryRecord>('telemetry').map((r) => r.timestamp);
    const offline = c.produced.filter((r) => Date.parse(r.timestamp) >= outageAt).map((r) => r.timestamp);
    const dropped = c.agent.store.outbox.droppedCounts();
    expect(dropped.telemetry, c.plan.name).toBeGreaterThan(0);
    expect(dropped.telemetry + telemetry.length).toBe(offline.length);
    expect(telemetry).toEqual(offline.slice(offline.length - telemetry.length));
    expect(dropped).toMatchObject({ event: 0, charging_record: 0, command_status: 0 });
    // Every event: a plug and an unplug per vehicle, and the reboot's boot event and configuration report.
    const events = of<DeviceEvent>('event').map((e) => [e.kind, e.timestamp]);
    const expectedEvents = [
      ...c.visits.flatMap((v) => [
        ['vehicle_plugged', new Date(v.arriveAt).toISOString()],
        ['vehicle_unplugged', new Date(v.departAt).toISOString()],
      ]),
      ['boot', new Date(c.plan.rebootAt).toISOString()],
      ['configuration_reported', new Date(c.plan.rebootAt).toISOString()],
    ].sort((a, b) => Date.parse(a[1] as string) - Date.parse(b[1] as string));
    expect(events).toEqual(expectedEvents);
    // A charging record for every vehicle that charged, the one across the reboot once.
    const records = of<ChargingRecordUpload>('charging_record');
    const charged = c.visits.filter((v) =>
      c.states.some((s) => s.to === 'charging' && s.at >= v.arriveAt && s.at < v.departAt),
    );
    expect(records.map((r) => [r.start_time <= r.end_time, r.energy > 0])).toEqual(
      charged.map(() => [true, true]),
    );
    expect(records.map((r) => Date.parse(r.end_time))).toEqual(charged.map((v) => v.departAt));
    const acrossReboot = records.filter(
      (r) => Date.parse(r.start_time) < c.plan.rebootAt && c.plan.rebootAt < Date.parse(r.end_time),
    );
    expect(acrossReboot.map((r) => r.record_id)).toEqual(reboots.get(c)?.openBefore);
    expect(items.filter((i) => i.kind === 'command_status')).toEqual([]);
    expect(items.length).toBeLessThanOrEqual(OUTBOX_CAP.maxItems);
  }
  return owed;
}
