import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { createTenant, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { streamUpgrade } from '../helpers/stream-upgrade.js';

/**
 * Stream tickets (issue 38): `POST /v1/operator/stream/tickets` answers a ticket that opens one stream connection
 * within 30 s as the client, so that no access token rides in a URL. Real WebSocket clients (ws) over HTTPS.
 */

let tp: TestPlatform;
beforeAll(async () => {
  tp = await startTestPlatform({ streamPingMs: 100, tokenTtlSeconds: 3600, logLevel: 'info' });
});
afterAll(async () => {
  await tp.stop();
});

async function ticketFor(token: string): Promise<string> {
  const res = await tp.http.post('/v1/operator/stream/tickets', { token });
  expect(res.status, res.text).toBe(200);
  expect(res.body.data).toEqual({ ticket: expect.any(String), expires_in: 30 });
  return res.body.data.ticket as string;
}

/** A connection opened with `ticket`, once subscribed to `siteId`. */
function subscribed(ticket: string, siteId: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${tp.url.replace('https', 'wss')}/v1/operator/stream?ticket=${ticket}`, {
      ca: tp.ca,
    });
    ws.once('error', reject);
    ws.once('open', () => ws.send(JSON.stringify({ type: 'subscribe', site_ids: [siteId] })));
    ws.on('message', (data) => {
      const m = JSON.parse(String(data)) as { type: string; site_ids?: string[] };
      if (m.type === 'subscribed') {
        expect(m.site_ids).toEqual([siteId]);
        resolve(ws);
      }
    });
  });
}

const closed = (ws: WebSocket) => new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));

describe('stream tickets', () => {
  it('open the stream once, as the client; the second use is refused', async () => {
    const tenant = await createTenant(tp, 'Ticket Co');
    const ticket = await ticketFor(tenant.token);
    expect(ticket).not.toContain(tenant.token);
    const ws = await subscribed(ticket, tenant.siteId);
    const again = await streamUpgrade(tp, {}, `?ticket=${ticket}`);
    expect(again).toMatchObject({
      status: 401,
      body: { code: 2001, message: expect.stringMatching(/already used/) },
    });
    ws.close();
  });

  it("subscribe only to the client's own sites (the ticket is bound to the client)", async () => {
    const mine = await createTenant(tp, 'Mine Co');
    const theirs = await createTenant(tp, 'Theirs Co');
    const ws = new WebSocket(
      `${tp.url.replace('https', 'wss')}/v1/operator/stream?ticket=${await ticketFor(mine.token)}`,
      { ca: tp.ca },
    );
    const answer = new Promise<{ type: string; code?: number }>((resolve) =>
      ws.on('message', (data) => resolve(JSON.parse(String(data)))),
    );
    ws.once('open', () => ws.send(JSON.stringify({ type: 'subscribe', site_ids: [theirs.siteId] })));
    expect(await answer).toMatchObject({ type: 'error', code: 3001 });
    ws.close();
  });

  it('expire after 30 s (2002), and a forged or altered one is refused (2001)', async () => {
    const tenant = await createTenant(tp, 'Late Co');
    const ticket = await ticketFor(tenant.token);
    const altered = `${ticket.slice(0, -2)}${ticket.endsWith('AA') ? 'BB' : 'AA'}`;
    expect(await streamUpgrade(tp, {}, `?ticket=${altered}`)).toMatchObject({
      status: 401,
      body: { code: 2001 },
    });
    expect(await streamUpgrade(tp, {}, '?ticket=st.e30.x')).toMatchObject({
      status: 401,
      body: { code: 2001 },
    });
    // An access token is no ticket.
    expect(await streamUpgrade(tp, {}, `?ticket=${tenant.token}`)).toMatchObject({
      status: 401,
      body: { code: 2001 },
    });
    tp.advance(31_000);
    expect(await streamUpgrade(tp, {}, `?ticket=${ticket}`)).toMatchObject({
      status: 401,
      body: { code: 2002 },
    });
  });

  it("need the read scope, and die with the client's credentials", async () => {
    const writer = await createTenant(tp, 'Writer Co', ['write']);
    const refused = await tp.http.post('/v1/operator/stream/tickets', { token: writer.token });
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe(2003);

    const tenant = await createTenant(tp, 'Revoked Co');
    const ticket = await ticketFor(tenant.token);
    await tp.store.revokeClient(tenant.clientId);
    await tp.platform.context.directory.refreshClient(tenant.clientId);
    expect(await streamUpgrade(tp, {}, `?ticket=${ticket}`)).toMatchObject({
      status: 401,
      body: { code: 2001 },
    });
  });

  it('end the connection when the access token they were asked with expires (4401)', async () => {
    const tenant = await createTenant(tp, 'Expiring Co');
    const ws = await subscribed(await ticketFor(tenant.token), tenant.siteId);
    const code = closed(ws);
    tp.advance(3601_000);
    expect(await code).toBe(4401);
  });

  it('keep tokens and tickets out of the logs', async () => {
    const tenant = await createTenant(tp, 'Quiet Co');
    const ticket = await ticketFor(tenant.token);
    (await subscribed(ticket, tenant.siteId)).close();
    const text = tp.logs.join('');
    expect(text).toContain('/v1/operator/stream?ticket=[redacted]');
    expect(text).not.toContain(ticket);
    expect(text).not.toContain(tenant.token);
  });
});
