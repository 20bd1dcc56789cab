import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { RETRY_DELAYS_MS } from '../../platform/domain/webhook-delivery.js';
import { createTenant, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';

/**
 * Delivery of webhooks (DESIGN.md §14) under a fake clock: the retry schedule, Retry-After, a receiver that is
 * down for a while, 410, five days of failures, secret rotation and redelivery. Only `Date` is faked, for the
 * platform and the receiver's verifier alike (both read it); timers and I/O are real.
 */
let tp: TestPlatform;
let receiver: WebhookReceiver;
let tenant: Awaited<ReturnType<typeof createTenant>>;

beforeAll(async () => {
  vi.useFakeTimers({ toFake: ['Date'], shouldAdvanceTime: true });
  receiver = await startWebhookReceiver();
  // The dispatcher's own timer would also find due deliveries; the tests drive them with `deliverDue`.
  tp = await startTestPlatform({
    tokenTtlSeconds: 60 * 86_400,
    webhooks: { allowPrivate: true, ca: receiver.ca, pollMs: 3_600_000 },
  });
  tenant = await createTenant(tp, 'Delivery Operator');
});
afterAll(async () => {
  await tp.stop();
  await receiver.close();
  vi.useRealTimers();
});

const advance = (ms: number) => vi.setSystemTime(Date.now() + ms);

async function endpoint(): Promise<{ webhook_id: string; secret: string }> {
  const res = await tp.http.post('/v1/operator/webhooks', {
    token: tenant.token,
    json: { url: receiver.url, events: ['webhook.test'] },
  });
  expect(res.status, res.text).toBe(200);
  receiver.trust(res.body.data.secret);
  return res.body.data;
}

async function sendTest(webhookId: string): Promise<string> {
  const res = await tp.http.post(`/v1/operator/webhooks/${webhookId}/test`, { token: tenant.token });
  expect(res.status, res.text).toBe(200);
  return res.body.data.delivery_id;
}

async function delivery(webhookId: string, deliveryId: string) {
  const res = await tp.http.get(`/v1/operator/webhooks/${webhookId}/deliveries?size=100`, {
    token: tenant.token,
  });
  return res.body.data.items.find((d: { delivery_id: string }) => d.delivery_id === deliveryId);
}

async function webhook(webhookId: string) {
  return (await tp.http.get(`/v1/operator/webhooks/${webhookId}`, { token: tenant.token })).body.data;
}

const attemptsOf = (id: string) => receiver.received.filter((r) => r.id === id);

describe('retries', () => {
  it('follows the schedule, honours Retry-After within it, and keeps the webhook-id', async () => {
    const hook = await endpoint();
    let n = 0;
    receiver.answer(() => {
      n++;
      if (n < 3) return { status: 500 };
      if (n === 3) return { status: 503, headers: { 'retry-after': '3600' } };
      return { status: 200 };
    });
    const id = await sendTest(hook.webhook_id);
    await tp.platform.webhooks.deliverDue();
    const first = attemptsOf(id)[0]!;
    expect(first.status).toBe(500);
    let d = await delivery(hook.webhook_id, id);
    expect(d).toMatchObject({ attempts: 1, last_status: 500, last_error: 'http_status', state: 'pending' });
    const t1 = Date.parse(d.next_attempt_at) - RETRY_DELAYS_MS[0]!;

    advance(RETRY_DELAYS_MS[0]! - 1_500); // not yet due
    await tp.platform.webhooks.deliverDue();
    expect(attemptsOf(id)).toHaveLength(1);
    advance(1_500);
    await tp.platform.webhooks.deliverDue();
    expect(attemptsOf(id)).toHaveLength(2);
    d = await delivery(hook.webhook_id, id);
    expect(Date.parse(d.next_attempt_at) - Date.now()).toBeGreaterThan(RETRY_DELAYS_MS[1]! - 2_000);

    advance(RETRY_DELAYS_MS[1]!);
    await tp.platform.webhooks.deliverDue();
    expect(attemptsOf(id).map((a) => a.status)).toEqual([500, 500, 503]);
    d = await delivery(hook.webhook_id, id);
    // Retry-After (1 h) is longer than the schedule's 30 min: it wins.
    const wait = Date.parse(d.next_attempt_at) - Date.now();
    expect(wait).toBeGreaterThan(3_500_000);
    expect(wait).toBeLessThanOrEqual(3_600_000);
    advance(RETRY_DELAYS_MS[2]!);
    await tp.platform.webhooks.deliverDue();
    expect(attemptsOf(id)).toHaveLength(3);
    advance(3_600_000 - RETRY_DELAYS_MS[2]!);
    await tp.platform.webhooks.deliverDue();
    const all = attemptsOf(id);
    expect(all.map((a) => a.status)).toEqual([500, 500, 503, 200]);
    // Same id, a fresh timestamp and a valid signature on every attempt.
    expect(all.every((a) => a.verifiedWith.length === 1)).toBe(true);
    expect(all[3]!.timestamp - Math.floor(t1 / 1000)).toBeGreaterThanOrEqual(
      (RETRY_DELAYS_MS[0]! + RETRY_DELAYS_MS[1]! + 3_600_000) / 1000 - 2,
    );
    d = await delivery(hook.webhook_id, id);
    expect(d).toMatchObject({ attempts: 4, last_status: 200, state: 'succeeded', next_attempt_at: null });
    expect((await webhook(hook.webhook_id)).status).toBe('enabled');
  });

  it('gives up after the last retry: eight attempts, spaced as the schedule says', async () => {
    const hook = await endpoint();
    receiver.answer(() => ({ status: 500 }));
    const id = await sendTest(hook.webhook_id);
    await tp.platform.webhooks.deliverDue();
    for (const wait of RETRY_DELAYS_MS) {
      advance(wait);
      await tp.platform.webhooks.deliverDue();
    }
    const all = attemptsOf(id);
    expect(all).toHaveLength(RETRY_DELAYS_MS.length + 1);
    const gaps = all.slice(1).map((a, i) => a.timestamp - all[i]!.timestamp);
    gaps.forEach((gap, i) => {
      expect(gap).toBeGreaterThanOrEqual(RETRY_DELAYS_MS[i]! / 1000 - 1);
      expect(gap).toBeLessThanOrEqual(RETRY_DELAYS_MS[i]! / 1000 + 2);
    });
    advance(RETRY_DELAYS_MS.at(-1)!);
    await tp.platform.webhooks.deliverDue();
    expect(attemptsOf(id)).toHaveLength(RETRY_DELAYS_MS.length + 1);
    expect(await delivery(hook.webhook_id, id)).toMatchObject({
      attempts: 8,
      state: 'failed',
      last_status: 500,
      next_attempt_at: null,
    });
    await tp.http.delete(`/v1/operator/webhooks/${hook.webhook_id}`, { token: tenant.token });
  });
});

describe('receivers that fail', () => {
  it('delivers everything once a receiver that was down comes back', async () => {
    const hook = await endpoint();
    receiver.answer(() => ({ status: 200 }));
    await receiver.stop();
    const ids = [
      await sendTest(hook.webhook_id),
      await sendTest(hook.webhook_id),
      await sendTest(hook.webhook_id),
    ];
    await tp.platform.webhooks.deliverDue();
    for (const id of ids) {
      const d = await delivery(hook.webhook_id, id);
      expect(d).toMatchObject({ attempts: 1, state: 'pending', last_status: null });
      // A category only: the socket's message would name the address and port tried.
      expect(d.last_error).toBe('connection_refused');
    }
    advance(RETRY_DELAYS_MS[0]!);
    await tp.platform.webhooks.deliverDue();
    await receiver.restart();
    advance(RETRY_DELAYS_MS[1]!);
    await tp.platform.webhooks.deliverDue();
    for (const id of ids) {
      expect(attemptsOf(id).map((a) => a.status)).toEqual([200]);
      expect(await delivery(hook.webhook_id, id)).toMatchObject({ attempts: 3, state: 'succeeded' });
    }
    await tp.http.delete(`/v1/operator/webhooks/${hook.webhook_id}`, { token: tenant.token });
  });

  it('disables the endpoint at once on 410, and sends nothing more until it is enabled again', async () => {
    const hook = await endpoint();
    receiver.answer(() => ({ status: 410 }));
    const id = await sendTest(hook.webhook_id);
    await tp.platform.webhooks.deliverDue();
    expect(await delivery(hook.webhook_id, id)).toMatchObject({
      attempts: 1,
      state: 'failed',
      last_status: 410,
    });
    expect(await webhook(hook.webhook_id)).toMatchObject({ status: 'disabled', disabled_reason: 'gone' });
    const refused = await tp.http.post(`/v1/operator/webhooks/${hook.webhook_id}/test`, {
      token: tenant.token,
    });
    expect(refused.status).toBe(409);
    receiver.answer(() => ({ status: 200 }));
    const enabled = await tp.http.patch(`/v1/operator/webhooks/${hook.webhook_id}`, {
      token: tenant.token,
      json: { status: 'enabled' },
    });
    expect(enabled.body.data).toMatchObject({ status: 'enabled', disabled_reason: null });
    const again = await sendTest(hook.webhook_id);
    await tp.platform.webhooks.deliverDue();
    expect(attemptsOf(again).map((a) => a.status)).toEqual([200]);
    await tp.http.delete(`/v1/operator/webhooks/${hook.webhook_id}`, { token: tenant.token });
  });

  it('disables an endpoint that has done nothing but fail for five days', async () => {
    const hook = await endpoint();
    receiver.answer(() => ({ status: 500 }));
    await sendTest(hook.webhook_id);
    await tp.platform.webhooks.deliverDue();
    advance(4 * 86_400_000);
    await sendTest(hook.webhook_id);
    await tp.platform.webhooks.deliverDue();
    expect((await webhook(hook.webhook_id)).status).toBe('enabled');
    advance(86_400_000);
    const last = await sendTest(hook.webhook_id);
    await tp.platform.webhooks.deliverDue();
    expect(await webhook(hook.webhook_id)).toMatchObject({ status: 'disabled', disabled_reason: 'failing' });
    // The delivery that found the endpoint disabled stays pending: it goes out if the endpoint is enabled again.
    expect((await delivery(hook.webhook_id, last)).state).toMatch(/^(failed|pending)$/);
    await tp.http.delete(`/v1/operator/webhooks/${hook.webhook_id}`, { token: tenant.token });
  });

  it('a success clears the failure record', async () => {
    const hook = await endpoint();
    receiver.answer(() => ({ status: 500 }));
    await sendTest(hook.webhook_id);
    await tp.platform.webhooks.deliverDue();
    advance(3 * 86_400_000);
    receiver.answer(() => ({ status: 200 }));
    await sendTest(hook.webhook_id);
    await tp.platform.webhooks.deliverDue();
    advance(3 * 86_400_000);
    receiver.answer(() => ({ status: 500 }));
    await sendTest(hook.webhook_id);
    await tp.platform.webhooks.deliverDue();
    expect((await webhook(hook.webhook_id)).status).toBe('enabled');
    await tp.http.delete(`/v1/operator/webhooks/${hook.webhook_id}`, { token: tenant.token });
  });
});

describe('isolation', () => {
  it('a receiver that hangs holds back only its own endpoint', async () => {
    const slow = await endpoint();
    const other = await startWebhookReceiver(receiver.tls);
    try {
      const created = await tp.http.post('/v1/operator/webhooks', {
        token: tenant.token,
        json: { url: other.url, events: ['webhook.test'] },
      });
      other.trust(created.body.data.secret);
      const fast = created.body.data.webhook_id;
      receiver.answer(() => ({ status: 200, delayMs: 4_000 }));
      const held: string[] = [];
      for (let i = 0; i < 6; i++) held.push(await sendTest(slow.webhook_id));
      const quick = await sendTest(fast);
      // Queued deliveries go out on their own (no deliverDue): the other endpoint's arrives at once.
      const deadline = Date.now() + 3_000;
      while (!other.received.some((r) => r.id === quick) && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 20));
      expect(other.received.map((r) => r.id)).toContain(quick);
      // Meanwhile the hanging receiver holds at most two of its endpoint's deliveries, none answered yet.
      const slowSeen = receiver.received.filter((r) => held.includes(r.id));
      expect(slowSeen.length).toBeLessThanOrEqual(2);
      expect(slowSeen.every((r) => r.status === 0)).toBe(true);
      receiver.answer(() => ({ status: 200 }));
      await tp.platform.webhooks.deliverDue();
      for (const id of held) expect(attemptsOf(id).some((a) => a.status === 200)).toBe(true);
      await tp.http.delete(`/v1/operator/webhooks/${fast}`, { token: tenant.token });
      await tp.http.delete(`/v1/operator/webhooks/${slow.webhook_id}`, { token: tenant.token });
    } finally {
      await other.close();
    }
  });
});

describe('secrets and redelivery', () => {
  it('signs with both secrets for 24 hours after a rotation, then with the new one only', async () => {
    const hook = await endpoint();
    receiver.answer(() => ({ status: 200 }));
    const rotated = await tp.http.post(`/v1/operator/webhooks/${hook.webhook_id}/rotate-secret`, {
      token: tenant.token,
    });
    expect(rotated.status).toBe(200);
    const fresh: string = rotated.body.data.secret;
    expect(fresh).not.toBe(hook.secret);
    receiver.trust(fresh);
    const during = await sendTest(hook.webhook_id);
    await tp.platform.webhooks.deliverDue();
    const d1 = attemptsOf(during)[0]!;
    expect(d1.signature.split(' ')).toHaveLength(2);
    expect(d1.verifiedWith.sort()).toEqual([hook.secret, fresh].sort());

    advance(24 * 3_600_000 + 1_000);
    const after = await sendTest(hook.webhook_id);
    await tp.platform.webhooks.deliverDue();
    const d2 = attemptsOf(after)[0]!;
    expect(d2.signature.split(' ')).toHaveLength(1);
    expect(d2.verifiedWith).toEqual([fresh]);
    await tp.http.delete(`/v1/operator/webhooks/${hook.webhook_id}`, { token: tenant.token });
  });

  it('redelivers a delivery with the same webhook-id', async () => {
    const hook = await endpoint();
    receiver.answer(() => ({ status: 200 }));
    const id = await sendTest(hook.webhook_id);
    await tp.platform.webhooks.deliverDue();
    const res = await tp.http.post(`/v1/operator/webhooks/${hook.webhook_id}/deliveries/${id}/redeliver`, {
      token: tenant.token,
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toMatchObject({ delivery_id: id, state: 'pending' });
    await tp.platform.webhooks.deliverDue();
    expect(attemptsOf(id).map((a) => a.status)).toEqual([200, 200]);
    expect(await delivery(hook.webhook_id, id)).toMatchObject({ attempts: 2, state: 'succeeded' });
    const missing = await tp.http.post(
      `/v1/operator/webhooks/${hook.webhook_id}/deliveries/msg_0000/redeliver`,
      { token: tenant.token },
    );
    expect(missing.status).toBe(404);
    // The attempts so far, by outcome, on the metrics listener.
    const metrics = (await tp.metrics()).text;
    const count = (outcome: string) =>
      Number(
        new RegExp(`charger_platform_webhook_attempts_total\\{[^}]*outcome="${outcome}"[^}]*\\} (\\d+)`).exec(
          metrics,
        )?.[1],
      );
    expect(count('delivered')).toBeGreaterThanOrEqual(8);
    expect(count('failed')).toBeGreaterThanOrEqual(15);
    expect(count('gave_up')).toBeGreaterThanOrEqual(2);
    expect(count('disabled')).toBeGreaterThanOrEqual(2);
    await tp.http.delete(`/v1/operator/webhooks/${hook.webhook_id}`, { token: tenant.token });
  });
});

describe('last_error of rows stored before categories', () => {
  it('is read as a category, never the raw text stored then', async () => {
    const hook = await endpoint();
    receiver.answer(() => ({ status: 200 }));
    await receiver.stop();
    const raw = [
      ['ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:18099', 'connection_refused'],
      ['UND_ERR_CONNECT_TIMEOUT: Connect Timeout Error (attempted address: 10.0.0.9:443)', 'timeout'],
      ['hooks.example resolves to 10.1.2.3, a non-public address', 'address_not_allowed'],
      ['HTTP 502', 'http_status'],
    ] as const;
    const ids: string[] = [];
    for (const _ of raw) ids.push(await sendTest(hook.webhook_id));
    // Their first attempts done (refused), so nothing in flight writes over the rows below.
    await tp.platform.webhooks.deliverDue();
    for (const [i, [text]] of raw.entries()) {
      const id = ids[i]!;
      // Written as the dispatcher of an earlier version did.
      await tp.store.recordAttempt(
        {
          delivery_id: id,
          webhook_id: hook.webhook_id,
          attempts: 1,
          last_status: text.startsWith('HTTP') ? 502 : null,
          last_error: text,
          state: 'failed',
          next_attempt_ms: null,
          failing_since_ms: null,
        },
        Date.now(),
      );
    }
    const page = await tp.http.get(`/v1/operator/webhooks/${hook.webhook_id}/deliveries?size=100`, {
      token: tenant.token,
    });
    expect(page.text).not.toMatch(/127\.0\.0\.1|10\.0\.0\.9|10\.1\.2\.3|18099|ECONN|UND_ERR/);
    raw.forEach(([, category], i) => {
      const d = page.body.data.items.find((x: { delivery_id: string }) => x.delivery_id === ids[i]);
      expect(d.last_error).toBe(category);
    });
    await receiver.restart();
    await tp.http.delete(`/v1/operator/webhooks/${hook.webhook_id}`, { token: tenant.token });
  });
});
