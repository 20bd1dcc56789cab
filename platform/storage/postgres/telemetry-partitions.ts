import { DAY_MS } from '../../domain/record-paging.js';
import type { PgDatabase } from './database.js';

/**
 * Telemetry's partitions: one per UTC day of the samples' timestamps (DESIGN.md §12), created on demand
 * before rows for a new day are stored, and dropped whole by retention. Only days near the platform's clock
 * get a partition (a charger's clock cannot make thousands); other rows land in `telemetry_default`, which
 * retention prunes row by row.
 */
export interface TelemetryPartition {
  name: string;
  /** The UTC day it holds: [fromMs, fromMs + DAY_MS). */
  fromMs: number;
}

export interface TelemetryPartitions {
  /** Makes sure every day of these timestamps that may have a partition has one. */
  ensure(tsMs: Iterable<number>): Promise<void>;
  /**
   * Creates today's and the next days' partitions ahead of their first rows: creating one briefly locks the
   * whole table, which a charger request should not wait for at midnight.
   */
  prepareAhead(): Promise<void>;
  /** The day partitions that exist, oldest first. */
  list(): Promise<TelemetryPartition[]>;
  /** Drops a day partition with all its rows. */
  drop(partition: TelemetryPartition): Promise<void>;
}

/** Days ahead of the platform's clock that get a partition (chargers' clocks run a little ahead). */
const FUTURE_DAYS = 2;

export function partitionName(dayMs: number): string {
  return `telemetry_p${new Date(dayMs).toISOString().slice(0, 10).replaceAll('-', '')}`;
}

export function createTelemetryPartitions(
  db: PgDatabase,
  now: () => number,
  /** How many days back a day may get its own partition (telemetry retention, or a year when kept forever). */
  pastDays: number,
): TelemetryPartitions {
  /** Days known to have a partition, or known to stay in the default one. */
  const known = new Set<number>();
  let loaded: Promise<void> | undefined;
  const load = () => {
    loaded ??= list().then((parts) => {
      for (const p of parts) known.add(p.fromMs);
    });
    return loaded;
  };

  async function list(): Promise<TelemetryPartition[]> {
    const rows = await db.query<{ name: string }>(
      `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
       WHERE i.inhparent = 'telemetry'::regclass AND c.relname LIKE 'telemetry\\_p%' ORDER BY c.relname`,
    );
    return rows.map(({ name }) => ({
      name,
      fromMs: Date.parse(`${name.slice(11, 15)}-${name.slice(15, 17)}-${name.slice(17, 19)}T00:00:00Z`),
    }));
  }

  async function create(dayMs: number): Promise<void> {
    try {
      await db.query(
        `CREATE TABLE IF NOT EXISTS ${partitionName(dayMs)} PARTITION OF telemetry
         FOR VALUES FROM (${dayMs}) TO (${dayMs + DAY_MS})`,
      );
    } catch (err) {
      const code = (err as { code?: string }).code;
      // 42P07: another instance created it meanwhile; 42P17: it overlaps one that exists (the same race);
      // 23514: the default partition already holds rows of that day (a clock that ran days ahead): the
      // day stays there.
      if (code !== '42P07' && code !== '42P17' && code !== '23514') throw err;
    }
    known.add(dayMs);
  }

  async function ensure(tsMs: Iterable<number>): Promise<void> {
    const missing = new Set<number>();
    const t = now();
    const from = Math.floor(t / DAY_MS) * DAY_MS - pastDays * DAY_MS;
    const to = Math.floor(t / DAY_MS) * DAY_MS + FUTURE_DAYS * DAY_MS;
    for (const ts of tsMs) {
      const day = Math.floor(ts / DAY_MS) * DAY_MS;
      if (day < from || day > to || known.has(day)) continue;
      missing.add(day);
    }
    if (missing.size === 0) return;
    await load();
    for (const day of missing) if (!known.has(day)) await create(day);
  }

  return {
    ensure,
    prepareAhead() {
      const t = now();
      return ensure(Array.from({ length: FUTURE_DAYS + 1 }, (_, i) => t + i * DAY_MS));
    },
    list,
    async drop(partition) {
      await db.query(`DROP TABLE IF EXISTS ${partition.name}`);
      known.delete(partition.fromMs);
    },
  };
}
