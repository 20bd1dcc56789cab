import type { ChargingRecordsQuery } from '../../../shared/index.js';
import {
  dayOf,
  locatePage,
  type PageLocation,
  startEdges,
  startWindows,
} from '../../domain/record-paging.js';
import { type CounterChange, counterChanges } from '../charging-record-rows.js';
import { pageOffset } from '../page.js';
import type { Sql } from './database.js';

/**
 * The per-operator, connector and day counters of charging records (`charging_record_days`; side 0 counts
 * records by the day they start, side 1 by the day they end) and the page location read from them: the
 * counting half of `charging-records.ts`, as in `../sqlite/charging-records.ts`.
 */

export const MAX_DURATION_SETTING = 'charging_record_max_duration_ms';

/** Positional parameters: `add` returns the placeholder of a value, cast so that PostgreSQL knows its type. */
export function params() {
  const values: unknown[] = [];
  return {
    values,
    add(value: unknown, type: string): string {
      values.push(value);
      return `$${values.length}::${type}`;
    },
  };
}
export type Params = ReturnType<typeof params>;

/** The operators' records, optionally of one connector. */
export function scopeOf(p: Params, operatorIds: readonly string[], connectorId: number | undefined): string {
  const operators = `operator_id = ANY(${p.add(operatorIds, 'text[]')})`;
  return connectorId === undefined
    ? operators
    : `${operators} AND connector_id = ${p.add(connectorId, 'int')}`;
}

/** Counter changes of one call, each written once (`../charging-record-rows.ts`), as one upsert. */
export function counterWrites() {
  const changes = counterChanges();
  const add = changes.add;
  /** Adds to the counters (concurrent writers add, never overwrite) and drops those left at zero. */
  const write = async (sql: Sql) => {
    // One key order for every writer, so that two transactions never wait on each other's rows crosswise.
    const rows = changes.rows().sort(byKey);
    if (rows.length === 0) return;
    const left = await sql.query<{
      operator_id: string;
      side: number;
      day_ms: number;
      connector_id: number;
      n: number;
    }>(
      `INSERT INTO charging_record_days (operator_id, side, day_ms, connector_id, n)
       SELECT * FROM unnest($1::text[], $2::smallint[], $3::bigint[], $4::int[], $5::bigint[])
       ON CONFLICT (operator_id, side, day_ms, connector_id) DO UPDATE SET n = charging_record_days.n + excluded.n
       RETURNING operator_id, side, day_ms, connector_id, n`,
      columnsOf(rows),
    );
    const empty = left.filter((r) => r.n <= 0);
    if (empty.length === 0) return;
    await sql.query(
      `DELETE FROM charging_record_days
       WHERE (operator_id, side, day_ms, connector_id) IN
         (SELECT * FROM unnest($1::text[], $2::smallint[], $3::bigint[], $4::int[])) AND n <= 0`,
      [
        empty.map((r) => r.operator_id),
        empty.map((r) => r.side),
        empty.map((r) => r.day_ms),
        empty.map((r) => r.connector_id),
      ],
    );
  };
  return { add, write };
}

function byKey(a: CounterChange, b: CounterChange): number {
  if (a[0] !== b[0]) return a[0] < b[0] ? -1 : 1;
  return a[1] - b[1] || a[2] - b[2] || a[3] - b[3];
}

function columnsOf(rows: readonly CounterChange[]): unknown[][] {
  return [0, 1, 2, 3, 4].map((i) => rows.map((r) => r[i]));
}

/** Where a page of an operators-wide listing lies, with its total and the longest session stored. */
export interface CountedPage {
  total: number;
  at: PageLocation;
  maxDurationMs: number;
}

/**
 * total = #(start < end_time) − #(end ≤ start_time) (a record ending at or before the range's start also
 * starts before its end), each a sum of whole days plus one partial day counted exactly; the page is located
 * from the start counts (domain/record-paging.ts). Reads day counters and at most a few days of records.
 */
export async function locateByCounts(
  sql: Sql,
  operatorIds: readonly string[],
  q: ChargingRecordsQuery,
): Promise<CountedPage> {
  const start = q.start_time === undefined ? undefined : Date.parse(q.start_time);
  const end = q.end_time === undefined ? undefined : Date.parse(q.end_time);
  const { starts, endsBy } = await dayCounts(sql, operatorIds, q.connector_id, start !== undefined);

  const p = params();
  const scope = scopeOf(p, operatorIds, q.connector_id);
  const range = (column: string, low: number, high: number) =>
    `${column} >= ${p.add(low, 'bigint')} AND ${column} < ${p.add(high, 'bigint')}`;
  const counts: string[] = [];
  if (end !== undefined) counts.push(range('start_ms', dayOf(end), end));
  const upTo = start === undefined ? undefined : start + 1;
  if (upTo !== undefined) counts.push(range('end_ms', dayOf(upTo), upTo));
  const edges = startEdges(start, end);
  const overlaps = start === undefined ? '' : ` AND end_ms > ${p.add(start, 'bigint')}`;
  for (const [low, high] of edges) counts.push(range('start_ms', low, high) + overlaps);
  const exact = await countExactly(sql, p, scope, counts, start !== undefined);

  let total = 0;
  if (end === undefined) for (const n of starts.values()) total += n;
  else total = sumDaysBefore(starts, dayOf(end)) + exact.counts.shift()!;
  if (upTo !== undefined) total -= sumDaysBefore(endsBy, dayOf(upTo)) + exact.counts.shift()!;
  const at = locatePage(startWindows(start, end, starts, exact.counts), pageOffset(q.page, q.size), q.size);
  return { total, at, maxDurationMs: exact.maxDurationMs };
}

/** Records per day of their start and, when asked, of their end, summed over the scope's operators. */
async function dayCounts(
  sql: Sql,
  operatorIds: readonly string[],
  connectorId: number | undefined,
  withEnds: boolean,
) {
  const p = params();
  const scope = scopeOf(p, operatorIds, connectorId);
  const rows = await sql.query<{ side: number; day_ms: number; n: number }>(
    `SELECT side, day_ms, SUM(n) AS n FROM charging_record_days
     WHERE ${scope} AND side = ANY(${p.add(withEnds ? [0, 1] : [0], 'smallint[]')})
     GROUP BY side, day_ms`,
    p.values,
  );
  const starts = new Map<number, number>();
  const endsBy = new Map<number, number>();
  for (const r of rows) (r.side === 0 ? starts : endsBy).set(r.day_ms, r.n);
  return { starts, endsBy };
}

function sumDaysBefore(days: ReadonlyMap<number, number>, dayMs: number): number {
  let n = 0;
  for (const [d, c] of days) if (d < dayMs) n += c;
  return n;
}

/**
 * The exact counts of records in the scope matching each of `conditions` (each a range of one index, at most
 * about a day), and the longest session stored: one round trip.
 */
async function countExactly(
  sql: Sql,
  p: Params,
  scope: string,
  conditions: readonly string[],
  withMaxDuration: boolean,
): Promise<{ counts: number[]; maxDurationMs: number }> {
  const columns = conditions.map(
    (c, i) => `(SELECT COUNT(*) FROM charging_records WHERE ${scope} AND ${c}) AS c${i}`,
  );
  if (withMaxDuration) {
    columns.push(
      `COALESCE((SELECT value::bigint FROM settings WHERE key = ${p.add(MAX_DURATION_SETTING, 'text')}), 0) AS max_ms`,
    );
  }
  if (columns.length === 0) return { counts: [], maxDurationMs: 0 };
  const [row] = await sql.query<Record<string, number>>(`SELECT ${columns.join(', ')}`, p.values);
  return {
    counts: conditions.map((_, i) => row?.[`c${i}`] ?? 0),
    maxDurationMs: row?.max_ms ?? 0,
  };
}
