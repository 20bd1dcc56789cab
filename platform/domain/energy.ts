/**
 * Energy integration (DESIGN.md §12): the one rule every energy figure of the platform follows, whether it is
 * read from raw telemetry or kept in rollups.
 *
 * - A sample's power holds until the connector's next sample (a left Riemann sum); positive power imports,
 *   negative exports (V2G).
 * - A gap longer than `MAX_GAP_MS` is no data, not the last power held through an outage.
 * - Each interval between two samples is split at bucket boundaries and at the range's ends, so a bucket holds
 *   exactly the energy of its own time span. Samples up to `MAX_GAP_MS` outside the range may be fed for the
 *   intervals that cross its ends; only samples inside it count as samples (power sum, max, count).
 *
 * Pure: storage backends feed samples in; nothing here reads or writes.
 */

export const MAX_GAP_MS = 5 * 60_000;
const MS_PER_HOUR = 3_600_000;

export interface PowerSample {
  connector_id: number;
  ts_ms: number;
  /** kW; null when the charger did not report power (no energy until its next sample). */
  power: number | null;
}

export interface EnergyBucket {
  start_ms: number;
  imported_kwh: number;
  exported_kwh: number;
  /** Sum of the power of the samples inside the bucket (kW), for averages. */
  power_sum: number;
  max_power: number;
  samples: number;
}

export interface EnergyRange {
  startMs: number;
  /** Exclusive. */
  endMs: number;
  /** Bucket width; buckets start at `startMs + k * intervalMs`. */
  intervalMs: number;
  /**
   * Samples before this time only start intervals; they are not counted as samples. Default `startMs`.
   * (Rollups appending after a connector's last counted sample feed that sample again with this set past it.)
   */
  countFromMs?: number;
}

/**
 * Adds one device's samples (in time order; connectors interleaved as they come) to `buckets`, keyed by bucket
 * start. Call it once per device with the same map to add several devices up.
 */
export function accumulateEnergy(
  buckets: Map<number, EnergyBucket>,
  samples: Iterable<PowerSample>,
  range: EnergyRange,
): Map<number, EnergyBucket> {
  const { startMs, endMs, intervalMs } = range;
  const countFromMs = Math.max(startMs, range.countFromMs ?? startMs);
  const bucketOf = (ts: number): EnergyBucket => {
    const start = startMs + Math.floor((ts - startMs) / intervalMs) * intervalMs;
    let bucket = buckets.get(start);
    if (!bucket) {
      bucket = { start_ms: start, imported_kwh: 0, exported_kwh: 0, power_sum: 0, max_power: 0, samples: 0 };
      buckets.set(start, bucket);
    }
    return bucket;
  };
  // Each connector integrates from its own previous sample.
  const previous = new Map<number, PowerSample>();
  for (const sample of samples) {
    if (sample.ts_ms >= countFromMs && sample.ts_ms < endMs) {
      const bucket = bucketOf(sample.ts_ms);
      const power = sample.power ?? 0;
      bucket.samples++;
      bucket.power_sum += power;
      if (power > bucket.max_power) bucket.max_power = power;
    }
    const prev = previous.get(sample.connector_id);
    if (prev && prev.power !== null) {
      const dt = sample.ts_ms - prev.ts_ms;
      if (dt > 0 && dt <= MAX_GAP_MS) {
        const to = Math.min(sample.ts_ms, endMs);
        for (let from = Math.max(prev.ts_ms, startMs); from < to; ) {
          const bucket = bucketOf(from);
          const until = Math.min(bucket.start_ms + intervalMs, to);
          const kwh = (prev.power * (until - from)) / MS_PER_HOUR;
          if (kwh >= 0) bucket.imported_kwh += kwh;
          else bucket.exported_kwh -= kwh;
          from = until;
        }
      }
    }
    previous.set(sample.connector_id, sample);
  }
  return buckets;
}

/** The buckets in time order. */
export function bucketsInOrder(buckets: ReadonlyMap<number, EnergyBucket>): EnergyBucket[] {
  return [...buckets.values()].sort((a, b) => a.start_ms - b.start_ms);
}
