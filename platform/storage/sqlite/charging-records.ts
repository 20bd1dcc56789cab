import type Database from 'better-sqlite3';
import type { ChargingRecord, ChargingRecordsQuery } from '../../../shared/index.js';
import { DAY_MS, dayOf, locatePage, startEdges, startWindows } from '../../domain/record-paging.js';
import {
  addDeviceMove,
  counterChanges,
  type DeviceRecordDays,
  type StoredChargingRecord,
  toChargingRecord,
} from '../charging-record-rows.js';
import { pageOffset } from '../page.js';
import type { Page } from '../store.js';
import type { SqlReader } from './reader.js';

/**
 * Charging records on SQLite, bounded however long the history (DESIGN.md §12):
 *
 * - Each record carries its device's operator (`operator_id`, kept when a device moves), so an operator's
 *   records are one index range, not a join over every device.
 * - `charging_record_days` counts records per operator, connector and day of their start and of their end.
 *   The overlap filter's `total` is #(start < end_time) − #(end ≤ start_time) (a record ending at or before
 *   the range's start also starts before its end), each a sum of days plus one partial day counted exactly.
 * - A page is found from those counts (domain/record-paging.ts), so a deep page reads about one day of records,
 *   not every record above it. Records that start before `start_time` and end after it come last; they are
 *   read between `start_time` less the longest session stored and `start_time`.
 *
 * Filtered to one charger, its own index range is small enough to count and page directly.
 */
export interface SqliteChargingRecords {
  /** Reads through `reader` (a worker thread's connection in the server). */
  list(operatorIds: readonly string[], q: ChargingRecordsQuery): Promise<Page<ChargingRecord>>;
  /** Inside the caller's transaction: returns how many were new, and adds their ids to `storedIds`. */
  insert(records: readonly ChargingRecord[], receivedMs: number, storedIds?: string[]): number;
  /** Inside the caller's transaction, when a device moves to another site: its records and counts move too. */
  deviceMoved(deviceId: string): void;
}

const MAX_DURATION_SETTING = 'charging_record_max_duration_ms';

export function createSqliteChargingRecords(db: Database.Database, reader: SqlReader): SqliteChargingRecords {
  const stmt = {
    operatorOf: db
      .prepare(
        'SELECT s.operator_id FROM devices d JOIN sites s ON s.site_id = d.site_id WHERE d.device_id = ?',
      )
      .pluck(),
    insert: db.prepare(
      `INSERT OR IGNORE INTO charging_records (record_id, device_id, connector_id, start_ms, end_ms, energy,
         max_power, avg_power, cost, meter_start, meter_end, vin, soc_start, soc_end, received_ms, operator_id)
       VALUES (@record_id, @device_id, @connector_id, @start_ms, @end_ms, @energy, @max_power, @avg_power, @cost,
         @meter_start, @meter_end, @vin, @soc_start, @soc_end, @received_ms, @operator_id)`,
    ),
    count: db.prepare(
      `INSERT INTO charging_record_days (operator_id, side, day_ms, connector_id, n) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (operator_id, side, day_ms, connector_id) DO UPDATE SET n = n + excluded.n`,
    ),
    dropEmptyDays: db.prepare('DELETE FROM charging_record_days WHERE operator_id = ? AND n <= 0'),
    deviceDays: db.prepare(
      `SELECT operator_id, connector_id, (start_ms / ${DAY_MS}) * ${DAY_MS} AS start_day,
         (end_ms / ${DAY_MS}) * ${DAY_MS} AS end_day, COUNT(*) AS n
       FROM charging_records WHERE device_id = ? GROUP BY operator_id, connector_id, start_day, end_day`,
    ),
    moveDevice: db.prepare('UPDATE charging_records SET operator_id = ? WHERE device_id = ?'),
    maxDuration: db.prepare('SELECT value FROM settings WHERE key = ?').pluck(),
    setMaxDuration: db.prepare(
      'INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value',
    ),
  };
  let maxDurationMs = Number(stmt.maxDuration.get(MAX_DURATION_SETTING) ?? 0);

  /** `operator_id IN (…)` and an optional connector, with their arguments. */
  const scope = (operatorIds: readonly string[], connectorId: number | undefined) => ({
    sql: `operator_id IN (${operatorIds.map(() => '?').join(',')})${connectorId === undefined ? '' : ' AND connector_id = ?'}`,
    args: connectorId === undefined ? [...operatorIds] : [...operatorIds, connectorId],
  });
  type Scope = ReturnType<typeof scope>;

  const dayCounts = async (s: Scope, side: 0 | 1): Promise<Map<number, number>> => {
    const rows = await reader.all<{ day_ms: number; n: number }>(
      `SELECT day_ms, SUM(n) AS n FROM charging_record_days WHERE ${s.sql} AND side = ${side} GROUP BY day_ms`,
      s.args,
    );
    return new Map(rows.map((r) => [r.day_ms, r.n]));
  };
  const sumDaysBefore = (days: ReadonlyMap<number, number>, dayMs: number) => {
    let n = 0;
    for (const [d, c] of days) if (d < dayMs) n += c;
    return n;
  };
  const countWhere = async (s: Scope, where: string, args: readonly number[]) =>
    (
      (await reader.get<{ n: number }>(
        `SELECT COUNT(*) AS n FROM charging_records WHERE ${s.sql} AND ${where}`,
        [...s.args, ...args],
      )) ?? { n: 0 }
    ).n;

  const listForOperators = async (
    operatorIds: readonly string[],
    q: ChargingRecordsQuery,
  ): Promise<Page<ChargingRecord>> => {
    const s = scope(operatorIds, q.connector_id);
    const start = q.start_time === undefined ? undefined : Date.parse(q.start_time);
    const end = q.end_time === undefined ? undefined : Date.parse(q.end_time);
    const starts = await dayCounts(s, 0);
    // total = #(start < end) − #(end ≤ start_time)
    let total = 0;
    if (end === undefined) for (const n of starts.values()) total += n;
    else
      total =
        sumDaysBefore(starts, dayOf(end)) +
        (await countWhere(s, 'start_ms >= ? AND start_ms < ?', [dayOf(end), end]));
    if (start !== undefined) {
      const endsBy = await dayCounts(s, 1);
      const upTo = start + 1;
      total -=
        sumDaysBefore(endsBy, dayOf(upTo)) +
        (await countWhere(s, 'end_ms >= ? AND end_ms < ?', [dayOf(upTo), upTo]));
    }
    const exact: number[] = [];
    for (const [low, high] of startEdges(start, end)) {
      exact.push(
        start === undefined
          ? await countWhere(s, 'start_ms >= ? AND start_ms < ?', [low, high])
          : await countWhere(s, 'start_ms >= ? AND start_ms < ? AND end_ms > ?', [low, high, start]),
      );
    }
    const at = locatePage(startWindows(start, end, starts, exact), pageOffset(q.page, q.size), q.size);
    const where: string[] = [s.sql];
    const args: Array<string | number> = [...s.args];
    if (at.beforeMs !== null) {
      where.push('start_ms < ?');
      args.push(at.beforeMs);
    } else if (end !== undefined) {
      where.push('start_ms < ?');
      args.push(end);
    }
    if (start !== undefined) {
      where.push('end_ms > ?');
      args.push(start);
      // Past the windows: the sessions that began before start_time, no longer ago than the longest stored.
      where.push('start_ms >= ?');
      args.push(at.fromMs ?? start - maxDurationMs);
    } else if (at.fromMs !== null) {
      where.push('start_ms >= ?');
      args.push(at.fromMs);
    }
    const rows = await reader.all<StoredChargingRecord>(
      `SELECT * FROM charging_records WHERE ${where.join(' AND ')}
       ORDER BY start_ms DESC, record_id DESC LIMIT ? OFFSET ?`,
      [...args, q.size, at.skip],
    );
    return { total, page: q.page, size: q.size, items: rows.map(toChargingRecord) };
  };

  const listForDevice = async (
    operatorIds: readonly string[],
    deviceId: string,
    q: ChargingRecordsQuery,
  ): Promise<Page<ChargingRecord>> => {
    const s = scope(operatorIds, q.connector_id);
    // `+operator_id`: the tenancy check must not lead SQLite to walk the operator's index (every record of the
    // operator) for one charger's; the charger's own index range is what bounds this read.
    const where = ['device_id = ?', `+${s.sql}`];
    const args: Array<string | number> = [deviceId, ...s.args];
    // A record matches when its session overlaps [start_time, end_time) (DESIGN.md §9).
    if (q.start_time !== undefined) {
      where.push('end_ms > ?');
      args.push(Date.parse(q.start_time));
    }
    if (q.end_time !== undefined) {
      where.push('start_ms < ?');
      args.push(Date.parse(q.end_time));
    }
    const from = `FROM charging_records WHERE ${where.join(' AND ')}`;
    const total = (await reader.get<{ n: number }>(`SELECT COUNT(*) AS n ${from}`, args))?.n ?? 0;
    const rows = await reader.all<StoredChargingRecord>(
      `SELECT * ${from} ORDER BY start_ms DESC, record_id DESC LIMIT ? OFFSET ?`,
      [...args, q.size, pageOffset(q.page, q.size)],
    );
    return { total, page: q.page, size: q.size, items: rows.map(toChargingRecord) };
  };

  /** Counter changes of one call, each written once (`charging-record-rows.ts`). */
  const counterWrites = () => {
    const changes = counterChanges();
    return {
      add: changes.add,
      write: () => {
        for (const row of changes.rows()) stmt.count.run(...row);
      },
    };
  };

  return {
    async list(operatorIds, q) {
      if (operatorIds.length === 0) return { total: 0, page: q.page, size: q.size, items: [] };
      return q.device_id === undefined
        ? listForOperators(operatorIds, q)
        : listForDevice(operatorIds, q.device_id, q);
    },
    insert(records, receivedMs, storedIds) {
      const operators = new Map<string, string | null>();
      const counts = counterWrites();
      let inserted = 0;
      let longest = maxDurationMs;
      for (const r of records) {
        let operatorId = operators.get(r.device_id);
        if (operatorId === undefined) {
          operatorId = (stmt.operatorOf.get(r.device_id) as string | undefined) ?? null;
          operators.set(r.device_id, operatorId);
        }
        const startMs = Date.parse(r.start_time);
        const endMs = Date.parse(r.end_time);
        const changes = stmt.insert.run({
          record_id: r.record_id,
          device_id: r.device_id,
          connector_id: r.connector_id,
          start_ms: startMs,
          end_ms: endMs,
          energy: r.energy,
          max_power: r.max_power ?? null,
          avg_power: r.avg_power ?? null,
          cost: r.cost ?? null,
          meter_start: r.meter_start ?? null,
          meter_end: r.meter_end ?? null,
          vin: r.vehicle_info?.vin ?? null,
          soc_start: r.vehicle_info?.soc_start ?? null,
          soc_end: r.vehicle_info?.soc_end ?? null,
          received_ms: receivedMs,
          operator_id: operatorId,
        }).changes;
        if (changes !== 1) continue;
        inserted++;
        storedIds?.push(r.record_id);
        if (operatorId !== null) counts.add(operatorId, r.connector_id, dayOf(startMs), dayOf(endMs), 1);
        longest = Math.max(longest, endMs - startMs);
      }
      counts.write();
      if (longest > maxDurationMs) {
        stmt.setMaxDuration.run(MAX_DURATION_SETTING, String(longest));
        maxDurationMs = longest;
      }
      return inserted;
    },
    deviceMoved(deviceId) {
      const to = (stmt.operatorOf.get(deviceId) as string | undefined) ?? null;
      const days = stmt.deviceDays.all(deviceId) as DeviceRecordDays[];
      const counts = counterWrites();
      const from = addDeviceMove(counts, days, to);
      counts.write();
      for (const operatorId of from) stmt.dropEmptyDays.run(operatorId);
      stmt.moveDevice.run(to, deviceId);
    },
  };
}
