import { firmwareReportValues } from '../firmware-report-rows.js';
import { pageOffset } from '../page.js';
import type { DeviceHistoryRepository, StoredEventRow, StoredFirmwareRow } from '../store.js';
import type { PgDatabase } from './database.js';

const EVENT_COLUMNS = 'device_id, event_id, kind, severity, connector_id, ts_ms, message, data, received_ms';
const FIRMWARE_COLUMNS = 'status, version, progress, message, update_id, report_id, ts_ms, received_ms';

/** Charger events and firmware reports on PostgreSQL. */
export function createPgDeviceHistory(db: PgDatabase): DeviceHistoryRepository {
  return {
    async insertEvents(deviceId, events, nowMs, stored) {
      if (events.length === 0) return { accepted: 0, duplicates: 0 };
      // One statement, rows in upload order (ids break ties of equal timestamps when listing, as SQLite's
      // rowids do); an event id already stored for the charger, or repeated in the upload, is skipped. In a
      // transaction only so that `tx` retries it: two overlapping uploads in different orders can deadlock.
      const rows = await db.tx((sql) =>
        sql.query<{ event_id: string }>(
          `WITH input AS (
           SELECT x.ord, e.* FROM jsonb_array_elements($2::jsonb) WITH ORDINALITY AS x(doc, ord),
             jsonb_to_record(x.doc) AS e(event_id text, kind text, severity text, connector_id integer,
               ts_ms bigint, message text, data jsonb)
         ), inserted AS (
           INSERT INTO device_events (${EVENT_COLUMNS})
           SELECT $1, event_id, kind, severity, connector_id, ts_ms, message, data, $3::bigint
           FROM input ORDER BY ord
           ON CONFLICT (device_id, event_id) DO NOTHING
           RETURNING event_id
         ) SELECT event_id FROM inserted`,
          [deviceId, JSON.stringify(events), nowMs],
        ),
      );
      const accepted = rows.length;
      if (accepted > 0) stored?.(rows.map((r) => r.event_id));
      return { accepted, duplicates: events.length - accepted };
    },
    async listEvents(deviceId, page, size) {
      const [count] = await db.query<{ n: number }>(
        'SELECT COUNT(*) AS n FROM device_events WHERE device_id = $1',
        [deviceId],
      );
      const items = await db.query<StoredEventRow>(
        `SELECT ${EVENT_COLUMNS} FROM device_events WHERE device_id = $1 ORDER BY ts_ms DESC, id DESC
         LIMIT $2 OFFSET $3`,
        [deviceId, size, pageOffset(page, size)],
      );
      return { total: count?.n ?? 0, page, size, items };
    },
    recordFirmwareStatus(deviceId, r, nowMs, versions) {
      return db.tx(async (sql) => {
        // A report id already stored for the device is skipped (the unique index of migration 8).
        const added = await sql.query(
          `INSERT INTO firmware_status (device_id, ${FIRMWARE_COLUMNS})
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING RETURNING 1`,
          [deviceId, r.status, ...firmwareReportValues(r), r.ts_ms, nowMs],
        );
        if (added.length === 0) return false;
        if (versions.firmware_version !== undefined || versions.agent_version !== undefined) {
          await sql.query(
            `UPDATE devices SET firmware_version = COALESCE($1, firmware_version),
               agent_version = COALESCE($2, agent_version) WHERE device_id = $3`,
            [versions.firmware_version ?? null, versions.agent_version ?? null, deviceId],
          );
        }
        return true;
      });
    },
    async listFirmwareStatus(deviceId, page, size) {
      const [count] = await db.query<{ n: number }>(
        'SELECT COUNT(*) AS n FROM firmware_status WHERE device_id = $1',
        [deviceId],
      );
      const items = await db.query<StoredFirmwareRow>(
        `SELECT ${FIRMWARE_COLUMNS} FROM firmware_status WHERE device_id = $1 ORDER BY ts_ms DESC, id DESC
         LIMIT $2 OFFSET $3`,
        [deviceId, size, pageOffset(page, size)],
      );
      return { total: count?.n ?? 0, page, size, items };
    },
  };
}
