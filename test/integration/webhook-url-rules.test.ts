import { lookup } from 'node:dns/promises';
import { hostname } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isPublicAddress } from '../../platform/webhooks/address-policy.js';
import { createTenant, expectError, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';

/**
 * Webhook URLs as `serve` takes them in production (DESIGN.md §14): https only, never to loopback, private or
 * link-local addresses: refused when written as such, and checked again on the address resolved at delivery.
 */
let tp: TestPlatform;
let receiver: WebhookReceiver;
let tenant: Awaited<ReturnType<typeof createTenant>>;

beforeAll(async () => {
  receiver = await startWebhookReceiver();
  tp = await startTestPlatform({ webhooks: { ca: receiver.ca } });
  tenant = await createTenant(tp, 'URL Rules');
});
afterAll(async () => {
  await tp.stop();
  await receiver.close();
});

describe('webhook URL rules without --webhooks-allow-private', () => {
  it.each([
    ['http://hooks.example.com/x', 'must be an https URL'],
    ['https://127.0.0.1:8443/x', '127.0.0.1 is not a public address'],
    ['https://[::1]/x', '::1 is not a public address'],
    ['https://10.0.0.7/x', '10.0.0.7 is not a public address'],
    ['https://169.254.169.254/latest/meta-data', '169.254.169.254 is not a public address'],
    ['https://localhost:9000/x', 'localhost is not allowed'],
    // The security review's cases (issue 33, finding 8): IPv4-compatible, 6to4, NAT64, site-local.
    ['https://[::127.0.0.1]/', '::7f00:1 is not a public address'],
    ['https://[::ffff:127.0.0.1]/', '::ffff:7f00:1 is not a public address'],
    ['https://[2002:7f00:1::1]/x', '2002:7f00:1::1 is not a public address'],
    ['https://[64:ff9b::7f00:1]/x', '64:ff9b::7f00:1 is not a public address'],
    ['https://[64:ff9b:1::a00:7]/x', '64:ff9b:1::a00:7 is not a public address'],
    ['https://[2001:0:4136:e378::1]/x', '2001:0:4136:e378::1 is not a public address'],
    ['https://[fec0::1]/x', 'fec0::1 is not a public address'],
    ['https://192.88.99.1/x', '192.88.99.1 is not a public address'],
  ])('refuses %s', async (url, why) => {
    const res = await tp.http.post('/v1/operator/webhooks', {
      token: tenant.token,
      json: { url, events: ['*'] },
    });
    const body = expectError(res, 400, 1001);
    expect(body.details.field).toBe('url');
    expect(body.message).toContain(why);
  });

  it('refuses the same on a change of URL', async () => {
    const created = await tp.http.post('/v1/operator/webhooks', {
      token: tenant.token,
      json: { url: 'https://hooks.example.com/charger', events: ['webhook.test'] },
    });
    expect(created.status).toBe(200);
    const id = created.body.data.webhook_id;
    expectError(
      await tp.http.patch(`/v1/operator/webhooks/${id}`, {
        token: tenant.token,
        json: { url: 'https://192.168.1.10/x' },
      }),
      400,
      1001,
    );
    expect((await tp.http.get(`/v1/operator/webhooks/${id}`, { token: tenant.token })).body.data.url).toBe(
      'https://hooks.example.com/charger',
    );
    await tp.http.delete(`/v1/operator/webhooks/${id}`, { token: tenant.token });
  });

  it('does not deliver to a name that resolves to a non-public address', async () => {
    // This machine's own name resolves to loopback (/etc/hosts): accepted as a name, refused when connecting.
    const name = hostname();
    const resolved = await lookup(name, { all: true });
    expect(
      resolved.some((a) => !isPublicAddress(a.address)),
      `${name} → ${JSON.stringify(resolved)}`,
    ).toBe(true);
    const port = new URL(receiver.url).port;
    const created = await tp.http.post('/v1/operator/webhooks', {
      token: tenant.token,
      json: { url: `https://${name}:${port}/hooks`, events: ['webhook.test'] },
    });
    expect(created.status, created.text).toBe(200);
    receiver.trust(created.body.data.secret);
    const id = created.body.data.webhook_id;
    const sent = await tp.http.post(`/v1/operator/webhooks/${id}/test`, { token: tenant.token });
    await tp.platform.webhooks.deliverDue();
    const log = await tp.http.get(`/v1/operator/webhooks/${id}/deliveries`, { token: tenant.token });
    const d = log.body.data.items.find(
      (x: { delivery_id: string }) => x.delivery_id === sent.body.data.delivery_id,
    );
    expect(d).toMatchObject({ attempts: 1, state: 'pending', last_status: null });
    expect(d.last_error).toBe('address_not_allowed');
    expect(receiver.received).toHaveLength(0);
  });

  it('refuses at delivery a stored URL the policy no longer allows (written before it tightened)', async () => {
    const created = await tp.http.post('/v1/operator/webhooks', {
      token: tenant.token,
      json: { url: 'https://hooks.example.com/old', events: ['webhook.test'] },
    });
    expect(created.status, created.text).toBe(200);
    const id = created.body.data.webhook_id;
    // As an earlier version let it through: IPv4-compatible loopback, the receiver's own port.
    const port = new URL(receiver.url).port;
    await tp.store.updateWebhook(id, { url: `https://[::127.0.0.1]:${port}/hooks` }, Date.now());
    receiver.trust(created.body.data.secret);
    const sent = await tp.http.post(`/v1/operator/webhooks/${id}/test`, { token: tenant.token });
    await tp.platform.webhooks.deliverDue();
    const log = await tp.http.get(`/v1/operator/webhooks/${id}/deliveries`, { token: tenant.token });
    const d = log.body.data.items.find(
      (x: { delivery_id: string }) => x.delivery_id === sent.body.data.delivery_id,
    );
    expect(d).toMatchObject({ attempts: 1, last_status: null, last_error: 'address_not_allowed' });
    expect(receiver.received).toHaveLength(0);
  });
});
