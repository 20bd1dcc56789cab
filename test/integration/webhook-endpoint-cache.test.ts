import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createPrincipalDirectory } from '../../platform/services/principal-directory.js';
import { createWebhookEvents } from '../../platform/services/webhook-events.js';
import { openTestStore, TEST_BACKEND, type TestStore } from '../helpers/backends.js';
import { webhookRow } from '../helpers/webhook-receiver.js';

/**
 * The endpoints each instance keeps in memory to match events against: a change made here is seen by the next
 * event, even when a periodic read that began before the change is still running.
 */
let ts: TestStore;
beforeEach(async () => {
  ts = await openTestStore(TEST_BACKEND);
});
afterEach(async () => {
  await ts.close();
});

const hook = (id: string) => webhookRow(id, { events: ['device.online'] });

describe('webhook endpoint cache', () => {
  it('reads again after a read that began before the change', async () => {
    const directory = await createPrincipalDirectory(ts.store);
    const events = createWebhookEvents({
      store: ts.store,
      directory,
      now: Date.now,
      log: pino({ level: 'silent' }),
      onQueued: () => undefined,
    });
    try {
      await events.reload();
      expect(events.wants('device.online')).toBe(false);
      const before = events.reload(); // a read in flight (the periodic one), from before the change
      const created = ts.store.createWebhook(hook('wh_1'), 10);
      await created;
      await Promise.all([before, events.reload()]);
      expect(events.wants('device.online')).toBe(true);

      const stale = events.reload();
      await ts.store.updateWebhook('wh_1', { status: 'disabled' }, 1);
      await Promise.all([stale, events.reload()]);
      expect(events.wants('device.online')).toBe(false);
    } finally {
      await events.close();
      directory.close();
    }
  });
});
