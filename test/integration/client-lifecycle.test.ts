import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import type { AnyRoute } from '../../platform/http/route-spec.js';
import { STREAM_CLOSE_TOKEN_EXPIRED } from '../../shared/index.js';
import { pollUntil } from '../helpers/cli.js';
import {
  createTenant,
  type HttpResult,
  operatorToken,
  registerDevice,
  startTestPlatform,
  type TestPlatform,
} from '../helpers/platform.js';
import { createClientOf, rotateClientSecretOf } from '../helpers/sealed-writes.js';
import { streamUpgrade } from '../helpers/stream-upgrade.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';

/**
 * An operator client's lifecycle (DESIGN.md §18) over the route table (`platform.routes`: a new operator endpoint
 * joins without touching this file) and the stream: a revoked client's tokens and a rotated-out generation's
 * tokens are refused everywhere with 401/2001, the token endpoint refuses their secrets as `invalid_client`,
 * and the new secret's tokens work. The grace runs on the platform's clock, moved forward by the test.
 */

const HOUR_MS = 3_600_000;
let tp: TestPlatform;
let tenant: Awaited<ReturnType<typeof createTenant>>;
let deviceId: string;
let receiver: WebhookReceiver;

const operatorRoutes = () => tp.platform.routes.filter((r) => r.auth.kind === 'operator');
const key = (r: AnyRoute) => `${r.method} ${r.url}`;

/** Every path parameter filled in: auth is checked before the ids, so any id shows whether a token admits. */
function pathOf(route: AnyRoute): string {
  return route.url.replace(/:([A-Za-z_]+)/g, (_m, name: string) =>
    name === 'connector_id' ? '1' : name === 'device_id' ? deviceId : `x_${name}`,
  );
}
function call(route: AnyRoute, token: string): Promise<HttpResult> {
  return tp.http.call(route.method, pathOf(route), {
    token,
    ...(route.method === 'GET' || route.method === 'DELETE' ? {} : { json: {} }),
  });
}

async function newClient(scopes: Array<'read' | 'write'> = ['read', 'write']) {
  const { client, secret } = await createClientOf(tp, { operator_ids: [tenant.operatorId], scopes });
  return { id: client.client_id, secret, token: await operatorToken(tp.http, client.client_id, secret) };
}

function tokenFor(clientId: string, secret: string): Promise<HttpResult> {
  return tp.http.post('/v1/operator/oauth/token', {
    json: { client_id: clientId, client_secret: secret, grant_type: 'client_credentials' },
  });
}

/** The token endpoint's `invalid_client` refusal (DESIGN.md §15). */
function expectInvalidClient(res: HttpResult): void {
  expect(res.status, res.text).toBe(401);
  expect(res.body.code).toBe(2001);
  expect(res.body.error).toBe('invalid_client');
  expect(res.headers['www-authenticate']).toMatch(/^Basic realm="charger-platform"/);
  expect(res.text).not.toContain('access_token');
}

/** Every operator endpoint refuses the token with 401/2001, and so does a stream upgrade. */
async function expectRefusedEverywhere(token: string): Promise<void> {
  const routes = operatorRoutes();
  expect(routes.length).toBeGreaterThanOrEqual(20);
  for (const route of routes) {
    const res = await call(route, token);
    expect(res.status, `${key(route)}: ${res.text}`).toBe(401);
    expect(res.body.code, key(route)).toBe(2001);
  }
  const up = await upgrade(token);
  expect(up.status).toBe(401);
  expect(up.body.code).toBe(2001);
}

/**
 * Every operator endpoint lets the token through authentication, whatever it then answers (a 429 too: the rate
 * limit is checked after authentication), and the stream opens.
 */
async function expectAdmittedEverywhere(token: string): Promise<void> {
  for (const route of operatorRoutes()) {
    const res = await call(route, token);
    expect(res.status, `${key(route)}: ${res.text}`).not.toBe(401);
  }
  expect((await upgrade(token)).status).toBe(101);
}

/** The HTTP answer to a stream upgrade: 101 when it was accepted. */
const upgrade = (token: string) => streamUpgrade(tp, { authorization: `Bearer ${token}` });

/** An open stream connection, and the close code it ends with. */
async function openStream(token: string): Promise<{ closed: Promise<number>; ws: WebSocket }> {
  const ws = new WebSocket(`wss://127.0.0.1:${tp.port}/v1/operator/stream`, {
    ca: tp.ca,
    headers: { authorization: `Bearer ${token}` },
  });
  ws.on('error', () => undefined);
  const closed = new Promise<number>((resolve) => ws.on('close', (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    ws.on('open', () => resolve());
    ws.on('unexpected-response', () => reject(new Error('stream refused')));
  });
  return { ws, closed };
}

/** Waits until the platform's principal directory has heard of a change (a client's known token refused). */
async function untilRefused(token: string): Promise<void> {
  const res = await pollUntil(
    () => tp.http.get('/v1/operator/sites', { token }),
    (r) => r.status === 401,
    5_000,
  );
  expect(res.status).toBe(401);
}

beforeAll(async () => {
  receiver = await startWebhookReceiver();
  // Deliveries are driven by `deliverDue`, not the dispatcher's timer.
  tp = await startTestPlatform({
    streamPingMs: 200,
    webhooks: { allowPrivate: true, ca: receiver.ca, pollMs: 3_600_000 },
  });
  tenant = await createTenant(tp, 'Lifecycle');
  deviceId = (await registerDevice(tp, `SN-LIFE-${process.pid}`, tenant.siteId)).deviceId;
});
afterAll(async () => {
  await tp?.stop();
  await receiver?.close();
});

describe('a revoked client', () => {
  it('is refused on every operator endpoint and the stream, its open stream is closed, its secret refused', async () => {
    const c = await newClient();
    await expectAdmittedEverywhere(c.token);
    const stream = await openStream(c.token);

    expect(await tp.store.revokeClient(c.id)).toBe('revoked');
    await untilRefused(c.token);
    expect(await stream.closed).toBe(STREAM_CLOSE_TOKEN_EXPIRED);
    await expectRefusedEverywhere(c.token);
    expectInvalidClient(await tokenFor(c.id, c.secret));
    // Another client of the same operator is untouched.
    await expectAdmittedEverywhere(tenant.token);
  });

  it('has its webhook endpoints disabled: what was queued for them is not delivered', async () => {
    const c = await newClient();
    const hook = await tp.http.post('/v1/operator/webhooks', {
      token: c.token,
      json: { url: receiver.url, events: ['webhook.test'] },
    });
    expect(hook.status, hook.text).toBe(200);
    const webhookId: string = hook.body.data.webhook_id;
    receiver.trust(hook.body.data.secret);
    const sendTest = async () => {
      const res = await tp.http.post(`/v1/operator/webhooks/${webhookId}/test`, { token: c.token });
      expect(res.status, res.text).toBe(200);
      return res.body.data.delivery_id as string;
    };
    const before = await sendTest();
    await tp.platform.webhooks.deliverDue();
    expect(receiver.received.filter((r) => r.id === before)).toHaveLength(1);

    // A delivery whose first attempt failed waits in the queue for its retry...
    receiver.answer(() => ({ status: 503 }));
    const queued = await sendTest();
    await tp.platform.webhooks.deliverDue();
    expect(receiver.received.filter((r) => r.id === queued)).toHaveLength(1);
    receiver.answer(() => ({ status: 200 }));
    // ... which never comes once the client is revoked.
    await tp.store.revokeClient(c.id);
    tp.advance(HOUR_MS);
    await tp.platform.webhooks.deliverDue();
    expect(receiver.received.filter((r) => r.id === queued)).toHaveLength(1);
    expect(await tp.store.getWebhook(webhookId)).toMatchObject({
      status: 'disabled',
      disabled_reason: 'client_revoked',
    });
  });

  it('gets no new secret', async () => {
    const c = await newClient();
    await tp.store.revokeClient(c.id);
    expect(await rotateClientSecretOf(tp, c.id, 0)).toEqual({ outcome: 'revoked' });
    expectInvalidClient(await tokenFor(c.id, c.secret));
  });
});

describe('a rotated secret', () => {
  it('keeps the old secret and its tokens through the grace, then refuses them everywhere', async () => {
    const c = await newClient();
    const rotation = await rotateClientSecretOf(tp, c.id, HOUR_MS);
    if (rotation.outcome !== 'rotated') throw new Error(rotation.outcome);

    // During the grace: old token, old secret and new secret all work.
    const fresh = await tokenFor(c.id, rotation.secret);
    expect(fresh.status, fresh.text).toBe(200);
    expect(fresh.body.expires_in).toBe(86_400);
    const newToken: string = fresh.body.access_token;
    const viaOld = await tokenFor(c.id, c.secret);
    expect(viaOld.status, viaOld.text).toBe(200);
    // A token of the old secret lives no longer than the grace.
    expect(viaOld.body.expires_in).toBeGreaterThan(3_500);
    expect(viaOld.body.expires_in).toBeLessThanOrEqual(3_600);
    const oldSecretToken: string = viaOld.body.access_token;
    await expectAdmittedEverywhere(c.token);
    await expectAdmittedEverywhere(oldSecretToken);
    const oldStream = await openStream(c.token);
    const newStream = await openStream(newToken);

    tp.advance(HOUR_MS - 60_000);
    expect((await tp.http.get('/v1/operator/sites', { token: c.token })).status).toBe(200);

    // Past the grace: refused without any store change (the rule reads the clock).
    tp.advance(60_000);
    await expectRefusedEverywhere(c.token);
    // Issued with the old secret, it ended with the grace, as its expires_in said: 401/2002 (token expired).
    for (const route of operatorRoutes()) {
      const res = await call(route, oldSecretToken);
      expect(res.status, key(route)).toBe(401);
      expect(res.body.code, key(route)).toBe(2002);
    }
    expectInvalidClient(await tokenFor(c.id, c.secret));
    expect(await oldStream.closed).toBe(STREAM_CLOSE_TOKEN_EXPIRED);
    // The new secret and its token carry on.
    expect(newStream.ws.readyState).toBe(WebSocket.OPEN);
    newStream.ws.close();
    await expectAdmittedEverywhere(newToken);
    const later = await tokenFor(c.id, rotation.secret);
    expect(later.status, later.text).toBe(200);
    await expectAdmittedEverywhere(later.body.access_token);
  });

  it('with no grace refuses the old secret and its tokens at once', async () => {
    const c = await newClient();
    const rotation = await rotateClientSecretOf(tp, c.id, 0);
    if (rotation.outcome !== 'rotated') throw new Error(rotation.outcome);
    await untilRefused(c.token);
    await expectRefusedEverywhere(c.token);
    expectInvalidClient(await tokenFor(c.id, c.secret));
    const fresh = await tokenFor(c.id, rotation.secret);
    expect(fresh.status, fresh.text).toBe(200);
    await expectAdmittedEverywhere(fresh.body.access_token);
  });

  it('a second rotation ends the first one’s grace: only the secret it replaced stays', async () => {
    const c = await newClient();
    const first = await rotateClientSecretOf(tp, c.id, HOUR_MS);
    if (first.outcome !== 'rotated') throw new Error(first.outcome);
    const second = await rotateClientSecretOf(tp, c.id, HOUR_MS);
    if (second.outcome !== 'rotated') throw new Error(second.outcome);
    await untilRefused(c.token);
    expectInvalidClient(await tokenFor(c.id, c.secret));
    expect((await tokenFor(c.id, first.secret)).status).toBe(200);
    expect((await tokenFor(c.id, second.secret)).status).toBe(200);
  });

  it('a token issued before tokens carried a generation is of generation 1', async () => {
    const c = await newClient();
    const ctx = tp.platform.context;
    const nowS = Math.floor(tp.now() / 1000);
    const legacy = ctx.tokens.issueOperatorToken({
      sub: c.id,
      scp: ['read'],
      ops: [tenant.operatorId],
      iat: nowS,
      exp: nowS + 3_600,
    });
    expect((await tp.http.get('/v1/operator/sites', { token: legacy })).status).toBe(200);
    await rotateClientSecretOf(tp, c.id, 0);
    await untilRefused(legacy);
  });
});
