import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import type {
  ChargingRecord,
  CommandName,
  CommandStatus,
  PendingCommand,
  Scope,
} from '../../shared/index.js';
import { newId, newSecret } from '../ids.js';
import type { PlatformKeys } from '../platform-keys.js';
import { migrate } from './migrations.js';
import type {
  ClientRow,
  CommandRow,
  ConnectorRow,
  ControlRow,
  DeviceRow,
  NewCommand,
  OperatorRow,
  Page,
  RegistrationOutcome,
  ScheduleRow,
  SiteRow,
  Store,
} from './store.js';
import { createWriteBatcher } from './write-batcher.js';

export const DATABASE_FILE = 'platform.sqlite';

export function openDatabase(dataDir: string): Database.Database {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const db = new Database(join(dataDir, DATABASE_FILE));
  db.pragma('journal_mode = WAL');
  // NORMAL in WAL mode: a power cut may lose the last commits but never corrupts the database.
  db.pragma('synchronous = NORMAL');
  db.pragma('busy_timeout = 5000');
  db.pragma('foreign_keys = ON');
  migrate(db);
  return db;
}

interface RawDevice extends Omit<DeviceRow, 'registered'> {
  registered: number;
}
interface RawConnector extends Omit<ConnectorRow, 'v2g_capable'> {
  v2g_capable: number;
}
interface RawRecord {
  record_id: string;
  device_id: string;
  connector_id: number;
  start_ms: number;
  end_ms: number;
  energy: number;
  max_power: number | null;
  avg_power: number | null;
  cost: number | null;
  meter_start: number | null;
  meter_end: number | null;
  vin: string | null;
  soc_start: number | null;
  soc_end: number | null;
}
interface RawCommand {
  command_id: string;
  device_id: string;
  command: CommandName;
  params: string;
  status: CommandStatus;
  expiry_ms: number;
  created_ms: number;
  updated_ms: number;
  control_id: string | null;
  client_id: string | null;
}

const iso = (ms: number) => new Date(ms).toISOString();

function toDevice(raw: RawDevice): DeviceRow {
  return { ...raw, registered: raw.registered === 1 };
}
function toConnector(raw: RawConnector): ConnectorRow {
  return { ...raw, v2g_capable: raw.v2g_capable === 1 };
}
function toCommand(raw: RawCommand): CommandRow {
  return { ...raw, params: JSON.parse(raw.params) as Record<string, unknown> };
}
function toRecord(r: RawRecord): ChargingRecord {
  const rec: ChargingRecord = {
    record_id: r.record_id,
    device_id: r.device_id,
    connector_id: r.connector_id,
    start_time: iso(r.start_ms),
    end_time: iso(r.end_ms),
    energy: r.energy,
  };
  if (r.max_power !== null) rec.max_power = r.max_power;
  if (r.avg_power !== null) rec.avg_power = r.avg_power;
  if (r.cost !== null) rec.cost = r.cost;
  if (r.meter_start !== null) rec.meter_start = r.meter_start;
  if (r.meter_end !== null) rec.meter_end = r.meter_end;
  if (r.vin !== null || r.soc_start !== null || r.soc_end !== null) {
    rec.vehicle_info = {};
    if (r.vin !== null) rec.vehicle_info.vin = r.vin;
    if (r.soc_start !== null) rec.vehicle_info.soc_start = r.soc_start;
    if (r.soc_end !== null) rec.vehicle_info.soc_end = r.soc_end;
  }
  return rec;
}

function placeholders(n: number): string {
  return new Array(n).fill('?').join(',');
}

export function createSqliteStore(dataDir: string, keys: PlatformKeys, now: () => number = Date.now): Store {
  const db = openDatabase(dataDir);
  const batcher = createWriteBatcher(db);
  // Statements whose SQL depends on how many ids are bound are prepared once per distinct text.
  const dynamic = new Map<string, Database.Statement>();
  const prepared = (sql: string): Database.Statement => {
    let s = dynamic.get(sql);
    if (!s) {
      s = db.prepare(sql);
      dynamic.set(sql, s);
    }
    return s;
  };

  const stmt = {
    insertOperator: db.prepare('INSERT INTO operators (operator_id, name, created_ms) VALUES (?, ?, ?)'),
    listOperators: db.prepare('SELECT operator_id, name FROM operators ORDER BY created_ms, operator_id'),
    getOperator: db.prepare('SELECT operator_id, name FROM operators WHERE operator_id = ?'),
    insertSite: db.prepare(
      'INSERT INTO sites (site_id, operator_id, name, timezone, created_ms) VALUES (?, ?, ?, ?, ?)',
    ),
    listSites: db.prepare(
      'SELECT site_id, operator_id, name, timezone FROM sites ORDER BY created_ms, site_id',
    ),
    listSitesOf: db.prepare(
      'SELECT site_id, operator_id, name, timezone FROM sites WHERE operator_id = ? ORDER BY created_ms, site_id',
    ),
    getSite: db.prepare('SELECT site_id, operator_id, name, timezone FROM sites WHERE site_id = ?'),
    insertClient: db.prepare(
      'INSERT INTO clients (client_id, secret_sealed, scopes, created_ms) VALUES (?, ?, ?, ?)',
    ),
    insertClientOperator: db.prepare('INSERT INTO client_operators (client_id, operator_id) VALUES (?, ?)'),
    getClient: db.prepare('SELECT client_id, secret_sealed, scopes FROM clients WHERE client_id = ?'),
    clientOperators: db.prepare(
      'SELECT operator_id FROM client_operators WHERE client_id = ? ORDER BY operator_id',
    ),
    allowSerial: db.prepare('INSERT OR IGNORE INTO allowed_serials (sn, created_ms) VALUES (?, ?)'),
    isAllowed: db.prepare('SELECT 1 FROM allowed_serials WHERE sn = ?'),
    deviceBySn: db.prepare('SELECT * FROM devices WHERE sn = ?'),
    getDevice: db.prepare('SELECT * FROM devices WHERE device_id = ?'),
    insertDevice: db.prepare(
      `INSERT INTO devices (device_id, sn, model, manufacturer, firmware_version, mac, site_id, registered,
         secret_sealed, secret_gen, registered_ms) VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, 1, ?)`,
    ),
    reregisterDevice: db.prepare(
      `UPDATE devices SET model = ?, manufacturer = ?, firmware_version = ?, mac = ?, registered = 1,
         secret_sealed = ?, secret_gen = secret_gen + 1, registered_ms = ?, site_id = COALESCE(site_id, ?)
       WHERE device_id = ?`,
    ),
    upsertConnectorDeclaration: db.prepare(
      `INSERT INTO connectors (device_id, connector_id, max_power_kw, v2g_capable) VALUES (?, ?, ?, ?)
       ON CONFLICT (device_id, connector_id) DO UPDATE SET max_power_kw = excluded.max_power_kw,
         v2g_capable = excluded.v2g_capable`,
    ),
    assignDevice: db.prepare('UPDATE devices SET site_id = ? WHERE device_id = ?'),
    resetDevice: db.prepare(
      'UPDATE devices SET registered = 0, secret_sealed = NULL, secret_gen = secret_gen + 1 WHERE device_id = ?',
    ),
    secretGens: db.prepare('SELECT device_id, secret_gen FROM devices'),
    listConnectors: db.prepare('SELECT * FROM connectors WHERE device_id = ? ORDER BY connector_id'),
    getConnector: db.prepare('SELECT * FROM connectors WHERE device_id = ? AND connector_id = ?'),
    upsertConnectorState: db.prepare(
      `INSERT INTO connectors (device_id, connector_id, state, power, voltage, current, energy_delivered, soc,
         temperature, last_telemetry_ms) VALUES (@device_id, @connector_id, @state, @power, @voltage, @current,
         @energy_delivered, @soc, @temperature, @ts_ms)
       ON CONFLICT (device_id, connector_id) DO UPDATE SET state = excluded.state, power = excluded.power,
         voltage = excluded.voltage, current = excluded.current, energy_delivered = excluded.energy_delivered,
         soc = excluded.soc, temperature = excluded.temperature, last_telemetry_ms = excluded.last_telemetry_ms
       WHERE connectors.last_telemetry_ms IS NULL OR connectors.last_telemetry_ms <= excluded.last_telemetry_ms`,
    ),
    insertTelemetry: db.prepare(
      `INSERT INTO telemetry (device_id, connector_id, ts_ms, state, voltage, current, power, energy_delivered, soc,
         temperature, phase_details, received_ms) VALUES (@device_id, @connector_id, @ts_ms, @state, @voltage,
         @current, @power, @energy_delivered, @soc, @temperature, @phase_details, @received_ms)`,
    ),
    recordHeartbeat: db.prepare(
      `UPDATE devices SET last_heartbeat_ms = ?, last_seen_ms = MAX(COALESCE(last_seen_ms, 0), ?),
         reported_status = ?, fault_code = ? WHERE device_id = ?`,
    ),
    touchDevice: db.prepare(
      'UPDATE devices SET last_seen_ms = MAX(COALESCE(last_seen_ms, 0), ?) WHERE device_id = ?',
    ),
    insertRecord: db.prepare(
      `INSERT OR IGNORE INTO charging_records (record_id, device_id, connector_id, start_ms, end_ms, energy,
         max_power, avg_power, cost, meter_start, meter_end, vin, soc_start, soc_end)
       VALUES (@record_id, @device_id, @connector_id, @start_ms, @end_ms, @energy, @max_power, @avg_power, @cost,
         @meter_start, @meter_end, @vin, @soc_start, @soc_end)`,
    ),
    insertCommand: db.prepare(
      `INSERT INTO commands (command_id, device_id, command, params, status, expiry_ms, created_ms, updated_ms,
         control_id, client_id) VALUES (?, ?, ?, ?, 'queued', ?, ?, ?, ?, ?)`,
    ),
    insertHistory: db.prepare(
      'INSERT INTO command_history (command_id, status, at_ms, reason) VALUES (?, ?, ?, ?)',
    ),
    pendingCommands: db.prepare(
      `SELECT * FROM commands WHERE device_id = ? AND status IN ('queued', 'delivered') AND expiry_ms > ?
       ORDER BY created_ms, command_id`,
    ),
    markDelivered: db.prepare(
      `UPDATE commands SET status = 'delivered', updated_ms = ? WHERE command_id = ? AND status = 'queued'`,
    ),
    upsertSchedule: db.prepare(
      `INSERT INTO schedules (device_id, connector_id, schedule_id, body, updated_ms) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (device_id, connector_id, schedule_id) DO UPDATE SET body = excluded.body,
         updated_ms = excluded.updated_ms`,
    ),
    getSetting: db.prepare('SELECT value FROM settings WHERE key = ?'),
    setSetting: db.prepare(
      'INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value',
    ),
    insertControl: db.prepare(
      `INSERT INTO controls (control_id, client_id, target_type, target_ids, command, params, status, created_ms,
         ends_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
  };

  const insertCommandsNow = (commands: readonly NewCommand[], nowMs: number): CommandRow[] =>
    commands.map((c) => {
      const command_id = newId('cmd');
      stmt.insertCommand.run(
        command_id,
        c.device_id,
        c.command,
        JSON.stringify(c.params),
        c.expiry_ms,
        nowMs,
        nowMs,
        c.control_id ?? null,
        c.client_id ?? null,
      );
      stmt.insertHistory.run(command_id, 'queued', nowMs, null);
      return {
        command_id,
        device_id: c.device_id,
        command: c.command,
        params: c.params,
        status: 'queued' as const,
        expiry_ms: c.expiry_ms,
        created_ms: nowMs,
        updated_ms: nowMs,
        control_id: c.control_id ?? null,
        client_id: c.client_id ?? null,
      };
    });

  const getClientNow = (clientId: string): ClientRow | undefined => {
    const row = stmt.getClient.get(clientId) as
      | { client_id: string; secret_sealed: string; scopes: string }
      | undefined;
    if (!row) return undefined;
    const operator_ids = (stmt.clientOperators.all(clientId) as Array<{ operator_id: string }>).map(
      (r) => r.operator_id,
    );
    return { ...row, scopes: row.scopes.split(',') as Scope[], operator_ids };
  };

  // The admin CLI writes from another process; data_version changes when it commits.
  const dataVersion = db.prepare('PRAGMA data_version').pluck();

  const store: Store = {
    async createOperator(name) {
      const row: OperatorRow = { operator_id: newId('op'), name };
      stmt.insertOperator.run(row.operator_id, name, now());
      return row;
    },
    async listOperators() {
      return stmt.listOperators.all() as OperatorRow[];
    },
    async getOperator(operatorId) {
      return stmt.getOperator.get(operatorId) as OperatorRow | undefined;
    },
    async createSite({ operator_id, name, timezone, site_id }) {
      const row: SiteRow = { site_id: site_id ?? newId('site'), operator_id, name, timezone };
      stmt.insertSite.run(row.site_id, operator_id, name, timezone, now());
      return row;
    },
    async listSites(operatorId) {
      return (operatorId ? stmt.listSitesOf.all(operatorId) : stmt.listSites.all()) as SiteRow[];
    },
    async getSite(siteId) {
      return stmt.getSite.get(siteId) as SiteRow | undefined;
    },
    async createClient({ operator_ids, scopes }) {
      const secret = newSecret();
      const client_id = newId('cli');
      const sealed = keys.sealSecret(secret);
      db.transaction(() => {
        stmt.insertClient.run(client_id, sealed, scopes.join(','), now());
        for (const op of new Set(operator_ids)) stmt.insertClientOperator.run(client_id, op);
      })();
      return {
        client: { client_id, secret_sealed: sealed, scopes, operator_ids: [...new Set(operator_ids)] },
        secret,
      };
    },
    async getClient(clientId) {
      return getClientNow(clientId);
    },

    async allowSerial(sn) {
      stmt.allowSerial.run(sn, now());
    },
    async registerDevice(input, policy) {
      return db
        .transaction((): RegistrationOutcome => {
          if (policy.registration === 'allowlist' && !stmt.isAllowed.get(input.sn))
            return { kind: 'not_allowed' };
          const existing = stmt.deviceBySn.get(input.sn) as RawDevice | undefined;
          if (existing?.registered === 1) return { kind: 'already_registered' };
          const secret = newSecret();
          const sealed = keys.sealSecret(secret);
          const t = now();
          let deviceId: string;
          if (existing) {
            deviceId = existing.device_id;
            stmt.reregisterDevice.run(
              input.model,
              input.manufacturer,
              input.firmware_version,
              input.mac ?? null,
              sealed,
              t,
              policy.defaultSiteId ?? null,
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
              input.mac ?? null,
              policy.defaultSiteId ?? null,
              sealed,
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
          const device = toDevice(stmt.getDevice.get(deviceId) as RawDevice);
          return { kind: 'registered', device, secret };
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
    async listDeviceIdsForTargets(operatorIds, target) {
      if (operatorIds.length === 0) return [];
      const ops = placeholders(operatorIds.length);
      let sql = `SELECT d.device_id FROM devices d JOIN sites s ON s.site_id = d.site_id
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
      return prepared(sql)
        .all(...args)
        .map((r) => (r as { device_id: string }).device_id);
    },
    async assignDevice(deviceId, siteId) {
      return stmt.assignDevice.run(siteId, deviceId).changes === 1;
    },
    async resetDevice(deviceId) {
      return stmt.resetDevice.run(deviceId).changes === 1;
    },
    async loadSecretGenerations() {
      const map = new Map<string, number>();
      for (const r of stmt.secretGens.all() as Array<{ device_id: string; secret_gen: number }>) {
        map.set(r.device_id, r.secret_gen);
      }
      return map;
    },

    async listConnectors(deviceId) {
      return (stmt.listConnectors.all(deviceId) as RawConnector[]).map(toConnector);
    },
    async getConnector(deviceId, connectorId) {
      const raw = stmt.getConnector.get(deviceId, connectorId) as RawConnector | undefined;
      return raw ? toConnector(raw) : undefined;
    },
    recordTelemetry(deviceId, records, receivedMs) {
      return batcher.write(() => {
        for (const t of records) {
          const row = {
            device_id: deviceId,
            connector_id: t.connector_id,
            ts_ms: Date.parse(t.timestamp),
            state: t.state,
            voltage: t.voltage ?? null,
            current: t.current ?? null,
            power: t.power ?? null,
            energy_delivered: t.energy_delivered ?? null,
            soc: t.soc ?? null,
            temperature: t.temperature ?? null,
            phase_details: t.phase_details ? JSON.stringify(t.phase_details) : null,
            received_ms: receivedMs,
          };
          stmt.insertTelemetry.run(row);
          stmt.upsertConnectorState.run(row);
        }
      });
    },
    recordHeartbeat(deviceId, hb) {
      return batcher.write(() => {
        stmt.recordHeartbeat.run(hb.atMs, hb.atMs, hb.status, hb.fault_code, deviceId);
      });
    },
    touchDevices(seen) {
      return batcher.write(() => {
        for (const [deviceId, ms] of seen) stmt.touchDevice.run(ms, deviceId);
      });
    },

    async listChargingRecords(operatorIds, q) {
      if (operatorIds.length === 0) return { total: 0, page: q.page, size: q.size, items: [] };
      const where: string[] = [`s.operator_id IN (${placeholders(operatorIds.length)})`];
      const args: Array<string | number> = [...operatorIds];
      if (q.device_id !== undefined) {
        where.push('r.device_id = ?');
        args.push(q.device_id);
      }
      if (q.connector_id !== undefined) {
        where.push('r.connector_id = ?');
        args.push(q.connector_id);
      }
      // A record matches when its session overlaps [start_time, end_time) (DESIGN.md §9).
      if (q.start_time !== undefined) {
        where.push('r.end_ms > ?');
        args.push(Date.parse(q.start_time));
      }
      if (q.end_time !== undefined) {
        where.push('r.start_ms < ?');
        args.push(Date.parse(q.end_time));
      }
      const from = `FROM charging_records r JOIN devices d ON d.device_id = r.device_id
                    JOIN sites s ON s.site_id = d.site_id WHERE ${where.join(' AND ')}`;
      const total = (prepared(`SELECT COUNT(*) AS n ${from}`).get(...args) as { n: number }).n;
      const rows = prepared(
        `SELECT r.* ${from} ORDER BY r.start_ms DESC, r.record_id DESC LIMIT ? OFFSET ?`,
      ).all(...args, q.size, (q.page - 1) * q.size) as RawRecord[];
      return { total, page: q.page, size: q.size, items: rows.map(toRecord) } satisfies Page<ChargingRecord>;
    },
    async insertChargingRecords(records) {
      return db.transaction(() => {
        let inserted = 0;
        for (const r of records) {
          inserted += stmt.insertRecord.run({
            record_id: r.record_id,
            device_id: r.device_id,
            connector_id: r.connector_id,
            start_ms: Date.parse(r.start_time),
            end_ms: Date.parse(r.end_time),
            energy: r.energy,
            max_power: r.max_power ?? null,
            avg_power: r.avg_power ?? null,
            cost: r.cost ?? null,
            meter_start: r.meter_start ?? null,
            meter_end: r.meter_end ?? null,
            vin: r.vehicle_info?.vin ?? null,
            soc_start: r.vehicle_info?.soc_start ?? null,
            soc_end: r.vehicle_info?.soc_end ?? null,
          }).changes;
        }
        return inserted;
      })();
    },

    async enqueueCommands(commands, nowMs) {
      return db.transaction(() => insertCommandsNow(commands, nowMs))();
    },
    async takePendingCommands(deviceId, nowMs) {
      const rows = (stmt.pendingCommands.all(deviceId, nowMs) as RawCommand[]).map(toCommand);
      if (rows.some((r) => r.status === 'queued')) {
        db.transaction(() => {
          for (const r of rows) {
            if (r.status === 'queued' && stmt.markDelivered.run(nowMs, r.command_id).changes === 1) {
              stmt.insertHistory.run(r.command_id, 'delivered', nowMs, null);
            }
          }
        })();
      }
      return rows.map(
        (r): PendingCommand => ({
          command_id: r.command_id,
          command: r.command,
          params: r.params,
          expiry: iso(r.expiry_ms),
        }),
      );
    },
    async saveSchedule(row: ScheduleRow, command) {
      return db.transaction(() => {
        stmt.upsertSchedule.run(
          row.device_id,
          row.connector_id,
          row.schedule.schedule_id,
          JSON.stringify(row.schedule),
          row.updated_ms,
        );
        return insertCommandsNow([command], row.updated_ms)[0]!;
      })();
    },
    async createControl(control: ControlRow, commands) {
      return db.transaction(() => {
        stmt.insertControl.run(
          control.control_id,
          control.client_id,
          control.target_type,
          JSON.stringify(control.target_ids),
          control.command,
          JSON.stringify(control.params),
          control.status,
          control.created_ms,
          control.ends_ms,
        );
        return insertCommandsNow(commands, control.created_ms);
      })();
    },

    async getSetting(key) {
      return (stmt.getSetting.get(key) as { value: string } | undefined)?.value;
    },
    async setSetting(key, value) {
      stmt.setSetting.run(key, value);
    },
    externalChangeVersion() {
      return dataVersion.get() as number;
    },
    async close() {
      batcher.drain();
      db.close();
    },
  };
  return store;
}
