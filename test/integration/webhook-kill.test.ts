import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pollUntil, type ServeProcess, spawnServe, tempDirs } from '../helpers/cli.js';
import { httpClient, operatorToken } from '../helpers/platform.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';

/**
 * The webhook queue is durable (DESIGN.md §14): a `serve` process killed with SIGKILL while deliveries are in
 * flight and queued loses none of them. After a restart on the same data, every delivery reaches the receiver
 * (verified with `standardwebhooks`) with its own webhook-id; those cut off mid-flight arrive again with the
 * same id once their lease runs out.
 */
const dirs = tempDirs('cp-webhook-kill-');
let receiver: WebhookReceiver;
let server: ServeProcess | undefined;

beforeAll(async () => {
  receiver = await startWebhookReceiver();
});
afterAll(async () => {
  await server?.stop();
  await receiver.close();
  await dirs.removeAll();
});

describe('a platform killed mid-delivery', () => {
  it('loses no delivery', { timeout: 120_000 }, async () => {
    const dataDir = await dirs.make();
    const env = { NODE_EXTRA_CA_CERTS: receiver.caPath! };
    // The sandbox allows loopback receivers (--webhooks-allow-private).
    server = await spawnServe(['--data-dir', dataDir, '--env', 'sandbox'], { env });
    const ca = (await import('node:fs/promises')).readFile(server.certPath, 'utf8');
    let http = httpClient(server.url, await ca);
    let token = await operatorToken(http, server.clientId!, server.clientSecret!);
    const created = await http.post('/v1/operator/webhooks', {
      token,
      json: { url: receiver.url, events: ['webhook.test'] },
    });
    expect(created.status, created.text).toBe(200);
    const webhookId: string = created.body.data.webhook_id;
    receiver.trust(created.body.data.secret);

    // The receiver holds its answers: deliveries stay in flight until the kill.
    receiver.answer(() => ({ status: 200, delayMs: 60_000 }));
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) {
      const res = await http.post(`/v1/operator/webhooks/${webhookId}/test`, { token });
      expect(res.status).toBe(200);
      ids.push(res.body.data.delivery_id);
    }
    await pollUntil(
      async () => receiver.received.length,
      (n) => n >= 2,
      10_000,
    );
    const inFlight = new Set(receiver.received.map((r) => r.id));
    server.kill();
    await server.exited;
    await http.close();

    receiver.answer(() => ({ status: 200 }));
    server = await spawnServe(['--data-dir', dataDir, '--env', 'sandbox'], { env });
    http = httpClient(server.url, await ca);
    token = await operatorToken(http, server.clientId!, server.clientSecret!);
    const delivered = () => new Set(receiver.received.filter((r) => r.status === 200).map((r) => r.id));
    // Queued ones go at once; the ones cut off mid-flight once their 30-s lease has run out.
    await pollUntil(
      async () => delivered(),
      (got) => ids.every((id) => got.has(id)),
      60_000,
      250,
    );
    expect(ids.filter((id) => !delivered().has(id))).toEqual([]);
    expect(receiver.received.every((r) => r.verifiedWith.length === 1)).toBe(true);
    // At least once: only deliveries that were in flight at the kill arrived twice.
    const seen = new Map<string, number>();
    for (const r of receiver.received) seen.set(r.id, (seen.get(r.id) ?? 0) + 1);
    for (const [id, n] of seen) if (n > 1) expect(inFlight.has(id), id).toBe(true);
    const log = await http.get(`/v1/operator/webhooks/${webhookId}/deliveries?size=100`, { token });
    expect(log.body.data.total).toBe(20);
    expect(log.body.data.items.every((d: { state: string }) => d.state === 'succeeded')).toBe(true);
    await http.close();
  });
});
