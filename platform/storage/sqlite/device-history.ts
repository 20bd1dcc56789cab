import type Database from 'better-sqlite3';
import { firmwareReportValues } from '../firmware-report-rows.js';
import { pageOffset } from '../page.js';
import type { DeviceHistoryRepository, StoredEventRow, StoredFirmwareRow } from '../store.js';

/** Charger events and firmware reports. */
export function createSqliteDeviceHistory(db: Database.Database): DeviceHistoryRepository {
  const stmt = {
    insertEvent: db.prepare(
      `INSERT OR IGNORE INTO device_events (device_id, event_id, kind, severity, connector_id, ts_ms, message, data,
         received_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    countEvents: db.prepare('SELECT COUNT(*) AS n FROM device_events WHERE device_id = ?'),
    listEvents: db.prepare(
      `SELECT * FROM device_events WHERE device_id = ? ORDER BY ts_ms DESC, id DESC LIMIT ? OFFSET ?`,
    ),
    // A report id already stored for the device is skipped (the unique index of migration 11).
    insertFirmware: db.prepare(
      `INSERT OR IGNORE INTO firmware_status (device_id, status, version, progress, message, update_id,
         report_id, ts_ms, received_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    setVersions: db.prepare(
      `UPDATE devices SET firmware_version = COALESCE(?, firmware_version),
         agent_version = COALESCE(?, agent_version) WHERE device_id = ?`,
    ),
    countFirmware: db.prepare('SELECT COUNT(*) AS n FROM firmware_status WHERE device_id = ?'),
    listFirmware: db.prepare(
      `SELECT status, version, progress, message, update_id, report_id, ts_ms, received_ms FROM firmware_status
       WHERE device_id = ? ORDER BY ts_ms DESC, id DESC LIMIT ? OFFSET ?`,
    ),
  };

  return {
    async insertEvents(deviceId, events, nowMs, stored) {
      const ids: string[] = [];
      const outcome = db
        .transaction(() => {
          let accepted = 0;
          for (const e of events) {
            const added = stmt.insertEvent.run(
              deviceId,
              e.event_id,
              e.kind,
              e.severity,
              e.connector_id,
              e.ts_ms,
              e.message,
              e.data ? JSON.stringify(e.data) : null,
              nowMs,
            ).changes;
            accepted += added;
            if (added === 1 && stored) ids.push(e.event_id);
          }
          return { accepted, duplicates: events.length - accepted };
        })
        .immediate();
      if (ids.length > 0) stored?.(ids);
      return outcome;
    },
    async listEvents(deviceId, page, size) {
      const total = (stmt.countEvents.get(deviceId) as { n: number }).n;
      const items = (
        stmt.listEvents.all(deviceId, size, pageOffset(page, size)) as Array<
          Omit<StoredEventRow, 'data'> & { data: string | null }
        >
      ).map((r) => ({ ...r, data: r.data ? (JSON.parse(r.data) as Record<string, unknown>) : null }));
      return { total, page, size, items };
    },
    async recordFirmwareStatus(deviceId, r, nowMs, versions) {
      return db
        .transaction(() => {
          const added = stmt.insertFirmware.run(
            deviceId,
            r.status,
            ...firmwareReportValues(r),
            r.ts_ms,
            nowMs,
          ).changes;
          if (added === 0) return false;
          if (versions.firmware_version !== undefined || versions.agent_version !== undefined) {
            stmt.setVersions.run(versions.firmware_version ?? null, versions.agent_version ?? null, deviceId);
          }
          return true;
        })
        .immediate();
    },
    async listFirmwareStatus(deviceId, page, size) {
      const total = (stmt.countFirmware.get(deviceId) as { n: number }).n;
      const items = stmt.listFirmware.all(deviceId, size, pageOffset(page, size)) as StoredFirmwareRow[];
      return { total, page, size, items };
    },
  };
}
