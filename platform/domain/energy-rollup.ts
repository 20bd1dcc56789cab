/**
 * Energy rollups (DESIGN.md §12): per connector, 15-minute buckets aligned to UTC, kept as telemetry is
 * stored, from which every energy series is answered (1h and 1d are sums of 15m). The integration rule is
 * `energy.ts`; these are the rules for keeping buckets equal to it as samples arrive in any order.
 *
 * Pure: the storage backends read samples and write buckets; nothing here touches a database.
 */
import { accumulateEnergy, type EnergyBucket, MAX_GAP_MS, type PowerSample } from './energy.js';

export const ROLLUP_MS = 15 * 60_000;

export const floorToRollup = (ms: number): number => Math.floor(ms / ROLLUP_MS) * ROLLUP_MS;
export const ceilToRollup = (ms: number): number => Math.ceil(ms / ROLLUP_MS) * ROLLUP_MS;

/** A span of whole rollup buckets, [startMs, endMs). */
export interface RollupRun {
  startMs: number;
  endMs: number;
}

/**
 * What to add to a connector's buckets when `samples` (one connector, ascending, every one later than `last`)
 * are appended after `last`, its newest sample already in the rollups: each new sample counts in its bucket,
 * and each new interval (from `last` to the first, then between the new ones) adds its energy.
 */
export function appendedRollupDeltas(
  last: PowerSample | undefined,
  samples: readonly PowerSample[],
): EnergyBucket[] {
  const first = samples[0];
  const newest = samples.at(-1);
  if (!first || !newest) return [];
  const from = last ?? first;
  const buckets = accumulateEnergy(new Map(), last ? [last, ...samples] : samples, {
    startMs: floorToRollup(from.ts_ms),
    endMs: floorToRollup(newest.ts_ms) + ROLLUP_MS,
    intervalMs: ROLLUP_MS,
    countFromMs: first.ts_ms,
  });
  return [...buckets.values()];
}

/**
 * The buckets a late sample can change, merged into runs. A sample inserted between two others replaces the
 * interval between them with two; only intervals of at most `MAX_GAP_MS` carry energy, so every change lies
 * within `MAX_GAP_MS` of the sample on either side.
 */
export function touchedRollupRuns(timestamps: Iterable<number>): RollupRun[] {
  const starts = new Set<number>();
  for (const ts of timestamps) {
    for (let b = floorToRollup(ts - MAX_GAP_MS); b <= floorToRollup(ts + MAX_GAP_MS); b += ROLLUP_MS) {
      starts.add(b);
    }
  }
  const runs: RollupRun[] = [];
  for (const start of [...starts].sort((a, b) => a - b)) {
    const run = runs.at(-1);
    if (run && run.endMs === start) run.endMs = start + ROLLUP_MS;
    else runs.push({ startMs: start, endMs: start + ROLLUP_MS });
  }
  return runs;
}

/**
 * A run's buckets recomputed from the raw samples of one connector: `samples` must hold every sample from
 * `MAX_GAP_MS` before the run to `MAX_GAP_MS` after it, in time order: a sample before it starts the interval
 * that crosses in, and the first one after it ends the interval that crosses out.
 */
export function recomputeRollupRun(samples: Iterable<PowerSample>, run: RollupRun): EnergyBucket[] {
  const buckets = accumulateEnergy(new Map(), samples, { ...run, intervalMs: ROLLUP_MS });
  return [...buckets.values()].sort((a, b) => a.start_ms - b.start_ms);
}

/**
 * The range an energy series answers: widened to whole rollup buckets, the resolution energy is kept at
 * (raw telemetry is pruned long before its rollups; DESIGN.md §12).
 */
export function rollupAlignedRange(startMs: number, endMs: number): { startMs: number; endMs: number } {
  return { startMs: floorToRollup(startMs), endMs: ceilToRollup(endMs) };
}

/** 15-minute buckets (of any devices and connectors) summed into the series' buckets of `intervalMs`. */
export function sumRollups(
  rows: Iterable<EnergyBucket>,
  range: { startMs: number; endMs: number; intervalMs: number },
): Map<number, EnergyBucket> {
  const out = new Map<number, EnergyBucket>();
  for (const row of rows) {
    if (row.start_ms < range.startMs || row.start_ms >= range.endMs) continue;
    const start =
      range.startMs + Math.floor((row.start_ms - range.startMs) / range.intervalMs) * range.intervalMs;
    const bucket = out.get(start);
    if (!bucket) {
      out.set(start, { ...row, start_ms: start });
      continue;
    }
    bucket.imported_kwh += row.imported_kwh;
    bucket.exported_kwh += row.exported_kwh;
    bucket.power_sum += row.power_sum;
    bucket.samples += row.samples;
    if (row.max_power > bucket.max_power) bucket.max_power = row.max_power;
  }
  return out;
}
