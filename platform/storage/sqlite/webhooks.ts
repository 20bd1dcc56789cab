import type Database from 'better-sqlite3';
import { pageOffset } from '../page.js';
import type { DeliveryRow, WebhookChanges, WebhookRepository, WebhookRow } from '../store.js';
import { webhookChangeColumns } from '../webhook-rows.js';

type RawWebhook = Omit<WebhookRow, 'events'> & { events: string };
const toWebhook = (r: RawWebhook): WebhookRow => ({ ...r, events: JSON.parse(r.events) as string[] });

const DELIVERY_COLUMNS =
  'delivery_id, webhook_id, type, payload, created_ms, attempts, last_status, last_error, state, next_attempt_ms';

/** Webhook endpoints and deliveries on SQLite: one process serves the file, so a claim is a plain update. */
export function createSqliteWebhooks(db: Database.Database): WebhookRepository {
  const stmt = {
    countForClient: db.prepare('SELECT COUNT(*) AS n FROM webhooks WHERE client_id = ?'),
    insert: db.prepare(
      `INSERT INTO webhooks (webhook_id, client_id, url, events, description, status, disabled_reason,
         secret_sealed, previous_secret_sealed, previous_secret_until_ms, failing_since_ms, created_ms, updated_ms)
       VALUES (@webhook_id, @client_id, @url, @events, @description, @status, @disabled_reason, @secret_sealed,
         @previous_secret_sealed, @previous_secret_until_ms, @failing_since_ms, @created_ms, @updated_ms)`,
    ),
    get: db.prepare('SELECT * FROM webhooks WHERE webhook_id = ?'),
    list: db.prepare(
      'SELECT * FROM webhooks WHERE client_id = ? ORDER BY created_ms, webhook_id LIMIT ? OFFSET ?',
    ),
    enabled: db.prepare(`SELECT * FROM webhooks WHERE status = 'enabled'`),
    delete: db.prepare('DELETE FROM webhooks WHERE webhook_id = ?'),
    deleteDeliveries: db.prepare('DELETE FROM webhook_deliveries WHERE webhook_id = ?'),
    enqueue: db.prepare(
      `INSERT INTO webhook_deliveries (delivery_id, webhook_id, type, payload, created_ms, next_attempt_ms)
       VALUES (?, ?, ?, ?, ?, ?)`,
    ),
    // The first few due of each enabled endpoint, each read from the head of its own index range: the cost
    // follows the number of endpoints, not the backlog behind a slow one.
    claimable: db.prepare(
      `SELECT ${DELIVERY_COLUMNS.split(', ')
        .map((c) => `d.${c}`)
        .join(', ')}
       FROM webhooks w JOIN webhook_deliveries d ON d.delivery_id IN (
         SELECT x.delivery_id FROM webhook_deliveries x
         WHERE x.webhook_id = w.webhook_id AND x.state = 'pending' AND x.next_attempt_ms <= @now
           AND (x.lease_until_ms IS NULL OR x.lease_until_ms <= @now)
         ORDER BY x.next_attempt_ms LIMIT @perWebhook)
       WHERE w.status = 'enabled' AND w.webhook_id NOT IN (SELECT value FROM json_each(@skip))
       ORDER BY d.next_attempt_ms, d.delivery_id LIMIT @limit`,
    ),
    lease: db.prepare('UPDATE webhook_deliveries SET lease_until_ms = ? WHERE delivery_id = ?'),
    recordAttempt: db.prepare(
      `UPDATE webhook_deliveries SET attempts = @attempts, last_status = @last_status, last_error = @last_error,
         state = @state, next_attempt_ms = @next_attempt_ms, lease_until_ms = NULL WHERE delivery_id = @delivery_id`,
    ),
    markFailing: db.prepare(
      'UPDATE webhooks SET failing_since_ms = ? WHERE webhook_id = ? AND failing_since_ms IS NOT ?',
    ),
    disable: db.prepare(
      `UPDATE webhooks SET status = 'disabled', disabled_reason = ?, updated_ms = ?
       WHERE webhook_id = ? AND status = 'enabled'`,
    ),
    countDeliveries: db.prepare('SELECT COUNT(*) AS n FROM webhook_deliveries WHERE webhook_id = ?'),
    listDeliveries: db.prepare(
      `SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries WHERE webhook_id = ?
       ORDER BY created_ms DESC, delivery_id DESC LIMIT ? OFFSET ?`,
    ),
    redeliver: db.prepare(
      `UPDATE webhook_deliveries SET state = 'pending', next_attempt_ms = ?, lease_until_ms = NULL
       WHERE webhook_id = ? AND delivery_id = ?`,
    ),
    getDelivery: db.prepare(`SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries WHERE delivery_id = ?`),
  };
  const rowOf = (id: string) => {
    const r = stmt.get.get(id) as RawWebhook | undefined;
    return r ? toWebhook(r) : undefined;
  };

  return {
    async createWebhook(row, maxPerClient) {
      return db
        .transaction((): WebhookRow | 'limit' => {
          const { n } = stmt.countForClient.get(row.client_id) as { n: number };
          if (n >= maxPerClient) return 'limit';
          stmt.insert.run({ ...row, events: JSON.stringify(row.events) });
          return row;
        })
        .immediate();
    },
    async getWebhook(webhookId) {
      return rowOf(webhookId);
    },
    async listWebhooks(clientId, page, size) {
      const { n } = stmt.countForClient.get(clientId) as { n: number };
      const items = (stmt.list.all(clientId, size, pageOffset(page, size)) as RawWebhook[]).map(toWebhook);
      return { total: n, page, size, items };
    },
    async enabledWebhooks() {
      return (stmt.enabled.all() as RawWebhook[]).map(toWebhook);
    },
    async updateWebhook(webhookId, changes, nowMs) {
      return db
        .transaction(() => {
          const { columns, values } = webhookChangeColumns(changes as WebhookChanges);
          if (columns.length === 0) return rowOf(webhookId);
          const sets = columns.map((c) => `${c} = ?`).join(', ');
          const result = db
            .prepare(`UPDATE webhooks SET ${sets}, updated_ms = ? WHERE webhook_id = ?`)
            .run(...values, nowMs, webhookId);
          return result.changes > 0 ? rowOf(webhookId) : undefined;
        })
        .immediate();
    },
    async deleteWebhook(webhookId) {
      return db
        .transaction(() => {
          stmt.deleteDeliveries.run(webhookId);
          return stmt.delete.run(webhookId).changes > 0;
        })
        .immediate();
    },
    async enqueueDeliveries(rows) {
      if (rows.length === 0) return;
      db.transaction(() => {
        for (const r of rows)
          stmt.enqueue.run(r.delivery_id, r.webhook_id, r.type, r.payload, r.created_ms, r.created_ms);
      }).immediate();
    },
    async claimDueDeliveries(nowMs, leaseMs, limit, perWebhook, skipWebhooks) {
      const params = { now: nowMs, perWebhook, limit, skip: JSON.stringify(skipWebhooks) };
      // Looked for outside a write transaction first: the dispatcher asks every second, mostly for nothing,
      // and must not take the write lock from ingest for that.
      if ((stmt.claimable.all(params) as DeliveryRow[]).length === 0) return [];
      return db
        .transaction(() => {
          const rows = stmt.claimable.all(params) as DeliveryRow[];
          for (const r of rows) stmt.lease.run(nowMs + leaseMs, r.delivery_id);
          return rows;
        })
        .immediate();
    },
    async recordAttempt(o, nowMs) {
      db.transaction(() => {
        stmt.recordAttempt.run({
          delivery_id: o.delivery_id,
          attempts: o.attempts,
          last_status: o.last_status,
          last_error: o.last_error,
          state: o.state,
          next_attempt_ms: o.next_attempt_ms,
        });
        stmt.markFailing.run(o.failing_since_ms, o.webhook_id, o.failing_since_ms);
        if (o.disable) stmt.disable.run(o.disable, nowMs, o.webhook_id);
      }).immediate();
    },
    async listDeliveries(webhookId, page, size) {
      const { n } = stmt.countDeliveries.get(webhookId) as { n: number };
      const items = stmt.listDeliveries.all(webhookId, size, pageOffset(page, size)) as DeliveryRow[];
      return { total: n, page, size, items };
    },
    async redeliver(webhookId, deliveryId, nowMs) {
      return db
        .transaction(() => {
          if (stmt.redeliver.run(nowMs, webhookId, deliveryId).changes === 0) return undefined;
          return stmt.getDelivery.get(deliveryId) as DeliveryRow;
        })
        .immediate();
    },
  };
}
