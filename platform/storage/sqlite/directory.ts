import type Database from 'better-sqlite3';
import type { Scope } from '../../../shared/index.js';
import { newId } from '../../domain/ids.js';
import type { ClientEntry } from '../directory-rows.js';
import { pageOffset } from '../page.js';
import type {
  ClientRow,
  ClientSummary,
  OperatorDirectory,
  OperatorRow,
  SiteRow,
  StoredClientRotation,
} from '../store.js';
import { placeholders, type StatementCache } from './database.js';
import { DIRECTORY_DEVICE_SQL, type RawDeviceEntry, toDeviceEntry } from './rows.js';

const CLIENT_COLUMNS =
  'client_id, secret_sealed, scopes, status, secret_gen, previous_secret_sealed, previous_secret_until_ms';
const CLIENT_ENTRY_COLUMNS =
  'client_id, secret_sealed, require_signature, status, secret_gen, previous_secret_until_ms';
type RawClientEntry = Omit<ClientEntry, 'require_signature' | 'operator_ids'> & { require_signature: number };
const toClientEntry = (c: RawClientEntry, operator_ids: string[]): ClientEntry => ({
  ...c,
  require_signature: c.require_signature === 1,
  operator_ids,
});

/** Operators, sites and clients, the principal directory's rows, and settings. */
export function createSqliteDirectory(db: Database.Database, now: () => number, prepared: StatementCache) {
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
    getClient: db.prepare(`SELECT ${CLIENT_COLUMNS} FROM clients WHERE client_id = ?`),
    listClients: db.prepare(
      'SELECT client_id, scopes, status, created_ms FROM clients ORDER BY created_ms, client_id',
    ),
    revokeClient: db.prepare(
      `UPDATE clients SET status = 'revoked', revoked_ms = ?, previous_secret_sealed = NULL,
         previous_secret_until_ms = NULL WHERE client_id = ? AND status = 'active'`,
    ),
    disableClientWebhooks: db.prepare(
      `UPDATE webhooks SET status = 'disabled', disabled_reason = 'client_revoked', updated_ms = ?
       WHERE client_id = ? AND status = 'enabled'`,
    ),
    rotateClientSecret: db.prepare(
      `UPDATE clients SET previous_secret_sealed = CASE WHEN @until IS NULL THEN NULL ELSE secret_sealed END,
         previous_secret_until_ms = @until, secret_sealed = @sealed, secret_gen = secret_gen + 1
       WHERE client_id = @client_id AND status = 'active' RETURNING secret_gen`,
    ),
    clientOperators: db.prepare(
      'SELECT operator_id FROM client_operators WHERE client_id = ? ORDER BY operator_id',
    ),
    directoryDevices: db.prepare(`${DIRECTORY_DEVICE_SQL}`),
    directoryDevice: db.prepare(`${DIRECTORY_DEVICE_SQL} WHERE d.device_id = ?`),
    directoryClients: db.prepare(`SELECT ${CLIENT_ENTRY_COLUMNS} FROM clients`),
    directoryClient: db.prepare(`SELECT ${CLIENT_ENTRY_COLUMNS} FROM clients WHERE client_id = ?`),
    directoryClientOperators: db.prepare('SELECT client_id, operator_id FROM client_operators'),
    clientRequireSignature: db.prepare('UPDATE clients SET require_signature = ? WHERE client_id = ?'),
    deviceRequireSignature: db.prepare('UPDATE devices SET require_signature = ? WHERE device_id = ?'),
    getSetting: db.prepare('SELECT value FROM settings WHERE key = ?'),
    setSetting: db.prepare(
      'INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value',
    ),
  };

  const operatorsOf = (clientId: string): string[] =>
    (stmt.clientOperators.all(clientId) as Array<{ operator_id: string }>).map((r) => r.operator_id);
  const getClientNow = (clientId: string): ClientRow | undefined => {
    const row = stmt.getClient.get(clientId) as
      | (Omit<ClientRow, 'scopes' | 'operator_ids'> & { scopes: string })
      | undefined;
    if (!row) return undefined;
    return { ...row, scopes: row.scopes.split(',') as Scope[], operator_ids: operatorsOf(clientId) };
  };

  // The admin CLI writes from another process; data_version changes when it commits. Admin changes made
  // through this connection (tests, an embedded admin API) bump `localChanges` instead.
  const dataVersion = db.prepare('PRAGMA data_version').pluck();
  let localChanges = 0;

  const directory: OperatorDirectory = {
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
    async createClient({ operator_ids, scopes, secret_sealed }) {
      localChanges++;
      const client_id = newId('cli');
      db.transaction(() => {
        stmt.insertClient.run(client_id, secret_sealed, scopes.join(','), now());
        for (const op of new Set(operator_ids)) stmt.insertClientOperator.run(client_id, op);
      }).immediate();
      return {
        client_id,
        secret_sealed,
        scopes,
        operator_ids: [...new Set(operator_ids)],
        status: 'active',
        secret_gen: 1,
        previous_secret_sealed: null,
        previous_secret_until_ms: null,
      };
    },
    async getClient(clientId) {
      return getClientNow(clientId);
    },
    async listClients() {
      const rows = stmt.listClients.all() as Array<
        Omit<ClientSummary, 'scopes' | 'operator_ids'> & { scopes: string }
      >;
      return rows.map((r) => ({
        client_id: r.client_id,
        operator_ids: operatorsOf(r.client_id),
        scopes: r.scopes.split(',') as Scope[],
        status: r.status,
        created_ms: r.created_ms,
      }));
    },
    async revokeClient(clientId) {
      localChanges++;
      return db
        .transaction(() => {
          const at = now();
          if (stmt.revokeClient.run(at, clientId).changes === 1) {
            stmt.disableClientWebhooks.run(at, clientId);
            return 'revoked' as const;
          }
          return stmt.getClient.get(clientId) ? ('already_revoked' as const) : ('unknown' as const);
        })
        .immediate();
    },
    async rotateClientSecret(clientId, graceMs, secretSealed) {
      localChanges++;
      const until = graceMs > 0 ? now() + graceMs : null;
      return db
        .transaction((): StoredClientRotation => {
          const row = stmt.rotateClientSecret.get({ client_id: clientId, sealed: secretSealed, until }) as
            | { secret_gen: number }
            | undefined;
          if (row) return { outcome: 'rotated', secret_gen: row.secret_gen };
          return { outcome: stmt.getClient.get(clientId) ? 'revoked' : 'unknown' };
        })
        .immediate();
    },
    async loadDirectory() {
      const devices = (stmt.directoryDevices.all() as RawDeviceEntry[]).map(toDeviceEntry);
      const ops = new Map<string, string[]>();
      for (const r of stmt.directoryClientOperators.all() as Array<{
        client_id: string;
        operator_id: string;
      }>) {
        const list = ops.get(r.client_id) ?? [];
        list.push(r.operator_id);
        ops.set(r.client_id, list);
      }
      const clients = (stmt.directoryClients.all() as RawClientEntry[]).map((c) =>
        toClientEntry(c, ops.get(c.client_id) ?? []),
      );
      return { devices, clients };
    },
    async loadDeviceEntry(deviceId) {
      const raw = stmt.directoryDevice.get(deviceId) as RawDeviceEntry | undefined;
      return raw ? toDeviceEntry(raw) : undefined;
    },
    async loadClientEntry(clientId) {
      const c = stmt.directoryClient.get(clientId) as RawClientEntry | undefined;
      return c ? toClientEntry(c, operatorsOf(clientId)) : undefined;
    },
    async setRequireSignature(kind, id, required) {
      localChanges++;
      const s = kind === 'client' ? stmt.clientRequireSignature : stmt.deviceRequireSignature;
      return s.run(required ? 1 : 0, id).changes === 1;
    },
    async listSitesFor(operatorIds, page, size) {
      if (operatorIds.length === 0) return { total: 0, page, size, items: [] };
      const ops = placeholders(operatorIds.length);
      const total = (
        prepared(`SELECT COUNT(*) AS n FROM sites WHERE operator_id IN (${ops})`).get(...operatorIds) as {
          n: number;
        }
      ).n;
      const items = prepared(
        `SELECT s.site_id, s.operator_id, s.name, s.timezone,
           (SELECT COUNT(*) FROM devices d WHERE d.site_id = s.site_id) AS device_count
         FROM sites s WHERE s.operator_id IN (${ops}) ORDER BY s.created_ms, s.site_id LIMIT ? OFFSET ?`,
      ).all(...operatorIds, size, pageOffset(page, size)) as Array<SiteRow & { device_count: number }>;
      return { total, page, size, items };
    },
    async getSetting(key) {
      return (stmt.getSetting.get(key) as { value: string } | undefined)?.value;
    },
    async setSetting(key, value) {
      stmt.setSetting.run(key, value);
    },
    externalChangeVersion() {
      return (dataVersion.get() as number) * 1_000_000 + localChanges;
    },
  };
  /** An admin change made through this connection: principals reload it like another process's. */
  const noteLocalChange = () => {
    localChanges++;
  };
  return { directory, noteLocalChange };
}
