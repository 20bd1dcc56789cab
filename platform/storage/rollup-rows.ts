import type { EnergyBucket, PowerSample } from '../domain/energy.js';
import { appendedRollupDeltas, type RollupRun, touchedRollupRuns } from '../domain/energy-rollup.js';

/**
 * What a rollup chunk does with the telemetry rows it takes, on both backends (`sqlite/energy-rollups.ts`,
 * `postgres/energy-rollups.ts`): rows grouped by connector, each group appended to its buckets or, when late,
 * recomputed from the raw samples. The queries are the backends'.
 */

/** A telemetry row a chunk takes. */
export interface RollupRow extends PowerSample {
  device_id: string;
}

export const connectorKey = (row: { device_id: string; connector_id: number }) =>
  `${row.device_id}|${row.connector_id}`;

/** The rows by connector (`connectorKey`), each group in time order. */
export function byConnector<R extends RollupRow>(rows: readonly R[]): Map<string, R[]> {
  const groups = new Map<string, R[]>();
  for (const row of rows) {
    const key = connectorKey(row);
    const list = groups.get(key);
    if (list) list.push(row);
    else groups.set(key, [row]);
  }
  for (const group of groups.values()) group.sort((a, b) => a.ts_ms - b.ts_ms);
  return groups;
}

/**
 * One connector's new rows (in time order) against its newest rolled-up sample `prev`: the deltas to add when
 * they all come after it, or the timestamps of late rows (whose buckets are recomputed); and the connector's
 * newest rolled-up sample afterwards.
 */
export function planConnectorRollup(
  prev: PowerSample | undefined,
  group: readonly PowerSample[],
): { deltas: EnergyBucket[] | undefined; newest: PowerSample } {
  const first = group[0]!;
  const latest = group.at(-1)!;
  const appended = !prev || first.ts_ms > prev.ts_ms;
  const newer = !prev || latest.ts_ms > prev.ts_ms ? latest : prev;
  return {
    deltas: appended ? appendedRollupDeltas(prev, group) : undefined,
    newest: { connector_id: first.connector_id, ts_ms: newer.ts_ms, power: newer.power },
  };
}

/**
 * The runs of buckets late rows change. A late row so old that its neighbours may be pruned (before
 * `floorMs`) would recompute buckets from what is left of them: it stays out of the rollups (its raw row ages
 * out soon too).
 */
export function lateRollupRuns(group: readonly PowerSample[], floorMs: number): RollupRun[] {
  return touchedRollupRuns(group.filter((r) => r.ts_ms >= floorMs).map((r) => r.ts_ms));
}
