import { pageOffset } from '../page.js';
import type { DeviceHistoryRepository, StoredEventRow } from '../store.js';
import type { PgDatabase } from './database.js';

const EVENT_COLUMNS = 'device_id, event_id, kind, severity, connector_id, ts_ms, message, data, received_ms';

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
    async recordFirmwareStatus(deviceId, r, nowMs) {
      await db.tx(async (sql) => {
        await sql.query(
          `INSERT INTO firmware_status (device_id, status, version, progress, message, ts_ms, received_ms)
           VALUES ($1, $2, $3, $4, $5, $6, $7)`,
          [deviceId, r.status, r.version ?? null, r.progress ?? null, r.message ?? null, r.ts_ms, nowMs],
        );
        if (r.status === 'installed' && r.version) {
          await sql.query('UPDATE devices SET firmware_version = $1 WHERE device_id = $2', [
            r.version,
            deviceId,
          ]);
        }
      });
    },
  };
}
