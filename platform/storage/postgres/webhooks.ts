import { pageOffset } from '../page.js';
import type { DeliveryRow, WebhookRepository, WebhookRow } from '../store.js';
import { webhookChangeColumns } from '../webhook-rows.js';
import type { PgDatabase } from './database.js';

const DELIVERY_COLUMNS =
  'delivery_id, webhook_id, type, payload, created_ms, attempts, last_status, last_error, state, next_attempt_ms';
const WEBHOOK_COLUMNS = `webhook_id, client_id, url, events, description, status, disabled_reason, secret_sealed,
  previous_secret_sealed, previous_secret_until_ms, failing_since_ms, created_ms, updated_ms`;

/**
 * Webhook endpoints and deliveries on PostgreSQL. Several instances share the queue: a claim leases rows under
 * `FOR UPDATE SKIP LOCKED`, so two instances never take the same delivery while its lease runs.
 */
export function createPgWebhooks(db: PgDatabase): WebhookRepository {
  const getWebhook = async (webhookId: string) =>
    (
      await db.query<WebhookRow>(`SELECT ${WEBHOOK_COLUMNS} FROM webhooks WHERE webhook_id = $1`, [webhookId])
    )[0];

  return {
    async createWebhook(row, maxPerClient) {
      return db.tx(async (sql) => {
        // One client's creations are serialized, so two at once cannot both pass the limit.
        await sql.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`webhooks:${row.client_id}`]);
        const [count] = await sql.query<{ n: number }>(
          'SELECT COUNT(*) AS n FROM webhooks WHERE client_id = $1',
          [row.client_id],
        );
        if ((count?.n ?? 0) >= maxPerClient) return 'limit' as const;
        await sql.query(
          `INSERT INTO webhooks (${WEBHOOK_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
          [
            row.webhook_id,
            row.client_id,
            row.url,
            JSON.stringify(row.events),
            row.description,
            row.status,
            row.disabled_reason,
            row.secret_sealed,
            row.previous_secret_sealed,
            row.previous_secret_until_ms,
            row.failing_since_ms,
            row.created_ms,
            row.updated_ms,
          ],
        );
        return row;
      });
    },
    getWebhook,
    async listWebhooks(clientId, page, size) {
      const [count] = await db.query<{ n: number }>(
        'SELECT COUNT(*) AS n FROM webhooks WHERE client_id = $1',
        [clientId],
      );
      const items = await db.query<WebhookRow>(
        `SELECT ${WEBHOOK_COLUMNS} FROM webhooks WHERE client_id = $1 ORDER BY created_ms, webhook_id
         LIMIT $2 OFFSET $3`,
        [clientId, size, pageOffset(page, size)],
      );
      return { total: count?.n ?? 0, page, size, items };
    },
    async enabledWebhooks() {
      return db.query<WebhookRow>(`SELECT ${WEBHOOK_COLUMNS} FROM webhooks WHERE status = 'enabled'`);
    },
    async updateWebhook(webhookId, changes, nowMs) {
      const { columns, values } = webhookChangeColumns(changes);
      if (columns.length === 0) return getWebhook(webhookId);
      const sets = columns.map((c, i) => `${c} = $${i + 1}`).join(', ');
      const rows = await db.query<WebhookRow>(
        `UPDATE webhooks SET ${sets}, updated_ms = $${columns.length + 1} WHERE webhook_id = $${columns.length + 2}
         RETURNING ${WEBHOOK_COLUMNS}`,
        [...values, nowMs, webhookId],
      );
      return rows[0];
    },
    async deleteWebhook(webhookId) {
      return db.tx(async (sql) => {
        await sql.query('DELETE FROM webhook_deliveries WHERE webhook_id = $1', [webhookId]);
        const rows = await sql.query('DELETE FROM webhooks WHERE webhook_id = $1 RETURNING 1', [webhookId]);
        return rows.length > 0;
      });
    },
    async enqueueDeliveries(rows) {
      if (rows.length === 0) return;
      await db.query(
        `INSERT INTO webhook_deliveries (delivery_id, webhook_id, type, payload, created_ms, next_attempt_ms)
         SELECT delivery_id, webhook_id, type, payload, created_ms, created_ms
         FROM jsonb_to_recordset($1::jsonb) AS r(delivery_id text, webhook_id text, type text, payload text,
           created_ms bigint)`,
        [JSON.stringify(rows)],
      );
    },
    async claimDueDeliveries(nowMs, leaseMs, limit, perWebhook, skipWebhooks) {
      // The first few due of each enabled endpoint, each from the head of its own index range (the cost follows
      // the number of endpoints, not the backlog behind a slow one), locked so no other instance takes them.
      return db.query<DeliveryRow>(
        `WITH picked AS (
           SELECT x.delivery_id FROM webhooks w CROSS JOIN LATERAL (
             SELECT d.delivery_id, d.next_attempt_ms FROM webhook_deliveries d
             WHERE d.webhook_id = w.webhook_id AND d.state = 'pending' AND d.next_attempt_ms <= $1
               AND (d.lease_until_ms IS NULL OR d.lease_until_ms <= $1)
             ORDER BY d.next_attempt_ms LIMIT $4 FOR UPDATE SKIP LOCKED
           ) x
           WHERE w.status = 'enabled' AND NOT (w.webhook_id = ANY($5::text[]))
           ORDER BY x.next_attempt_ms, x.delivery_id LIMIT $3
         )
         UPDATE webhook_deliveries d SET lease_until_ms = $1::bigint + $2::bigint FROM picked
         WHERE d.delivery_id = picked.delivery_id AND d.state = 'pending'
           AND (d.lease_until_ms IS NULL OR d.lease_until_ms <= $1)
         RETURNING ${DELIVERY_COLUMNS.split(', ')
           .map((c) => `d.${c}`)
           .join(', ')}`,
        [nowMs, leaseMs, limit, perWebhook, skipWebhooks],
      );
    },
    async recordAttempt(o, nowMs) {
      await db.tx(async (sql) => {
        await sql.query(
          `UPDATE webhook_deliveries SET attempts = $2, last_status = $3, last_error = $4, state = $5,
             next_attempt_ms = $6, lease_until_ms = NULL WHERE delivery_id = $1`,
          [o.delivery_id, o.attempts, o.last_status, o.last_error, o.state, o.next_attempt_ms],
        );
        await sql.query(
          'UPDATE webhooks SET failing_since_ms = $2 WHERE webhook_id = $1 AND failing_since_ms IS DISTINCT FROM $2',
          [o.webhook_id, o.failing_since_ms],
        );
        if (o.disable) {
          await sql.query(
            `UPDATE webhooks SET status = 'disabled', disabled_reason = $2, updated_ms = $3
             WHERE webhook_id = $1 AND status = 'enabled'`,
            [o.webhook_id, o.disable, nowMs],
          );
        }
      });
    },
    async listDeliveries(webhookId, page, size) {
      const [count] = await db.query<{ n: number }>(
        'SELECT COUNT(*) AS n FROM webhook_deliveries WHERE webhook_id = $1',
        [webhookId],
      );
      const items = await db.query<DeliveryRow>(
        `SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries WHERE webhook_id = $1
         ORDER BY created_ms DESC, delivery_id DESC LIMIT $2 OFFSET $3`,
        [webhookId, size, pageOffset(page, size)],
      );
      return { total: count?.n ?? 0, page, size, items };
    },
    async redeliver(webhookId, deliveryId, nowMs) {
      const rows = await db.query<DeliveryRow>(
        `UPDATE webhook_deliveries SET state = 'pending', next_attempt_ms = $3, lease_until_ms = NULL
         WHERE webhook_id = $1 AND delivery_id = $2 RETURNING ${DELIVERY_COLUMNS}`,
        [webhookId, deliveryId, nowMs],
      );
      return rows[0];
    },
  };
}
