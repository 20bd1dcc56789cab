import { newId } from '../../domain/ids.js';
import { pageOffset } from '../page.js';
import type {
  DeviceRepository,
  DeviceRow,
  RegisterInput,
  RegistrationWrite,
  StoredRegistration,
  TargetedDevice,
} from '../store.js';
import type { PgChargingRecords } from './charging-records.js';
import { notifyDirectoryChange, type PgDatabase, type Sql } from './database.js';

/** The columns of `DeviceRow` (not `*`: the table has more, which callers must not see). */
const DEVICE_COLUMNS = `device_id, sn, model, manufacturer, firmware_version, agent_version, mac, site_id, registered,
  secret_sealed, secret_gen, pending_secret_sealed, pending_since_ms, last_seen_ms, last_heartbeat_ms,
  reported_status, fault_code`;
const D_DEVICE_COLUMNS = DEVICE_COLUMNS.split(',')
  .map((c) => `d.${c.trim()}`)
  .join(', ');

/** Chargers: registration, tenancy and sites, on PostgreSQL (their secrets' rotation: device-secrets.ts). */
export function createPgDevices(deps: {
  db: PgDatabase;
  now: () => number;
  records: PgChargingRecords;
}): DeviceRepository {
  const { db, now, records } = deps;

  return {
    async allowSerial(sn) {
      await db.query(
        'INSERT INTO allowed_serials (sn, created_ms) VALUES ($1, $2) ON CONFLICT (sn) DO NOTHING',
        [sn, now()],
      );
    },
    registerDevice(input, write) {
      return db.tx((sql) => registerIn(sql, input, write, now));
    },
    async getDevice(deviceId) {
      const rows = await db.query<DeviceRow>(`SELECT ${DEVICE_COLUMNS} FROM devices WHERE device_id = $1`, [
        deviceId,
      ]);
      return rows[0];
    },
    async getDeviceForOperators(deviceId, operatorIds) {
      if (operatorIds.length === 0) return undefined;
      const rows = await db.query<DeviceRow>(
        `SELECT ${D_DEVICE_COLUMNS} FROM devices d JOIN sites s ON s.site_id = d.site_id
         WHERE d.device_id = $1 AND s.operator_id = ANY($2::text[])`,
        [deviceId, [...operatorIds]],
      );
      return rows[0];
    },
    async listDevicesForTargets(operatorIds, target) {
      if (operatorIds.length === 0) return [];
      const values: unknown[] = [[...operatorIds]];
      let text = `SELECT d.device_id, s.operator_id FROM devices d JOIN sites s ON s.site_id = d.site_id
                  WHERE s.operator_id = ANY($1::text[]) AND d.registered`;
      if (target.type === 'site') {
        text += ' AND s.site_id = ANY($2::text[])';
        values.push([...target.ids]);
      } else if (target.type === 'operator') {
        text += ' AND s.operator_id = ANY($2::text[])';
        values.push([...target.ids]);
      }
      text += ' ORDER BY d.device_id';
      return db.query<TargetedDevice>(text, values);
    },
    assignDevice(deviceId, siteId) {
      return db.tx(async (sql) => {
        const moved = await sql.query('UPDATE devices SET site_id = $1 WHERE device_id = $2 RETURNING 1', [
          siteId,
          deviceId,
        ]);
        if (moved.length !== 1) return false;
        await records.deviceMoved(sql, deviceId);
        await notifyDirectoryChange(sql);
        return true;
      });
    },
    resetDevice(deviceId) {
      return db.tx(async (sql) => {
        const reset = await sql.query(
          // A reset revokes a rotation's pending secret too.
          `UPDATE devices SET registered = false, secret_sealed = NULL, secret_gen = secret_gen + 1,
             pending_secret_sealed = NULL, pending_since_ms = NULL
           WHERE device_id = $1 RETURNING 1`,
          [deviceId],
        );
        if (reset.length !== 1) return false;
        await notifyDirectoryChange(sql);
        return true;
      });
    },
    async setDeviceVersions(deviceId, versions) {
      // An absent version (NULL here) leaves the stored one.
      const rows = await db.query(
        `UPDATE devices SET firmware_version = COALESCE($1, firmware_version),
           agent_version = COALESCE($2, agent_version) WHERE device_id = $3 RETURNING 1`,
        [versions.firmware_version ?? null, versions.agent_version ?? null, deviceId],
      );
      return rows.length === 1;
    },
    listDevices(operatorIds, q, onlineSinceMs) {
      if (operatorIds.length === 0) {
        return Promise.resolve({ total: 0, page: q.page, size: q.size, items: [] });
      }
      return listDevicesPage(db, operatorIds, q, onlineSinceMs);
    },
    async countDevicesInSite(siteId) {
      const rows = await db.query<{ n: number }>('SELECT COUNT(*) AS n FROM devices WHERE site_id = $1', [
        siteId,
      ]);
      return rows[0]?.n ?? 0;
    },
    async deviceIdsInSite(siteId) {
      const rows = await db.query<{ device_id: string }>(
        'SELECT device_id FROM devices WHERE site_id = $1 ORDER BY device_id',
        [siteId],
      );
      return rows.map((r) => r.device_id);
    },
  };
}

/**
 * Registration inside one transaction. The device of the serial is locked (`FOR UPDATE`) while deciding, so
 * that two instances cannot both register it again; a first registration inserts with `ON CONFLICT (sn) DO
 * NOTHING`, and when another instance inserted the serial meanwhile the decision is taken again on its row.
 */
async function registerIn(
  sql: Sql,
  input: RegisterInput,
  write: RegistrationWrite,
  now: () => number,
): Promise<StoredRegistration> {
  const allowed = (await sql.query('SELECT 1 FROM allowed_serials WHERE sn = $1', [input.sn])).length > 0;
  for (;;) {
    const existing = (
      await sql.query<{ device_id: string; registered: boolean; site_operator_id: string | null }>(
        // With the operator whose site holds it: a reset charger re-registers only through that operator's group.
        `SELECT d.device_id, d.registered, s.operator_id AS site_operator_id
           FROM devices d LEFT JOIN sites s ON s.site_id = d.site_id WHERE d.sn = $1 FOR UPDATE OF d`,
        [input.sn],
      )
    )[0];
    const decision = write.decide({
      allowed,
      existing: existing && { registered: existing.registered, operatorId: existing.site_operator_id },
    });
    if (decision !== 'register_new' && decision !== 'register_again') return { kind: decision };
    const device =
      decision === 'register_again' && existing
        ? await registerAgain(sql, existing.device_id, input, write, now())
        : await insertDevice(sql, input, write, now());
    // Another instance registered the serial between our read and insert: decide again on its row.
    if (!device) continue;
    await declareConnectors(sql, device.device_id, input.connectors ?? []);
    await notifyDirectoryChange(sql);
    return { kind: 'registered', device };
  }
}

async function insertDevice(
  sql: Sql,
  input: RegisterInput,
  write: RegistrationWrite,
  t: number,
): Promise<DeviceRow | undefined> {
  const rows = await sql.query<DeviceRow>(
    `INSERT INTO devices (device_id, sn, model, manufacturer, firmware_version, agent_version, mac, site_id,
       registered, secret_sealed, secret_gen, registered_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, true, $9, 1, $10)
     ON CONFLICT (sn) DO NOTHING RETURNING ${DEVICE_COLUMNS}`,
    [
      newId('dev'),
      input.sn,
      input.model,
      input.manufacturer,
      input.firmware_version,
      input.agent_version ?? null,
      input.mac ?? null,
      write.defaultSiteId ?? null,
      write.secretSealed,
      t,
    ],
  );
  return rows[0];
}

/** A reset charger comes back under its old id, with a new secret and generation; it keeps its site. */
async function registerAgain(
  sql: Sql,
  deviceId: string,
  input: RegisterInput,
  write: RegistrationWrite,
  t: number,
): Promise<DeviceRow | undefined> {
  const rows = await sql.query<DeviceRow>(
    `UPDATE devices SET model = $1, manufacturer = $2, firmware_version = $3, agent_version = $4, mac = $5,
       registered = true, secret_sealed = $6, secret_gen = secret_gen + 1, pending_secret_sealed = NULL,
       pending_since_ms = NULL, registered_ms = $7, site_id = COALESCE(site_id, $8)
     WHERE device_id = $9 RETURNING ${DEVICE_COLUMNS}`,
    [
      input.model,
      input.manufacturer,
      input.firmware_version,
      input.agent_version ?? null,
      input.mac ?? null,
      write.secretSealed,
      t,
      write.defaultSiteId ?? null,
      deviceId,
    ],
  );
  return rows[0];
}

/** The connectors the charger declares: their limits and V2G capability, live state untouched. */
async function declareConnectors(
  sql: Sql,
  deviceId: string,
  connectors: NonNullable<RegisterInput['connectors']>,
): Promise<void> {
  if (connectors.length === 0) return;
  await sql.query(
    `INSERT INTO connectors (device_id, connector_id, max_power_kw, v2g_capable)
     SELECT $1, c.connector_id, c.max_power_kw, c.v2g_capable
     FROM unnest($2::int[], $3::float8[], $4::bool[]) AS c(connector_id, max_power_kw, v2g_capable)
     ON CONFLICT (device_id, connector_id) DO UPDATE SET max_power_kw = excluded.max_power_kw,
       v2g_capable = excluded.v2g_capable`,
    [
      deviceId,
      connectors.map((c) => c.connector_id),
      connectors.map((c) => c.max_power_kw),
      connectors.map((c) => c.v2g_capable),
    ],
  );
}

/** Same rule as `domain/liveness-rule.ts` (and the SQLite query): change them together. */
function onlineCondition(param: string, lastSeen: string): string {
  return `(${lastSeen} >= ${param} AND (COALESCE(d.reported_status, '') <> 'offline'
    OR d.last_seen_ms > COALESCE(d.last_heartbeat_ms, 0)))`;
}

async function listDevicesPage(
  db: PgDatabase,
  operatorIds: readonly string[],
  q: Parameters<DeviceRepository['listDevices']>[1],
  onlineSinceMs: number,
) {
  const values: unknown[] = [[...operatorIds]];
  const where = ['s.operator_id = ANY($1::text[])'];
  if (q.site_id !== undefined) {
    values.push(q.site_id);
    where.push(`d.site_id = $${values.length}`);
  }
  for (const column of ['firmware_version', 'agent_version'] as const) {
    const wanted = q[column];
    if (wanted === undefined) continue;
    values.push(wanted);
    where.push(`d.${column} = $${values.length}`);
  }
  // Online: seen within the window, and not offline by a heartbeat unless it made a request after that.
  if (q.status === 'online') {
    values.push(onlineSinceMs);
    where.push(onlineCondition(`$${values.length}`, 'd.last_seen_ms'));
  } else if (q.status === 'offline') {
    values.push(onlineSinceMs);
    where.push(`NOT ${onlineCondition(`$${values.length}`, 'COALESCE(d.last_seen_ms, 0)')}`);
  }
  const from = `FROM devices d JOIN sites s ON s.site_id = d.site_id WHERE ${where.join(' AND ')}`;
  const limit = values.length + 1;
  // Total and page in one statement: the count is a window over the whole filtered set.
  const rows = await db.query<DeviceRow & { total: number }>(
    `SELECT ${D_DEVICE_COLUMNS}, COUNT(*) OVER () AS total ${from}
     ORDER BY d.device_id LIMIT $${limit} OFFSET $${limit + 1}`,
    [...values, q.size, pageOffset(q.page, q.size)],
  );
  const total =
    rows[0]?.total ?? (await db.query<{ n: number }>(`SELECT COUNT(*) AS n ${from}`, values))[0]?.n ?? 0;
  const items: DeviceRow[] = rows.map(({ total: _total, ...device }) => device);
  return { total, page: q.page, size: q.size, items };
}
