/**
 * An energy series' items (spec: `/v1/operator/energy`), pure: summed buckets laid on the series' grid. Every
 * interval of the range gets an item, with zeros where no telemetry was stored, so the answer has no holes.
 */
import type * as z from 'zod';
import type { EnergySeries } from '../../shared/index.js';
import { toTimestamp } from '../../shared/index.js';
import type { EnergyBucket } from './energy.js';

export type EnergySeriesItem = z.infer<typeof EnergySeries>['items'][number];

/** The precision a series answers in: kWh and kW to three decimals, i.e. Wh and W. */
const r3 = (x: number) => Math.round(x * 1000) / 1000;

/**
 * One item per `intervalMs` from `startMs`; the last ends at `endMs` even when the range is not a whole number
 * of intervals. `buckets` are keyed by their `start_ms`, which must lie on the grid (`sumRollups` makes them so);
 * any other is left out.
 */
export function energySeriesItems(
  buckets: Iterable<EnergyBucket>,
  range: { startMs: number; endMs: number; intervalMs: number },
): EnergySeriesItem[] {
  const { startMs, endMs, intervalMs } = range;
  const byStart = new Map<number, EnergyBucket>();
  for (const b of buckets) byStart.set(b.start_ms, b);
  const items: EnergySeriesItem[] = [];
  for (let t = startMs; t < endMs; t += intervalMs) {
    const b = byStart.get(t);
    items.push({
      start_time: toTimestamp(t),
      end_time: toTimestamp(Math.min(t + intervalMs, endMs)),
      energy_imported: r3(b?.imported_kwh ?? 0),
      energy_exported: r3(b?.exported_kwh ?? 0),
      avg_power: r3(b && b.samples > 0 ? b.power_sum / b.samples : 0),
      max_power: r3(b?.max_power ?? 0),
      samples: b?.samples ?? 0,
    });
  }
  return items;
}
