/**
 * Charging sessions as the sampler persists them (core/sessions.ts decides their content): at most one open
 * session per connector, and closing one queues its charging record in the same transaction.
 */
import type Database from 'better-sqlite3';
import type { ChargingRecordUpload } from '../../shared/device-api.js';
import { chargingRecordItem } from '../core/outbox-payloads.js';
import type { SessionRow } from '../core/sessions.js';
import type { Outbox } from './outbox.js';

type Db = Database.Database;

export interface SessionStore {
  openSessions(): SessionRow[];
  listSessions(limit: number): SessionRow[];
  insertSession(session: SessionRow): void;
  updateSessionProgress(session: SessionRow): void;
  /** Closes the session and queues its charging record, atomically: a record is never lost or doubled. */
  closeSession(session: SessionRow, endedAt: string, record: ChargingRecordUpload): void;
  pruneSessions(endedBefore: string): number;
}

interface SessionDbRow {
  record_id: string;
  connector_id: number;
  started_at: string;
  ended_at: string | null;
  meter_start: number;
  meter_last: number;
  export_start: number;
  export_last: number;
  soc_start: number | null;
  soc_last: number | null;
  max_power_kw: number;
  min_power_kw: number;
  updated_at: string;
}

/** `write` prepares a statement on first use (a read-only store never gets that far). */
export function createSessionStore(
  db: Db,
  write: (sql: string) => Database.Statement,
  outbox: Outbox,
): SessionStore {
  const q = {
    openSessions: db.prepare('SELECT * FROM sessions WHERE ended_at IS NULL ORDER BY connector_id'),
    sessions: db.prepare('SELECT * FROM sessions ORDER BY started_at DESC LIMIT ?'),
  };
  return {
    openSessions() {
      return (q.openSessions.all() as SessionDbRow[]).map(toSession);
    },
    listSessions(limit) {
      return (q.sessions.all(limit) as SessionDbRow[]).map(toSession);
    },
    insertSession(s) {
      write(
        `INSERT INTO sessions (record_id, connector_id, started_at, meter_start, meter_last, export_start,
           export_last, soc_start, soc_last, max_power_kw, min_power_kw, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      ).run(
        s.recordId,
        s.connectorId,
        s.startedAt,
        s.meterStart,
        s.meterLast,
        s.exportStart,
        s.exportLast,
        s.socStart ?? null,
        s.socLast ?? null,
        s.maxPowerKw,
        s.minPowerKw,
        s.updatedAt,
      );
    },
    updateSessionProgress(s) {
      write(
        `UPDATE sessions SET meter_last = ?, export_last = ?, soc_last = ?, max_power_kw = ?, min_power_kw = ?,
           updated_at = ? WHERE record_id = ? AND ended_at IS NULL`,
      ).run(
        s.meterLast,
        s.exportLast,
        s.socLast ?? null,
        s.maxPowerKw,
        s.minPowerKw,
        s.updatedAt,
        s.recordId,
      );
    },
    closeSession(s, endedAt, record) {
      db.transaction(() => {
        const closed = write(
          `UPDATE sessions SET meter_last = ?, export_last = ?, soc_last = ?, max_power_kw = ?, min_power_kw = ?,
             updated_at = ?, ended_at = ? WHERE record_id = ? AND ended_at IS NULL`,
        ).run(
          s.meterLast,
          s.exportLast,
          s.socLast ?? null,
          s.maxPowerKw,
          s.minPowerKw,
          endedAt,
          endedAt,
          s.recordId,
        );
        // Closed already (a repeat after a crash between two callers): its record is queued once.
        if (closed.changes === 1) outbox.enqueue([chargingRecordItem(record)]);
      })();
    },
    pruneSessions(endedBefore) {
      return write('DELETE FROM sessions WHERE ended_at IS NOT NULL AND ended_at < ?').run(endedBefore)
        .changes;
    },
  };
}

function toSession(row: SessionDbRow): SessionRow {
  const s: SessionRow = {
    recordId: row.record_id,
    connectorId: row.connector_id,
    startedAt: row.started_at,
    meterStart: row.meter_start,
    meterLast: row.meter_last,
    exportStart: row.export_start,
    exportLast: row.export_last,
    maxPowerKw: row.max_power_kw,
    minPowerKw: row.min_power_kw,
    updatedAt: row.updated_at,
  };
  if (row.ended_at !== null) s.endedAt = row.ended_at;
  if (row.soc_start !== null) s.socStart = row.soc_start;
  if (row.soc_last !== null) s.socLast = row.soc_last;
  return s;
}
