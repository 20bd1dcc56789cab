import type { ChargingRecord, ChargingRecordsQuery } from '../../../shared/index.js';
import { DAY_MS, dayOf } from '../../domain/record-paging.js';
import {
  addDeviceMove,
  type DeviceRecordDays,
  type StoredChargingRecord,
  toChargingRecord,
} from '../charging-record-rows.js';
import { pageOffset } from '../page.js';
import type { Page } from '../store.js';
import {
  counterWrites,
  locateByCounts,
  MAX_DURATION_SETTING,
  type Params,
  params,
  scopeOf,
} from './charging-record-counts.js';
import type { PgDatabase, Sql } from './database.js';

/**
 * Charging records on PostgreSQL, bounded however long the history (DESIGN.md §12), as
 * `../sqlite/charging-records.ts`: each record carries its device's operator; `charging_record_days` counts
 * them per operator, connector and day of start and of end; an operators-wide page is located from those
 * counts (`charging-record-counts.ts`), a one-charger page from the charger's own index range.
 *
 * Several instances may write at once: counters are only ever added to, the longest session only grows, and
 * an insert holds its chargers' rows (FOR SHARE) so that a concurrent move cannot miss its records.
 */
export interface PgChargingRecords {
  list(operatorIds: readonly string[], q: ChargingRecordsQuery): Promise<Page<ChargingRecord>>;
  /** In its own transaction: returns how many were new. */
  insert(
    records: readonly ChargingRecord[],
    receivedMs: number,
    stored?: (recordIds: readonly string[]) => void,
  ): Promise<number>;
  /** Inside the caller's transaction, when a device moves to another site: its records and counts move too. */
  deviceMoved(sql: Sql, deviceId: string): Promise<void>;
}

const COLUMNS = `record_id, device_id, connector_id, start_ms, end_ms, energy, max_power, avg_power, cost,
  meter_start, meter_end, vin, soc_start, soc_end`;
/** Newest start first, then record id byte-wise (as SQLite compares); the charger only settles ties. */
const ORDER = 'ORDER BY start_ms DESC, record_id COLLATE "C" DESC, device_id COLLATE "C" DESC';

export function createPgChargingRecords(db: PgDatabase): PgChargingRecords {
  // The longest session this instance knows is stored: it only grows, so a batch within it writes nothing
  // (the setting's row would otherwise serialize every instance's record uploads).
  let knownMaxDurationMs = 0;

  /** One snapshot for the counts and the page, so that a concurrent insert or move cannot split them. */
  const snapshot = <T>(work: (sql: Sql) => Promise<T>) =>
    db.tx(async (sql) => {
      await sql.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY');
      return work(sql);
    });

  return {
    async list(operatorIds, q) {
      if (operatorIds.length === 0) return { total: 0, page: q.page, size: q.size, items: [] };
      return snapshot((sql) =>
        q.device_id === undefined
          ? listForOperators(sql, operatorIds, q)
          : listForDevice(sql, operatorIds, q.device_id, q),
      );
    },
    async insert(records, receivedMs, stored) {
      const fresh = firstOfEach(records);
      if (fresh.length === 0) return 0;
      const known = knownMaxDurationMs;
      const out = await db.tx((sql) => insertRecords(sql, fresh, receivedMs, known));
      // Only once committed: a rolled-back batch must not make this instance skip growing the setting.
      knownMaxDurationMs = Math.max(knownMaxDurationMs, out.maxDurationMs);
      if (out.ids.length > 0) stored?.(out.ids);
      return out.ids.length;
    },
    async deviceMoved(sql, deviceId) {
      const to = (await operatorsOf(sql, [deviceId], 'FOR NO KEY UPDATE OF d')).get(deviceId) ?? null;
      const days = await sql.query<DeviceRecordDays>(
        `SELECT operator_id, connector_id, ${dayExpr('start_ms')} AS start_day, ${dayExpr('end_ms')} AS end_day,
           COUNT(*) AS n
         FROM charging_records WHERE device_id = $1::text
         GROUP BY operator_id, connector_id, start_day, end_day`,
        [deviceId],
      );
      const counts = counterWrites();
      addDeviceMove(counts, days, to);
      await counts.write(sql);
      await sql.query(
        `UPDATE charging_records SET operator_id = $1::text
         WHERE device_id = $2::text AND operator_id IS DISTINCT FROM $1::text`,
        [to, deviceId],
      );
    },
  };
}

/** The day a time falls in, as `dayOf` (floored, also before 1970). */
const dayExpr = (column: string) => `(${column} - ((${column} % ${DAY_MS}) + ${DAY_MS}) % ${DAY_MS})`;

/**
 * The operator of each charger that is in a site, locking the chargers' rows as `lock` says: inserts share
 * them, a move holds them, so records are never stored for an operator a committed move has left.
 */
async function operatorsOf(sql: Sql, deviceIds: readonly string[], lock: string) {
  const rows = await sql.query<{ device_id: string; operator_id: string | null }>(
    `SELECT d.device_id, s.operator_id FROM devices d LEFT JOIN sites s ON s.site_id = d.site_id
     WHERE d.device_id = ANY($1::text[]) ORDER BY d.device_id ${lock}`,
    [deviceIds],
  );
  return new Map(rows.filter((r) => r.operator_id !== null).map((r) => [r.device_id, r.operator_id!]));
}

/** The first of the batch's records for each device and record id: the one stored, as on SQLite. */
function firstOfEach(records: readonly ChargingRecord[]): ChargingRecord[] {
  const seen = new Set<string>();
  return records.filter((r) => {
    const key = `${r.device_id}\u0000${r.record_id}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

async function insertRecords(
  sql: Sql,
  records: readonly ChargingRecord[],
  receivedMs: number,
  knownMaxDurationMs: number,
): Promise<{ ids: string[]; maxDurationMs: number }> {
  const operators = await operatorsOf(sql, [...new Set(records.map((r) => r.device_id))], 'FOR SHARE OF d');
  const stored = await sql.query<{
    record_id: string;
    operator_id: string | null;
    connector_id: number;
    start_ms: number;
    end_ms: number;
  }>(
    `INSERT INTO charging_records (record_id, device_id, operator_id, connector_id, start_ms, end_ms, energy,
       max_power, avg_power, cost, meter_start, meter_end, vin, soc_start, soc_end, received_ms)
     SELECT u.*, $16::bigint FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::bigint[],
       $6::bigint[], $7::float8[], $8::float8[], $9::float8[], $10::float8[], $11::float8[], $12::float8[],
       $13::text[], $14::int[], $15::int[]) AS u
     ON CONFLICT (device_id, record_id) DO NOTHING
     RETURNING record_id, operator_id, connector_id, start_ms, end_ms`,
    [...recordColumns(records, operators), receivedMs],
  );
  const counts = counterWrites();
  let longest = 0;
  for (const r of stored) {
    if (r.operator_id !== null)
      counts.add(r.operator_id, r.connector_id, dayOf(r.start_ms), dayOf(r.end_ms), 1);
    longest = Math.max(longest, r.end_ms - r.start_ms);
  }
  await counts.write(sql);
  const maxDurationMs =
    longest > knownMaxDurationMs ? await growMaxDuration(sql, longest) : knownMaxDurationMs;
  return { ids: stored.map((r) => r.record_id), maxDurationMs };
}

/** The records as one array per column, for `unnest`. */
function recordColumns(records: readonly ChargingRecord[], operators: ReadonlyMap<string, string>) {
  const column = <T>(f: (r: ChargingRecord) => T) => records.map(f);
  return [
    column((r) => r.record_id),
    column((r) => r.device_id),
    column((r) => operators.get(r.device_id) ?? null),
    column((r) => r.connector_id),
    column((r) => Date.parse(r.start_time)),
    column((r) => Date.parse(r.end_time)),
    column((r) => r.energy),
    column((r) => r.max_power ?? null),
    column((r) => r.avg_power ?? null),
    column((r) => r.cost ?? null),
    column((r) => r.meter_start ?? null),
    column((r) => r.meter_end ?? null),
    column((r) => r.vehicle_info?.vin ?? null),
    column((r) => r.vehicle_info?.soc_start ?? null),
    column((r) => r.vehicle_info?.soc_end ?? null),
  ];
}

/** Raises the stored longest session to `ms` unless another instance stored a longer one; returns it. */
async function growMaxDuration(sql: Sql, ms: number): Promise<number> {
  const [row] = await sql.query<{ value: string }>(
    `INSERT INTO settings (key, value) VALUES ($1::text, $2::text)
     ON CONFLICT (key) DO UPDATE SET value = GREATEST(settings.value::bigint, excluded.value::bigint)::text
     RETURNING value`,
    [MAX_DURATION_SETTING, String(ms)],
  );
  return Number(row?.value ?? ms);
}

async function listForOperators(
  sql: Sql,
  operatorIds: readonly string[],
  q: ChargingRecordsQuery,
): Promise<Page<ChargingRecord>> {
  const { total, at, maxDurationMs } = await locateByCounts(sql, operatorIds, q);
  const start = q.start_time === undefined ? undefined : Date.parse(q.start_time);
  const end = q.end_time === undefined ? undefined : Date.parse(q.end_time);
  const p = params();
  const where = [scopeOf(p, operatorIds, q.connector_id)];
  const before = at.beforeMs ?? end;
  if (before !== undefined) where.push(`start_ms < ${p.add(before, 'bigint')}`);
  if (start !== undefined) {
    where.push(`end_ms > ${p.add(start, 'bigint')}`);
    // Past the windows: the sessions that began before start_time, no longer ago than the longest stored.
    where.push(`start_ms >= ${p.add(at.fromMs ?? start - maxDurationMs, 'bigint')}`);
  } else if (at.fromMs !== null) {
    where.push(`start_ms >= ${p.add(at.fromMs, 'bigint')}`);
  }
  const items = await readPage(sql, p, where, q.size, at.skip);
  return { total, page: q.page, size: q.size, items };
}

/** One charger's records: its own index range is small enough to count and page directly. */
async function listForDevice(
  sql: Sql,
  operatorIds: readonly string[],
  deviceId: string,
  q: ChargingRecordsQuery,
): Promise<Page<ChargingRecord>> {
  const p = params();
  const where = [`device_id = ${p.add(deviceId, 'text')}`, scopeOf(p, operatorIds, q.connector_id)];
  // A record matches when its session overlaps [start_time, end_time) (DESIGN.md §9).
  if (q.start_time !== undefined) where.push(`end_ms > ${p.add(Date.parse(q.start_time), 'bigint')}`);
  if (q.end_time !== undefined) where.push(`start_ms < ${p.add(Date.parse(q.end_time), 'bigint')}`);
  const [count] = await sql.query<{ n: number }>(
    `SELECT COUNT(*) AS n FROM charging_records WHERE ${where.join(' AND ')}`,
    [...p.values], // the page's query adds its own to `p`
  );
  const items = await readPage(sql, p, where, q.size, pageOffset(q.page, q.size));
  return { total: count?.n ?? 0, page: q.page, size: q.size, items };
}

async function readPage(sql: Sql, p: Params, where: readonly string[], size: number, skip: number) {
  const rows = await sql.query<StoredChargingRecord>(
    `SELECT ${COLUMNS} FROM charging_records WHERE ${where.join(' AND ')}
     ${ORDER} LIMIT ${p.add(size, 'int')} OFFSET ${p.add(skip, 'int')}`,
    p.values,
  );
  return rows.map(toChargingRecord);
}
