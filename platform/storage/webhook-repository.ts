import type { Page } from './page.js';

export interface WebhookRow {
  webhook_id: string;
  client_id: string;
  url: string;
  events: string[];
  description: string | null;
  status: 'enabled' | 'disabled';
  disabled_reason: string | null;
  secret_sealed: string;
  /** The secret before the last rotation, which still signs until `previous_secret_until_ms`. */
  previous_secret_sealed: string | null;
  previous_secret_until_ms: number | null;
  /** First failed attempt since the last success (auto-disable after five days of nothing else). */
  failing_since_ms: number | null;
  created_ms: number;
  updated_ms: number;
}

export type WebhookChanges = Partial<
  Pick<
    WebhookRow,
    | 'url'
    | 'events'
    | 'description'
    | 'status'
    | 'disabled_reason'
    | 'secret_sealed'
    | 'previous_secret_sealed'
    | 'previous_secret_until_ms'
  >
>;

export interface NewDelivery {
  delivery_id: string;
  webhook_id: string;
  type: string;
  /** The exact body sent (signed as is). */
  payload: string;
  created_ms: number;
}

export interface DeliveryRow extends NewDelivery {
  attempts: number;
  last_status: number | null;
  last_error: string | null;
  next_attempt_ms: number | null;
  state: 'pending' | 'succeeded' | 'failed';
}

export interface AttemptRecord {
  delivery_id: string;
  webhook_id: string;
  attempts: number;
  last_status: number | null;
  last_error: string | null;
  state: DeliveryRow['state'];
  next_attempt_ms: number | null;
  /** The endpoint's failing-since mark after this attempt. */
  failing_since_ms: number | null;
  /** Disable the endpoint, with this reason. */
  disable?: string;
}

/** Webhook endpoints and their durable delivery queue (DESIGN.md §14). */
export interface WebhookRepository {
  /** Refused with `limit` when the client already has `maxPerClient` endpoints. */
  createWebhook(row: WebhookRow, maxPerClient: number): Promise<WebhookRow | 'limit'>;
  getWebhook(webhookId: string): Promise<WebhookRow | undefined>;
  listWebhooks(clientId: string, page: number, size: number): Promise<Page<WebhookRow>>;
  /** Every enabled endpoint, for matching events to them. */
  enabledWebhooks(): Promise<WebhookRow[]>;
  /** Re-enabling clears the failing mark. */
  updateWebhook(webhookId: string, changes: WebhookChanges, nowMs: number): Promise<WebhookRow | undefined>;
  /** Removes the endpoint and its deliveries. */
  deleteWebhook(webhookId: string): Promise<boolean>;
  enqueueDeliveries(rows: readonly NewDelivery[]): Promise<void>;
  /**
   * Leases up to `limit` pending deliveries due by `nowMs` of enabled endpoints, at most `perWebhook` each and
   * none of `skipWebhooks` (endpoints whose attempts are still in flight here), until `nowMs + leaseMs`: an
   * instance that dies mid-attempt leaves them to be claimed again once the lease runs out.
   */
  claimDueDeliveries(
    nowMs: number,
    leaseMs: number,
    limit: number,
    perWebhook: number,
    skipWebhooks: readonly string[],
  ): Promise<DeliveryRow[]>;
  /** Records an attempt's outcome and releases the lease; updates the endpoint's failing mark or disables it. */
  recordAttempt(outcome: AttemptRecord, nowMs: number): Promise<void>;
  listDeliveries(webhookId: string, page: number, size: number): Promise<Page<DeliveryRow>>;
  /** Makes a delivery pending again, due now, keeping its id; undefined if the endpoint has no such delivery. */
  redeliver(webhookId: string, deliveryId: string, nowMs: number): Promise<DeliveryRow | undefined>;
}
