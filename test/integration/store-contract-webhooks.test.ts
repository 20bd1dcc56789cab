import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createPostgresStore } from '../../platform/storage/backends.js';
import type { NewDelivery, Store, WebhookRow } from '../../platform/storage/store.js';
import { BACKENDS, openTestStore, type TestStore } from '../helpers/backends.js';
import { webhookRow } from '../helpers/webhook-receiver.js';

/**
 * The contract of WebhookRepository on every backend: endpoints per client, the durable queue's claims
 * (due only, enabled endpoints only, a limit per endpoint, leases) and attempt records. On PostgreSQL, two
 * stores on one database (two instances) never claim the same delivery.
 */
const T0 = Date.UTC(2026, 0, 1);

const hook = (id: string, clientId = 'cli_a', extra: Partial<WebhookRow> = {}) =>
  webhookRow(id, { client_id: clientId, created_ms: T0, updated_ms: T0, ...extra });

function deliveries(webhookId: string, n: number, createdMs = T0): NewDelivery[] {
  return Array.from({ length: n }, (_, i) => ({
    delivery_id: `msg_${webhookId}_${String(i).padStart(3, '0')}`,
    webhook_id: webhookId,
    type: 'webhook.test',
    payload: `{"n":${i}}`,
    created_ms: createdMs + i,
  }));
}

describe.each(BACKENDS)('webhook repository on %s', (backend) => {
  let ts: TestStore;
  let store: Store;
  beforeEach(async () => {
    ts = await openTestStore(backend, { now: () => T0 });
    store = ts.store;
  });
  afterEach(async () => {
    await ts.close();
  });

  it('keeps endpoints per client, at most the limit, and changes them', async () => {
    for (let i = 0; i < 3; i++) expect(await store.createWebhook(hook(`wh_${i}`), 3)).not.toBe('limit');
    expect(await store.createWebhook(hook('wh_3'), 3)).toBe('limit');
    expect(await store.createWebhook(hook('wh_b', 'cli_b'), 3)).not.toBe('limit');
    const page = await store.listWebhooks('cli_a', 1, 2);
    expect(page.total).toBe(3);
    expect(page.items.map((h) => h.webhook_id)).toEqual(['wh_0', 'wh_1']);
    expect((await store.getWebhook('wh_b'))?.events).toEqual(['*']);

    const changed = await store.updateWebhook(
      'wh_0',
      { events: ['device.online', 'device.offline'], status: 'disabled', disabled_reason: 'operator' },
      T0 + 5,
    );
    expect(changed).toMatchObject({
      events: ['device.online', 'device.offline'],
      status: 'disabled',
      updated_ms: T0 + 5,
    });
    expect((await store.enabledWebhooks()).map((h) => h.webhook_id).sort()).toEqual(['wh_1', 'wh_2', 'wh_b']);
    expect(await store.updateWebhook('wh_missing', { url: 'https://x.example' }, T0)).toBeUndefined();

    await store.enqueueDeliveries(deliveries('wh_1', 2));
    expect(await store.deleteWebhook('wh_1')).toBe(true);
    expect(await store.deleteWebhook('wh_1')).toBe(false);
    expect((await store.listDeliveries('wh_1', 1, 10)).total).toBe(0);
  });

  it('claims due deliveries of enabled endpoints, a few per endpoint, and leases them', async () => {
    await store.createWebhook(hook('wh_a'), 10);
    await store.createWebhook(hook('wh_b'), 10);
    await store.createWebhook(hook('wh_off', 'cli_a', { status: 'disabled' }), 10);
    await store.enqueueDeliveries([
      ...deliveries('wh_a', 5),
      ...deliveries('wh_b', 1),
      ...deliveries('wh_off', 2),
    ]);

    const first = await store.claimDueDeliveries(T0 + 10, 60_000, 10, 2, []);
    expect(first.map((d) => d.delivery_id).sort()).toEqual(['msg_wh_a_000', 'msg_wh_a_001', 'msg_wh_b_000']);
    // Leased: not claimed again until the lease runs out; endpoints skipped are left alone.
    expect(await store.claimDueDeliveries(T0 + 20, 60_000, 10, 2, ['wh_a'])).toEqual([]);
    const next = await store.claimDueDeliveries(T0 + 20, 60_000, 10, 1, []);
    expect(next.map((d) => d.delivery_id)).toEqual(['msg_wh_a_002']);
    const afterLease = await store.claimDueDeliveries(T0 + 70_011, 60_000, 10, 10, []);
    expect(afterLease.map((d) => d.delivery_id)).toContain('msg_wh_a_000');

    await store.recordAttempt(
      {
        delivery_id: 'msg_wh_b_000',
        webhook_id: 'wh_b',
        attempts: 1,
        last_status: 500,
        last_error: 'HTTP 500',
        state: 'pending',
        next_attempt_ms: T0 + 5_000,
        failing_since_ms: T0,
      },
      T0 + 10,
    );
    const [b] = (await store.listDeliveries('wh_b', 1, 10)).items;
    expect(b).toMatchObject({
      attempts: 1,
      last_status: 500,
      last_error: 'HTTP 500',
      state: 'pending',
      next_attempt_ms: T0 + 5_000,
    });
    expect((await store.getWebhook('wh_b'))?.failing_since_ms).toBe(T0);
    expect(await store.claimDueDeliveries(T0 + 4_999, 60_000, 10, 10, ['wh_a'])).toEqual([]);
    expect(
      (await store.claimDueDeliveries(T0 + 5_000, 60_000, 10, 10, ['wh_a'])).map((d) => d.delivery_id),
    ).toEqual(['msg_wh_b_000']);

    await store.recordAttempt(
      {
        delivery_id: 'msg_wh_b_000',
        webhook_id: 'wh_b',
        attempts: 2,
        last_status: 410,
        last_error: 'HTTP 410',
        state: 'failed',
        next_attempt_ms: null,
        failing_since_ms: T0,
        disable: 'gone',
      },
      T0 + 6_000,
    );
    expect(await store.getWebhook('wh_b')).toMatchObject({ status: 'disabled', disabled_reason: 'gone' });
    const again = await store.redeliver('wh_b', 'msg_wh_b_000', T0 + 7_000);
    expect(again).toMatchObject({ state: 'pending', next_attempt_ms: T0 + 7_000, attempts: 2 });
    expect(await store.redeliver('wh_a', 'msg_wh_b_000', T0)).toBeUndefined();
    // A disabled endpoint's deliveries wait; enabling it clears the failure record.
    expect(await store.claimDueDeliveries(T0 + 8_000, 60_000, 10, 10, ['wh_a'])).toEqual([]);
    expect(await store.updateWebhook('wh_b', { status: 'enabled' }, T0 + 9_000)).toMatchObject({
      status: 'enabled',
      disabled_reason: null,
      failing_since_ms: null,
    });
    expect((await store.claimDueDeliveries(T0 + 9_000, 60_000, 10, 10, ['wh_a'])).length).toBe(1);
  });

  it('lists deliveries newest first, paged', async () => {
    await store.createWebhook(hook('wh_a'), 10);
    await store.enqueueDeliveries(deliveries('wh_a', 5));
    const page = await store.listDeliveries('wh_a', 2, 2);
    expect(page.total).toBe(5);
    expect(page.items.map((d) => d.delivery_id)).toEqual(['msg_wh_a_002', 'msg_wh_a_001']);
    expect(page.items[0]).toMatchObject({
      attempts: 0,
      state: 'pending',
      last_status: null,
      payload: '{"n":2}',
    });
  });
});

describe.each(BACKENDS.filter((b) => b === 'postgres'))('webhook queue shared by two instances on %s', () => {
  it('never gives one delivery to two instances claiming at once', async () => {
    const ts = await openTestStore('postgres', { now: () => T0 });
    const second = await createPostgresStore(ts.databaseUrl!, () => T0);
    try {
      await ts.store.createWebhook(hook('wh_a'), 10);
      await ts.store.createWebhook(hook('wh_b'), 10);
      await ts.store.enqueueDeliveries([...deliveries('wh_a', 200), ...deliveries('wh_b', 200)]);
      const claimed: string[] = [];
      for (let round = 0; round < 20; round++) {
        const [x, y] = await Promise.all([
          ts.store.claimDueDeliveries(T0 + 1_000, 60_000, 40, 20, []),
          second.claimDueDeliveries(T0 + 1_000, 60_000, 40, 20, []),
        ]);
        claimed.push(...x.map((d) => d.delivery_id), ...y.map((d) => d.delivery_id));
      }
      expect(claimed).toHaveLength(400);
      expect(new Set(claimed).size).toBe(400);
    } finally {
      await second.close();
      await ts.close();
    }
  });
});
