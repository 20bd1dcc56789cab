import { describe, expect, it } from 'vitest';
import type { PowerSample } from '../../../platform/domain/energy.js';
import { appendedRollupDeltas, touchedRollupRuns } from '../../../platform/domain/energy-rollup.js';
import { byConnector, lateRollupRuns, planConnectorRollup } from '../../../platform/storage/rollup-rows.js';

const MIN = 60_000;
const T0 = Date.UTC(2026, 0, 1);
const s = (minutes: number, power: number | null): PowerSample => ({
  connector_id: 1,
  ts_ms: T0 + minutes * MIN,
  power,
});

describe('byConnector: a chunk of rows by connector, each in time order', () => {
  it('groups and sorts', () => {
    const rows = [
      { device_id: 'a', connector_id: 1, ts_ms: 3, power: 1 },
      { device_id: 'b', connector_id: 1, ts_ms: 1, power: 2 },
      { device_id: 'a', connector_id: 2, ts_ms: 2, power: 3 },
      { device_id: 'a', connector_id: 1, ts_ms: 1, power: 4 },
    ];
    const groups = byConnector(rows);
    expect([...groups.keys()]).toEqual(['a|1', 'b|1', 'a|2']);
    expect(groups.get('a|1')!.map((r) => r.ts_ms)).toEqual([1, 3]);
  });

  it('keeps runs of one charger apart, whichever charger comes between them', () => {
    const row = (device_id: string, connector_id: number, ts_ms: number) => ({
      device_id,
      connector_id,
      ts_ms,
      power: ts_ms,
    });
    const rows = [
      row('a', 1, 10),
      row('a', 2, 10),
      row('a', 1, 15),
      row('a', 2, 15),
      row('b', 2, 10),
      row('b', 1, 10),
      row('a', 2, 5),
      row('a', 3, 5),
      row('b', 2, 20),
      row('ab', 1, 1),
    ];
    const groups = byConnector(rows);
    expect(Object.fromEntries([...groups].map(([k, list]) => [k, list.map((r) => r.ts_ms)]))).toEqual({
      'a|1': [10, 15],
      'a|2': [5, 10, 15],
      'b|2': [10, 20],
      'b|1': [10],
      'a|3': [5],
      'ab|1': [1],
    });
    for (const [key, list] of groups) {
      for (const r of list) expect(`${r.device_id}|${r.connector_id}`).toBe(key);
    }
  });
});

describe('planConnectorRollup: append after the newest rolled-up sample, or recompute late rows', () => {
  it.each([
    {
      name: 'nothing rolled up yet',
      prev: undefined,
      group: [s(1, 5), s(2, 6)],
      append: true,
      newest: s(2, 6),
    },
    { name: 'all after it', prev: s(0, 1), group: [s(1, 5), s(2, 6)], append: true, newest: s(2, 6) },
    { name: 'one at its time', prev: s(1, 1), group: [s(1, 5), s(2, 6)], append: false, newest: s(2, 6) },
    { name: 'all before it', prev: s(9, 1), group: [s(1, 5), s(2, 6)], append: false, newest: s(9, 1) },
  ])('$name', ({ prev, group, append, newest }) => {
    const plan = planConnectorRollup(prev, group);
    expect(plan.deltas).toEqual(append ? appendedRollupDeltas(prev, group) : undefined);
    expect(plan.newest).toEqual(newest);
  });
});

describe('lateRollupRuns: late rows before the floor stay out', () => {
  it.each([
    { floor: Number.NEGATIVE_INFINITY, kept: [1, 40] },
    { floor: T0 + 30 * MIN, kept: [40] },
    { floor: T0 + 50 * MIN, kept: [] },
  ])('floor $floor keeps $kept', ({ floor, kept }) => {
    const runs = lateRollupRuns([s(1, 5), s(40, 6)], floor);
    expect(runs).toEqual(touchedRollupRuns(kept.map((m) => T0 + m * MIN)));
  });
});
