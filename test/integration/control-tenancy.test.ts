import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTenant,
  expectError,
  type HttpResult,
  operatorToken,
  type RegisteredDevice,
  registerDevice,
  startTestPlatform,
  type TestPlatform,
} from '../helpers/platform.js';
import { createClientOf } from '../helpers/sealed-writes.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';

/**
 * Flexibility controls belong to the operators of the chargers they reach (DESIGN.md §18), not to every operator
 * of the client that sent them. The reviewed hole: an aggregator (a client of op1 and op2) sends a control to a
 * site of op1; a client of op2 alone could read it (op1's site, devices and command ids), cancel it (op1's
 * commands turned `cancelled`), and its webhooks were told of it. Over real HTTPS, with a real Standard Webhooks
 * receiver, on both backends.
 */

type Tenant = Awaited<ReturnType<typeof createTenant>>;
interface Client {
  clientId: string;
  token: string;
}

let tp: TestPlatform;
let receiver: WebhookReceiver;
let op1: Tenant;
let op2: Tenant;
let aggregator: Client;
let op2Only: Client;
let op1Only: Client;
const devices1: RegisteredDevice[] = [];
let device2: RegisteredDevice;

async function client(operatorIds: string[]): Promise<Client> {
  const { client, secret } = await createClientOf(tp, {
    operator_ids: operatorIds,
    scopes: ['read', 'write'],
  });
  return { clientId: client.client_id, token: await operatorToken(tp.http, client.client_id, secret) };
}

async function subscribe(c: Client): Promise<void> {
  const url = `${receiver.url}?client=${c.clientId}`;
  const res = await tp.http.post('/v1/operator/webhooks', {
    token: c.token,
    json: { url, events: ['control.status_changed'] },
  });
  expect(res.status, res.text).toBe(200);
  receiver.trust(res.body.data.secret);
}

/** Which clients' endpoints were told of a control, in every status they were told. */
async function toldOf(controlId: string): Promise<Record<string, string[]>> {
  await tp.platform.webhooks.deliverDue();
  const told: Record<string, string[]> = {};
  for (const d of receiver.received) {
    if (d.verifiedWith.length === 0 || d.event?.data?.control_id !== controlId) continue;
    const who = new URL(d.path, 'https://receiver').searchParams.get('client');
    if (!who) continue;
    told[who] = [...(told[who] ?? []), d.event.data.status as string];
  }
  return told;
}

function flexibility(c: Client, targetType: 'site' | 'operator' | 'all', targetIds?: string[]) {
  return tp.http.post('/v1/operator/control/flexibility', {
    token: c.token,
    json: {
      target_type: targetType,
      ...(targetIds ? { target_ids: targetIds } : {}),
      command: 'set_power_limit',
      params: { power_limit_percent: 40, duration: 3_600 },
    },
  });
}

/** Same shape as a real control id, but nobody's. */
const missing = (id: string) => id.replace(/(?<=_)[0-9a-f]+$/i, (hex) => '0'.repeat(hex.length));
/** The answer with the id blanked, so that a foreign and a missing control compare on everything else. */
const blanked = (res: HttpResult, id: string) => ({
  status: res.status,
  body: res.text.split(id).join('<id>'),
});

beforeAll(async () => {
  receiver = await startWebhookReceiver();
  tp = await startTestPlatform({ webhooks: { allowPrivate: true, ca: receiver.ca } });
  op1 = await createTenant(tp, 'Op One');
  op2 = await createTenant(tp, 'Op Two');
  for (const n of [1, 2, 3])
    devices1.push(await registerDevice(tp, `SN-CTL-1-${n}-${process.pid}`, op1.siteId));
  device2 = await registerDevice(tp, `SN-CTL-2-${process.pid}`, op2.siteId);
  aggregator = await client([op1.operatorId, op2.operatorId]);
  op2Only = await client([op2.operatorId]);
  op1Only = await client([op1.operatorId]);
  for (const c of [aggregator, op2Only, op1Only]) await subscribe(c);
});
afterAll(async () => {
  await tp?.stop();
  await receiver?.close();
});

describe('an aggregator’s control on one tenant’s site', () => {
  let controlId: string;

  it('is sent to op1’s chargers only', async () => {
    const res = await flexibility(aggregator, 'site', [op1.siteId]);
    expect(res.status, res.text).toBe(200);
    controlId = res.body.data.control_id;
    expect(res.body.data.device_count).toBe(3);
  });

  it('cannot be read by a client of op2 alone: 404/3001 exactly as a missing control', async () => {
    const foreign = await tp.http.get(`/v1/operator/control/${controlId}`, { token: op2Only.token });
    const none = await tp.http.get(`/v1/operator/control/${missing(controlId)}`, { token: op2Only.token });
    expectError(foreign, 404, 3001);
    expect(blanked(foreign, controlId)).toEqual(blanked(none, missing(controlId)));
    for (const d of devices1) expect(foreign.text).not.toContain(d.deviceId);
    expect(foreign.text).not.toContain(op1.siteId);
  });

  it('cannot be cancelled by a client of op2 alone, and op1’s commands stay as they were', async () => {
    const foreign = await tp.http.delete(`/v1/operator/control/${controlId}`, { token: op2Only.token });
    const none = await tp.http.delete(`/v1/operator/control/${missing(controlId)}`, { token: op2Only.token });
    expectError(foreign, 404, 3001);
    expect(blanked(foreign, controlId)).toEqual(blanked(none, missing(controlId)));
    const view = await tp.http.get(`/v1/operator/control/${controlId}`, { token: aggregator.token });
    expect(view.body.data.status).toBe('executing');
    expect(view.body.data.progress).toEqual({ queued: 3 });
  });

  it('is op1’s: a client of op1 alone reads it, and so does the aggregator', async () => {
    for (const c of [op1Only, aggregator]) {
      const res = await tp.http.get(`/v1/operator/control/${controlId}`, { token: c.token });
      expect(res.status, res.text).toBe(200);
      expect(res.body.data.target_ids).toEqual([op1.siteId]);
      expect(res.body.data.devices.map((d: { device_id: string }) => d.device_id).sort()).toEqual(
        devices1.map((d) => d.deviceId).sort(),
      );
    }
  });

  it('tells op1’s and the aggregator’s webhooks, never op2’s', async () => {
    expect(await toldOf(controlId)).toEqual({
      [aggregator.clientId]: ['executing'],
      [op1Only.clientId]: ['executing'],
    });
  });

  it('can be cancelled by a client of op1, and the cancellation is told to the same audience', async () => {
    const res = await tp.http.delete(`/v1/operator/control/${controlId}`, { token: op1Only.token });
    expect(res.status, res.text).toBe(200);
    const view = await tp.http.get(`/v1/operator/control/${controlId}`, { token: aggregator.token });
    expect(view.body.data.status).toBe('cancelled');
    expect(view.body.data.progress).toEqual({ cancelled: 3 });
    expect(await toldOf(controlId)).toEqual({
      [aggregator.clientId]: ['executing', 'cancelled'],
      [op1Only.clientId]: ['executing', 'cancelled'],
    });
  });
});

describe('an aggregator’s control across two tenants', () => {
  const cases: Array<[string, 'site' | 'operator' | 'all', () => string[] | undefined]> = [
    ['both sites', 'site', () => [op1.siteId, op2.siteId]],
    ['both operators', 'operator', () => [op1.operatorId, op2.operatorId]],
    ['all of its chargers', 'all', () => undefined],
  ];
  it.each(cases)(
    'on %s belongs to both: neither tenant alone reads, cancels or hears of it',
    async (_l, type, ids) => {
      const sent = await flexibility(aggregator, type, ids());
      expect(sent.status, sent.text).toBe(200);
      expect(sent.body.data.device_count).toBe(4);
      const controlId: string = sent.body.data.control_id;
      for (const c of [op1Only, op2Only]) {
        expectError(await tp.http.get(`/v1/operator/control/${controlId}`, { token: c.token }), 404, 3001);
        expectError(await tp.http.delete(`/v1/operator/control/${controlId}`, { token: c.token }), 404, 3001);
      }
      const view = await tp.http.get(`/v1/operator/control/${controlId}`, { token: aggregator.token });
      expect(view.status, view.text).toBe(200);
      expect(view.body.data.status).toBe('executing');
      expect(await toldOf(controlId)).toEqual({ [aggregator.clientId]: ['executing'] });
      const cancelled = await tp.http.delete(`/v1/operator/control/${controlId}`, {
        token: aggregator.token,
      });
      expect(cancelled.status, cancelled.text).toBe(200);
    },
  );

  it('an aggregator’s `all` that reaches only op2’s chargers is op2’s', async () => {
    const lone = await client([op2.operatorId, (await tp.store.createOperator('Empty')).operator_id]);
    const sent = await flexibility(lone, 'all');
    expect(sent.body.data.device_count).toBe(1);
    const res = await tp.http.get(`/v1/operator/control/${sent.body.data.control_id}`, {
      token: op2Only.token,
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.devices.map((d: { device_id: string }) => d.device_id)).toEqual([device2.deviceId]);
  });
});
