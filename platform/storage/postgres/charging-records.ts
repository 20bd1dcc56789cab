import type { ChargingRecord, ChargingRecordsQuery } from '../../../shared/index.js';
import type { Page } from '../store.js';
import type { PgDatabase, Sql } from './database.js';

/** Charging records on PostgreSQL, bounded however long the history (as `../sqlite/charging-records.ts`). */
export interface PgChargingRecords {
  list(operatorIds: readonly string[], q: ChargingRecordsQuery): Promise<Page<ChargingRecord>>;
  /** In its own transaction: returns how many were new. */
  insert(records: readonly ChargingRecord[], receivedMs: number): Promise<number>;
  /** Inside the caller's transaction, when a device moves to another site: its records and counts move too. */
  deviceMoved(sql: Sql, deviceId: string): Promise<void>;
}

export function createPgChargingRecords(_db: PgDatabase): PgChargingRecords {
  const todo = () => Promise.reject(new Error('not implemented'));
  return { list: todo, insert: todo, deviceMoved: todo };
}
