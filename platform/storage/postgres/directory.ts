import type { Scope } from '../../../shared/index.js';
import { newId } from '../../domain/ids.js';
import type { ClientEntry, DeviceEntry } from '../directory-rows.js';
import { pageOffset } from '../page.js';
import type {
  ClientRow,
  ClientSummary,
  OperatorDirectory,
  OperatorRow,
  SiteRow,
  StoredClientRotation,
} from '../store.js';
import { notifyDirectoryChange, type PgDatabase } from './database.js';

/** What the principal directory holds of a device: its credentials, signing and tenancy. */
const DIRECTORY_DEVICE_SQL = `SELECT d.device_id, d.secret_gen, d.secret_sealed, d.pending_since_ms,
  d.require_signature, d.site_id, s.operator_id FROM devices d LEFT JOIN sites s ON s.site_id = d.site_id`;
const SITE_COLUMNS = 'site_id, operator_id, name, timezone';

type RawClient = Omit<ClientRow, 'scopes' | 'operator_ids'> & { scopes: string };
const CLIENT_COLUMNS =
  'client_id, secret_sealed, scopes, status, secret_gen, previous_secret_sealed, previous_secret_until_ms';
const CLIENT_ENTRY_COLUMNS =
  'client_id, secret_sealed, require_signature, status, secret_gen, previous_secret_until_ms';

/** Operators, sites and clients, the principal directory's rows, and settings, on PostgreSQL. */
export function createPgDirectory(
  db: PgDatabase,
  now: () => number,
): Omit<OperatorDirectory, 'externalChangeVersion'> {
  const operatorsOfClient = async (clientId: string): Promise<string[]> =>
    (
      await db.query<{ operator_id: string }>(
        'SELECT operator_id FROM client_operators WHERE client_id = $1 ORDER BY operator_id',
        [clientId],
      )
    ).map((r) => r.operator_id);

  return {
    async createOperator(name) {
      const row: OperatorRow = { operator_id: newId('op'), name };
      await db.query('INSERT INTO operators (operator_id, name, created_ms) VALUES ($1, $2, $3)', [
        row.operator_id,
        name,
        now(),
      ]);
      return row;
    },
    async listOperators() {
      return db.query<OperatorRow>(
        'SELECT operator_id, name FROM operators ORDER BY created_ms, operator_id',
      );
    },
    async getOperator(operatorId) {
      const rows = await db.query<OperatorRow>(
        'SELECT operator_id, name FROM operators WHERE operator_id = $1',
        [operatorId],
      );
      return rows[0];
    },
    async createSite({ operator_id, name, timezone, site_id }) {
      const row: SiteRow = { site_id: site_id ?? newId('site'), operator_id, name, timezone };
      await db.query(
        'INSERT INTO sites (site_id, operator_id, name, timezone, created_ms) VALUES ($1, $2, $3, $4, $5)',
        [row.site_id, operator_id, name, timezone, now()],
      );
      return row;
    },
    async listSites(operatorId) {
      return operatorId
        ? db.query<SiteRow>(
            `SELECT ${SITE_COLUMNS} FROM sites WHERE operator_id = $1 ORDER BY created_ms, site_id`,
            [operatorId],
          )
        : db.query<SiteRow>(`SELECT ${SITE_COLUMNS} FROM sites ORDER BY created_ms, site_id`);
    },
    async getSite(siteId) {
      const rows = await db.query<SiteRow>(`SELECT ${SITE_COLUMNS} FROM sites WHERE site_id = $1`, [siteId]);
      return rows[0];
    },
    async createClient({ operator_ids, scopes, secret_sealed }) {
      const client_id = newId('cli');
      const ops = [...new Set(operator_ids)];
      await db.tx(async (sql) => {
        await sql.query(
          'INSERT INTO clients (client_id, secret_sealed, scopes, created_ms) VALUES ($1, $2, $3, $4)',
          [client_id, secret_sealed, scopes.join(','), now()],
        );
        await sql.query(
          'INSERT INTO client_operators (client_id, operator_id) SELECT $1, unnest($2::text[])',
          [client_id, ops],
        );
        await notifyDirectoryChange(sql);
      });
      const client: ClientRow = {
        client_id,
        secret_sealed,
        scopes,
        operator_ids: ops,
        status: 'active',
        secret_gen: 1,
        previous_secret_sealed: null,
        previous_secret_until_ms: null,
      };
      return client;
    },
    async getClient(clientId) {
      const rows = await db.query<RawClient>(`SELECT ${CLIENT_COLUMNS} FROM clients WHERE client_id = $1`, [
        clientId,
      ]);
      const row = rows[0];
      if (!row) return undefined;
      const client: ClientRow = {
        ...row,
        scopes: row.scopes.split(',') as Scope[],
        operator_ids: await operatorsOfClient(clientId),
      };
      return client;
    },
    async listClients() {
      const rows = await db.query<Omit<ClientSummary, 'scopes'> & { scopes: string }>(
        `SELECT c.client_id, c.scopes, c.status, c.created_ms,
           COALESCE(array_agg(o.operator_id ORDER BY o.operator_id)
             FILTER (WHERE o.operator_id IS NOT NULL), '{}') AS operator_ids
         FROM clients c LEFT JOIN client_operators o ON o.client_id = c.client_id
         GROUP BY c.client_id ORDER BY c.created_ms, c.client_id COLLATE "C"`,
      );
      return rows.map((r) => ({
        client_id: r.client_id,
        operator_ids: r.operator_ids,
        scopes: r.scopes.split(',') as Scope[],
        status: r.status,
        created_ms: r.created_ms,
      }));
    },
    async revokeClient(clientId) {
      return db.tx(async (sql) => {
        const at = now();
        const revoked = await sql.query(
          `UPDATE clients SET status = 'revoked', revoked_ms = $1, previous_secret_sealed = NULL,
             previous_secret_until_ms = NULL WHERE client_id = $2 AND status = 'active' RETURNING 1`,
          [at, clientId],
        );
        if (revoked.length === 0) {
          const known = await sql.query('SELECT 1 FROM clients WHERE client_id = $1', [clientId]);
          return known.length > 0 ? 'already_revoked' : 'unknown';
        }
        await sql.query(
          `UPDATE webhooks SET status = 'disabled', disabled_reason = 'client_revoked', updated_ms = $1
           WHERE client_id = $2 AND status = 'enabled'`,
          [at, clientId],
        );
        await notifyDirectoryChange(sql);
        return 'revoked';
      });
    },
    async rotateClientSecret(clientId, graceMs, secretSealed) {
      const until = graceMs > 0 ? now() + graceMs : null;
      return db.tx(async (sql): Promise<StoredClientRotation> => {
        const rows = await sql.query<{ secret_gen: number }>(
          `UPDATE clients SET previous_secret_sealed = CASE WHEN $3::bigint IS NULL THEN NULL ELSE secret_sealed END,
             previous_secret_until_ms = $3, secret_sealed = $2, secret_gen = secret_gen + 1
           WHERE client_id = $1 AND status = 'active' RETURNING secret_gen`,
          [clientId, secretSealed, until],
        );
        const row = rows[0];
        if (!row) {
          const known = await sql.query('SELECT 1 FROM clients WHERE client_id = $1', [clientId]);
          return { outcome: known.length > 0 ? 'revoked' : 'unknown' };
        }
        await notifyDirectoryChange(sql);
        return { outcome: 'rotated', secret_gen: row.secret_gen };
      });
    },
    async loadDirectory() {
      // Devices and clients are independent: read side by side, on two connections.
      const [devices, clients] = await Promise.all([
        db.query<DeviceEntry>(DIRECTORY_DEVICE_SQL),
        db.query<ClientEntry>(
          `SELECT c.client_id, c.secret_sealed, c.require_signature, c.status, c.secret_gen,
             c.previous_secret_until_ms, COALESCE(array_agg(o.operator_id ORDER BY o.operator_id)
               FILTER (WHERE o.operator_id IS NOT NULL), '{}') AS operator_ids
           FROM clients c LEFT JOIN client_operators o ON o.client_id = c.client_id
           GROUP BY c.client_id`,
        ),
      ]);
      return { devices, clients };
    },
    async loadDeviceEntry(deviceId) {
      const rows = await db.query<DeviceEntry>(`${DIRECTORY_DEVICE_SQL} WHERE d.device_id = $1`, [deviceId]);
      return rows[0];
    },
    async loadClientEntry(clientId) {
      const rows = await db.query<Omit<ClientEntry, 'operator_ids'>>(
        `SELECT ${CLIENT_ENTRY_COLUMNS} FROM clients WHERE client_id = $1`,
        [clientId],
      );
      const c = rows[0];
      if (!c) return undefined;
      return { ...c, operator_ids: await operatorsOfClient(clientId) };
    },
    async setRequireSignature(kind, id, required) {
      const text =
        kind === 'client'
          ? 'UPDATE clients SET require_signature = $1 WHERE client_id = $2 RETURNING 1'
          : 'UPDATE devices SET require_signature = $1 WHERE device_id = $2 RETURNING 1';
      return db.tx(async (sql) => {
        const changed = (await sql.query(text, [required, id])).length === 1;
        if (changed) await notifyDirectoryChange(sql);
        return changed;
      });
    },
    async listSitesFor(operatorIds, page, size) {
      if (operatorIds.length === 0) return { total: 0, page, size, items: [] };
      const ops = [...operatorIds];
      // Total and page in one statement: the count is a window over the whole filtered set.
      const rows = await db.query<SiteRow & { device_count: number; total: number }>(
        `SELECT s.site_id, s.operator_id, s.name, s.timezone,
           (SELECT COUNT(*) FROM devices d WHERE d.site_id = s.site_id) AS device_count,
           COUNT(*) OVER () AS total
         FROM sites s WHERE s.operator_id = ANY($1::text[])
         ORDER BY s.created_ms, s.site_id LIMIT $2 OFFSET $3`,
        [ops, size, pageOffset(page, size)],
      );
      const total = rows[0]?.total ?? (await countSites(db, ops));
      const items = rows.map(({ total: _total, ...site }) => site);
      return { total, page, size, items };
    },
    async getSetting(key) {
      const rows = await db.query<{ value: string }>('SELECT value FROM settings WHERE key = $1', [key]);
      return rows[0]?.value;
    },
    async setSetting(key, value) {
      await db.query(
        'INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value',
        [key, value],
      );
    },
  };
}

/** The total when the page asked for lies past the end (no row carries the window count). */
async function countSites(db: PgDatabase, operatorIds: string[]): Promise<number> {
  const rows = await db.query<{ n: number }>(
    'SELECT COUNT(*) AS n FROM sites WHERE operator_id = ANY($1::text[])',
    [operatorIds],
  );
  return rows[0]?.n ?? 0;
}
