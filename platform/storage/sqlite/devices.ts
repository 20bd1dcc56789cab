import type Database from 'better-sqlite3';
import { newId } from '../../domain/ids.js';
import { pageOffset } from '../page.js';
import type { DeviceRepository, StoredRegistration, TargetedDevice } from '../store.js';
import type { SqliteChargingRecords } from './charging-records.js';
import { placeholders, type StatementCache } from './database.js';
import { type RawDevice, toDevice } from './rows.js';

/** Chargers: registration, tenancy and sites (their secrets' rotation: device-secrets.ts). */
export function createSqliteDevices(deps: {
  db: Database.Database;
  now: () => number;
  prepared: StatementCache;
  records: SqliteChargingRecords;
  noteLocalChange: () => void;
}): DeviceRepository {
  const { db, now, prepared, records } = deps;
  const stmt = {
    allowSerial: db.prepare('INSERT OR IGNORE INTO allowed_serials (sn, created_ms) VALUES (?, ?)'),
    isAllowed: db.prepare('SELECT 1 FROM allowed_serials WHERE sn = ?'),
    // With the operator whose site holds it: a reset charger re-registers only through that operator's group.
    deviceBySn: db.prepare(
      `SELECT d.*, s.operator_id AS site_operator_id FROM devices d LEFT JOIN sites s ON s.site_id = d.site_id
       WHERE d.sn = ?`,
    ),
    getDevice: db.prepare('SELECT * FROM devices WHERE device_id = ?'),
    insertDevice: db.prepare(
      `INSERT INTO devices (device_id, sn, model, manufacturer, firmware_version, agent_version, mac, site_id,
         registered, secret_sealed, secret_gen, registered_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?, 1, ?)`,
    ),
    reregisterDevice: db.prepare(
      `UPDATE devices SET model = ?, manufacturer = ?, firmware_version = ?, agent_version = ?, mac = ?,
         registered = 1,
         secret_sealed = ?, secret_gen = secret_gen + 1, pending_secret_sealed = NULL, pending_since_ms = NULL,
         registered_ms = ?, site_id = COALESCE(site_id, ?)
       WHERE device_id = ?`,
    ),
    upsertConnectorDeclaration: db.prepare(
      `INSERT INTO connectors (device_id, connector_id, max_power_kw, v2g_capable) VALUES (?, ?, ?, ?)
       ON CONFLICT (device_id, connector_id) DO UPDATE SET max_power_kw = excluded.max_power_kw,
         v2g_capable = excluded.v2g_capable`,
    ),
    assignDevice: db.prepare('UPDATE devices SET site_id = ? WHERE device_id = ?'),
    // A reset revokes a rotation's pending secret too.
    resetDevice: db.prepare(
      `UPDATE devices SET registered = 0, secret_sealed = NULL, secret_gen = secret_gen + 1,
         pending_secret_sealed = NULL, pending_since_ms = NULL WHERE device_id = ?`,
    ),
    // An absent version (NULL here) leaves the stored one.
    setVersions: db.prepare(
      `UPDATE devices SET firmware_version = COALESCE(?, firmware_version),
         agent_version = COALESCE(?, agent_version) WHERE device_id = ?`,
    ),
    countDevicesInSite: db.prepare('SELECT COUNT(*) AS n FROM devices WHERE site_id = ?'),
    deviceIdsInSite: db.prepare('SELECT device_id FROM devices WHERE site_id = ? ORDER BY device_id'),
  };

  return {
    async allowSerial(sn) {
      stmt.allowSerial.run(sn, now());
    },
    async registerDevice(input, write) {
      return db
        .transaction((): StoredRegistration => {
          const existing = stmt.deviceBySn.get(input.sn) as
            | (RawDevice & { site_operator_id: string | null })
            | undefined;
          const decision = write.decide({
            allowed: stmt.isAllowed.get(input.sn) !== undefined,
            existing: existing && {
              registered: existing.registered === 1,
              operatorId: existing.site_operator_id,
            },
          });
          if (decision !== 'register_new' && decision !== 'register_again') return { kind: decision };
          const t = now();
          let deviceId: string;
          if (decision === 'register_again' && existing) {
            deviceId = existing.device_id;
            stmt.reregisterDevice.run(
              input.model,
              input.manufacturer,
              input.firmware_version,
              input.agent_version ?? null,
              input.mac ?? null,
              write.secretSealed,
              t,
              write.defaultSiteId ?? null,
              deviceId,
            );
          } else {
            deviceId = newId('dev');
            stmt.insertDevice.run(
              deviceId,
              input.sn,
              input.model,
              input.manufacturer,
              input.firmware_version,
              input.agent_version ?? null,
              input.mac ?? null,
              write.defaultSiteId ?? null,
              write.secretSealed,
              t,
            );
          }
          for (const c of input.connectors ?? []) {
            stmt.upsertConnectorDeclaration.run(
              deviceId,
              c.connector_id,
              c.max_power_kw,
              c.v2g_capable ? 1 : 0,
            );
          }
          return { kind: 'registered', device: toDevice(stmt.getDevice.get(deviceId) as RawDevice) };
        })
        .immediate();
    },
    async getDevice(deviceId) {
      const raw = stmt.getDevice.get(deviceId) as RawDevice | undefined;
      return raw ? toDevice(raw) : undefined;
    },
    async getDeviceForOperators(deviceId, operatorIds) {
      if (operatorIds.length === 0) return undefined;
      const raw = prepared(
        `SELECT d.* FROM devices d JOIN sites s ON s.site_id = d.site_id
           WHERE d.device_id = ? AND s.operator_id IN (${placeholders(operatorIds.length)})`,
      ).get(deviceId, ...operatorIds) as RawDevice | undefined;
      return raw ? toDevice(raw) : undefined;
    },
    async listDevicesForTargets(operatorIds, target) {
      if (operatorIds.length === 0) return [];
      const ops = placeholders(operatorIds.length);
      let sql = `SELECT d.device_id, s.operator_id FROM devices d JOIN sites s ON s.site_id = d.site_id
                 WHERE s.operator_id IN (${ops}) AND d.registered = 1`;
      const args: string[] = [...operatorIds];
      if (target.type === 'site') {
        sql += ` AND s.site_id IN (${placeholders(target.ids.length)})`;
        args.push(...target.ids);
      } else if (target.type === 'operator') {
        sql += ` AND s.operator_id IN (${placeholders(target.ids.length)})`;
        args.push(...target.ids);
      }
      sql += ' ORDER BY d.device_id';
      return prepared(sql).all(...args) as TargetedDevice[];
    },
    async assignDevice(deviceId, siteId) {
      deps.noteLocalChange();
      return db
        .transaction(() => {
          if (stmt.assignDevice.run(siteId, deviceId).changes !== 1) return false;
          records.deviceMoved(deviceId);
          return true;
        })
        .immediate();
    },
    async resetDevice(deviceId) {
      deps.noteLocalChange();
      return stmt.resetDevice.run(deviceId).changes === 1;
    },
    async listDevices(operatorIds, q, onlineSinceMs) {
      if (operatorIds.length === 0) return { total: 0, page: q.page, size: q.size, items: [] };
      const where = [`s.operator_id IN (${placeholders(operatorIds.length)})`];
      const args: Array<string | number> = [...operatorIds];
      if (q.site_id !== undefined) {
        where.push('d.site_id = ?');
        args.push(q.site_id);
      }
      for (const column of ['firmware_version', 'agent_version'] as const) {
        const wanted = q[column];
        if (wanted === undefined) continue;
        where.push(`d.${column} = ?`);
        args.push(wanted);
      }
      // Same rule as Liveness.isOnline: seen within the window, and not offline by a heartbeat unless the
      // device made a request after that heartbeat.
      const online = `(d.last_seen_ms >= ? AND (COALESCE(d.reported_status, '') <> 'offline'
        OR d.last_seen_ms > COALESCE(d.last_heartbeat_ms, 0)))`;
      if (q.status === 'online') {
        where.push(online);
        args.push(onlineSinceMs);
      } else if (q.status === 'offline') {
        where.push(`NOT ${online.replace('d.last_seen_ms >= ?', 'COALESCE(d.last_seen_ms, 0) >= ?')}`);
        args.push(onlineSinceMs);
      }
      const from = `FROM devices d JOIN sites s ON s.site_id = d.site_id WHERE ${where.join(' AND ')}`;
      const total = (prepared(`SELECT COUNT(*) AS n ${from}`).get(...args) as { n: number }).n;
      const rows = prepared(`SELECT d.* ${from} ORDER BY d.device_id LIMIT ? OFFSET ?`).all(
        ...args,
        q.size,
        pageOffset(q.page, q.size),
      ) as RawDevice[];
      return { total, page: q.page, size: q.size, items: rows.map(toDevice) };
    },
    async setDeviceVersions(deviceId, versions) {
      return (
        stmt.setVersions.run(versions.firmware_version ?? null, versions.agent_version ?? null, deviceId)
          .changes === 1
      );
    },
    async countDevicesInSite(siteId) {
      return (stmt.countDevicesInSite.get(siteId) as { n: number }).n;
    },
    async deviceIdsInSite(siteId) {
      return (stmt.deviceIdsInSite.all(siteId) as Array<{ device_id: string }>).map((r) => r.device_id);
    },
  };
}
