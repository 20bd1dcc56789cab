import type * as z from 'zod';
import {
  toTimestamp,
  WEBHOOKS_PER_CLIENT,
  type Webhook,
  type WebhookCreate,
  type WebhookDelivery,
  type WebhookUpdate,
} from '../../shared/index.js';
import { errors } from '../domain/api-error.js';
import { newId } from '../domain/ids.js';
import type { PlatformKeys } from '../storage/platform-keys.js';
import type { DeliveryRow, Page, Store, WebhookChanges, WebhookRow } from '../storage/store.js';
import { literalHostRefusal } from '../webhooks/address-policy.js';
import { storedErrorCategory } from '../webhooks/delivery-errors.js';
import { newWebhookSecret } from '../webhooks/signing.js';
import type { OperatorPrincipal } from './principal.js';
import type { WebhookEvents } from './webhook-events.js';

/** Both secrets sign for this long after a rotation (DESIGN.md §14). */
export const ROTATION_OVERLAP_MS = 24 * 3600_000;

export interface WebhookServiceDeps {
  store: Store;
  keys: PlatformKeys;
  now: () => number;
  events: WebhookEvents;
  /** `--webhooks-allow-private`: http and non-public addresses are accepted (the sandbox). */
  allowPrivate: boolean;
}

/**
 * Webhook endpoints of an API client (DESIGN.md §14): managed only by the client that created them; another
 * client's endpoint answers like a missing one.
 */
export function createWebhookService(deps: WebhookServiceDeps) {
  const { store, keys, now, events } = deps;

  async function owned(actor: OperatorPrincipal, webhookId: string): Promise<WebhookRow> {
    const hook = await store.getWebhook(webhookId);
    if (!hook || hook.client_id !== actor.clientId) throw errors.notFound('Webhook');
    return hook;
  }

  function checkUrl(url: string): void {
    const parsed = new URL(url);
    if (deps.allowPrivate) return;
    if (parsed.protocol !== 'https:')
      throw errors.validation({ field: 'url', message: 'must be an https URL', value: url });
    const refusal = literalHostRefusal(parsed);
    if (refusal) throw errors.validation({ field: 'url', message: refusal, value: url });
  }

  /** The stored events list: `["*"]` or the types in the order given, without repeats. */
  const eventList = (list: readonly string[]) => [...new Set(list)];

  return {
    async create(actor: OperatorPrincipal, body: z.infer<typeof WebhookCreate>) {
      checkUrl(body.url);
      const at = now();
      const secret = newWebhookSecret();
      const row: WebhookRow = {
        webhook_id: newId('wh'),
        client_id: actor.clientId,
        url: body.url,
        events: eventList(body.events),
        description: body.description ?? null,
        status: 'enabled',
        disabled_reason: null,
        secret_sealed: keys.sealSecret(secret),
        previous_secret_sealed: null,
        previous_secret_until_ms: null,
        failing_since_ms: null,
        created_ms: at,
        updated_ms: at,
      };
      const created = await store.createWebhook(row, WEBHOOKS_PER_CLIENT);
      if (created === 'limit')
        throw errors.conflict(`A client may have at most ${WEBHOOKS_PER_CLIENT} webhook endpoints`);
      await events.reload();
      return { ...webhookView(created), secret };
    },
    async list(actor: OperatorPrincipal, page: number, size: number): Promise<Page<Webhook>> {
      const found = await store.listWebhooks(actor.clientId, page, size);
      return { ...found, items: found.items.map(webhookView) };
    },
    async get(actor: OperatorPrincipal, webhookId: string): Promise<Webhook> {
      return webhookView(await owned(actor, webhookId));
    },
    async update(actor: OperatorPrincipal, webhookId: string, body: WebhookUpdate): Promise<Webhook> {
      await owned(actor, webhookId);
      if (body.url !== undefined) checkUrl(body.url);
      const changes: WebhookChanges = {};
      if (body.url !== undefined) changes.url = body.url;
      if (body.events !== undefined) changes.events = eventList(body.events);
      if (body.description !== undefined) changes.description = body.description;
      if (body.status !== undefined) changes.status = body.status;
      // Enabling clears the reason and the failure record (webhookChangeColumns); disabling names who did it.
      if (body.status === 'disabled') changes.disabled_reason = 'operator';
      const updated = await store.updateWebhook(webhookId, changes, now());
      if (!updated) throw errors.notFound('Webhook');
      await events.reload();
      return webhookView(updated);
    },
    async remove(actor: OperatorPrincipal, webhookId: string): Promise<void> {
      await owned(actor, webhookId);
      await store.deleteWebhook(webhookId);
      await events.reload();
    },
    /** A new secret; the previous one keeps signing beside it for `ROTATION_OVERLAP_MS`. */
    async rotateSecret(actor: OperatorPrincipal, webhookId: string) {
      const hook = await owned(actor, webhookId);
      const secret = newWebhookSecret();
      const updated = await store.updateWebhook(
        webhookId,
        {
          secret_sealed: keys.sealSecret(secret),
          previous_secret_sealed: hook.secret_sealed,
          previous_secret_until_ms: now() + ROTATION_OVERLAP_MS,
        },
        now(),
      );
      if (!updated) throw errors.notFound('Webhook');
      return { ...webhookView(updated), secret };
    },
    async sendTest(actor: OperatorPrincipal, webhookId: string) {
      const hook = await owned(actor, webhookId);
      if (hook.status !== 'enabled') throw errors.conflict('The webhook endpoint is disabled');
      return { delivery_id: await events.test(hook) };
    },
    async deliveries(
      actor: OperatorPrincipal,
      webhookId: string,
      page: number,
      size: number,
    ): Promise<Page<WebhookDelivery>> {
      await owned(actor, webhookId);
      const found = await store.listDeliveries(webhookId, page, size);
      return { ...found, items: found.items.map(deliveryView) };
    },
    async redeliver(actor: OperatorPrincipal, webhookId: string, deliveryId: string) {
      await owned(actor, webhookId);
      const row = await store.redeliver(webhookId, deliveryId, now());
      if (!row) throw errors.notFound('Delivery');
      events.nudge();
      return deliveryView(row);
    },
  };
}

export function webhookView(row: WebhookRow): Webhook {
  return {
    webhook_id: row.webhook_id,
    url: row.url,
    events: row.events,
    description: row.description,
    status: row.status,
    disabled_reason: row.disabled_reason,
    created_at: toTimestamp(row.created_ms),
    updated_at: toTimestamp(row.updated_ms),
  };
}

export function deliveryView(row: DeliveryRow): WebhookDelivery {
  return {
    delivery_id: row.delivery_id,
    type: row.type,
    created_at: toTimestamp(row.created_ms),
    attempts: row.attempts,
    last_status: row.last_status,
    last_error: storedErrorCategory(row.last_error),
    next_attempt_at:
      row.state === 'pending' && row.next_attempt_ms !== null ? toTimestamp(row.next_attempt_ms) : null,
    state: row.state,
  };
}
export type WebhookService = ReturnType<typeof createWebhookService>;
