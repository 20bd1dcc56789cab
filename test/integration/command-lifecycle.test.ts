import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTenant,
  expectError,
  type HttpResult,
  type RegisteredDevice,
  registerDevice,
  startTestPlatform,
  type TestPlatform,
} from '../helpers/platform.js';
import { createClientOf } from '../helpers/sealed-writes.js';

/**
 * The command state machine of DESIGN.md §5 over real HTTPS and SQLite:
 *
 *   queued ──> delivered ──> accepted ──> succeeded | failed
 *     │            ├──> rejected
 *     │            └──> expired
 *     ├──> cancelled
 *     └──> expired
 *
 * and flexibility controls (fan-out, progress, completion, cancellation with reversal commands).
 * One platform for the file; every test has its own tenant and chargers. The fake clock only moves forward.
 */

let tp: TestPlatform;

beforeAll(async () => {
  tp = await startTestPlatform();
});
afterAll(async () => {
  await tp?.stop();
});

const advance = (ms: number): void => tp.advance(ms);
const platformNow = (): number => tp.now();
const isoNow = () => new Date(platformNow()).toISOString();

let counter = 0;
function sn(): string {
  counter += 1;
  return `LC-${process.pid}-${counter}-${Math.random().toString(36).slice(2, 8)}`;
}
async function tenant() {
  counter += 1;
  return createTenant(tp, `lifecycle-${counter}`);
}
type Tenant = Awaited<ReturnType<typeof tenant>>;

interface Pending {
  command_id: string;
  command: string;
  params: Record<string, unknown>;
  expiry: string;
}
interface HistoryEntry {
  status: string;
  at: string;
  reason?: string;
}

async function heartbeat(d: RegisteredDevice): Promise<Pending[]> {
  const res = await tp.http.post('/v1/device/heartbeat', {
    token: d.token,
    json: { timestamp: isoNow(), status: 'online', fault_code: 0 },
  });
  expect(res.status).toBe(200);
  return res.body.data.commands as Pending[];
}
async function poll(d: RegisteredDevice): Promise<Pending[]> {
  const res = await tp.http.get('/v1/device/commands?wait=0', { token: d.token });
  expect(res.status).toBe(200);
  return res.body.data.commands as Pending[];
}
const ids = (cs: Pending[]) => cs.map((c) => c.command_id);

function report(d: RegisteredDevice, commandId: string, body: unknown): Promise<HttpResult> {
  return tp.http.post(`/v1/device/commands/${commandId}/status`, { token: d.token, json: body });
}
async function reportOk(
  d: RegisteredDevice,
  commandId: string,
  body: Record<string, unknown>,
  expected: { status: string; changed: boolean },
): Promise<void> {
  const res = await report(d, commandId, body);
  expect(res.status).toBe(200);
  expect(res.body).toEqual({ code: 0, message: 'success', data: { command_id: commandId, ...expected } });
}

async function stop(t: Tenant, d: RegisteredDevice, connector = 1): Promise<string> {
  const res = await tp.http.post(`/v1/operator/devices/${d.deviceId}/connectors/${connector}/stop`, {
    token: t.token,
    json: {},
  });
  expect(res.status).toBe(200);
  expect(res.body.data.status).toBe('queued');
  return res.body.data.command_id as string;
}
// biome-ignore lint/suspicious/noExplicitAny: response bodies are inspected field by field
async function command(t: Tenant, commandId: string): Promise<any> {
  const res = await tp.http.get(`/v1/operator/commands/${commandId}`, { token: t.token });
  expect(res.status).toBe(200);
  expect(res.body.code).toBe(0);
  return res.body.data;
}
/** Runs `fn` and returns the platform-clock window [before, after] it ran in. */
async function during<T>(fn: () => Promise<T>): Promise<{ result: T; before: number; after: number }> {
  const before = platformNow();
  const result = await fn();
  return { result, before, after: platformNow() };
}
function expectWithin(at: string, w: { before: number; after: number }): void {
  expect(new Date(at).toISOString()).toBe(at);
  const ms = Date.parse(at);
  expect(ms).toBeGreaterThanOrEqual(w.before);
  expect(ms).toBeLessThanOrEqual(w.after);
}
function statuses(history: HistoryEntry[]): string[] {
  return history.map((h) => h.status);
}

describe('single commands: queued → delivered → accepted → final', () => {
  it('walks a stop through queued, delivered, accepted and succeeded, each step in history with its time', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);

    const queued = await during(() => stop(t, d));
    const id = queued.result;
    let view = await command(t, id);
    expect(view).toEqual({
      command_id: id,
      device_id: d.deviceId,
      command: 'stop',
      params: { connector_id: 1, reason: 'user_request' },
      status: 'queued',
      expiry: expect.any(String),
      created_at: expect.any(String),
      updated_at: expect.any(String),
      history: [{ status: 'queued', at: expect.any(String) }],
    });
    expectWithin(view.created_at, queued);
    expect(view.updated_at).toBe(view.created_at);
    expect(view.history[0].at).toBe(view.created_at);
    expect(Date.parse(view.expiry) - Date.parse(view.created_at)).toBe(15 * 60_000);

    advance(2_000);
    const delivered = await during(() => heartbeat(d));
    expect(delivered.result).toEqual([
      {
        command_id: id,
        command: 'stop',
        params: { connector_id: 1, reason: 'user_request' },
        expiry: view.expiry,
      },
    ]);
    view = await command(t, id);
    expect(view.status).toBe('delivered');
    expect(statuses(view.history)).toEqual(['queued', 'delivered']);
    expectWithin(view.history[1].at, delivered);
    expect(view.updated_at).toBe(view.history[1].at);
    expect(view.created_at).toBe(view.history[0].at);

    advance(2_000);
    const accepted = await during(() =>
      reportOk(d, id, { status: 'accepted' }, { status: 'accepted', changed: true }),
    );
    view = await command(t, id);
    expect(view.status).toBe('accepted');
    expect(statuses(view.history)).toEqual(['queued', 'delivered', 'accepted']);
    expectWithin(view.history[2].at, accepted);

    advance(2_000);
    const succeeded = await during(() =>
      reportOk(
        d,
        id,
        { status: 'succeeded', reason: 'session stopped', timestamp: isoNow() },
        { status: 'succeeded', changed: true },
      ),
    );
    view = await command(t, id);
    expect(view.status).toBe('succeeded');
    expect(view.reason).toBe('session stopped');
    expect(view.history).toEqual([
      { status: 'queued', at: view.history[0].at },
      { status: 'delivered', at: view.history[1].at },
      { status: 'accepted', at: view.history[2].at },
      { status: 'succeeded', at: expect.any(String), reason: 'session stopped' },
    ]);
    expectWithin(view.history[3].at, succeeded);
    expect(view.updated_at).toBe(view.history[3].at);
    // Each step happened 2 s (fake clock) after the previous one.
    const times = view.history.map((h: HistoryEntry) => Date.parse(h.at));
    for (let i = 1; i < times.length; i++) expect(times[i] - times[i - 1]).toBeGreaterThanOrEqual(2_000);

    // Final: never delivered again, neither on the heartbeat nor on the poll.
    expect(await heartbeat(d)).toEqual([]);
    expect(await poll(d)).toEqual([]);
  });

  it('ends in failed with the charger’s reason, and a later succeeded does not overturn it', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const id = await stop(t, d);
    expect(ids(await heartbeat(d))).toEqual([id]);
    await reportOk(d, id, { status: 'accepted' }, { status: 'accepted', changed: true });
    // Accepted: no longer redelivered.
    expect(await heartbeat(d)).toEqual([]);
    await reportOk(
      d,
      id,
      { status: 'failed', reason: 'contactor stuck' },
      { status: 'failed', changed: true },
    );
    await reportOk(d, id, { status: 'succeeded' }, { status: 'failed', changed: false });
    const view = await command(t, id);
    expect(view.status).toBe('failed');
    expect(view.reason).toBe('contactor stuck');
    expect(view.history.map((h: HistoryEntry) => [h.status, h.reason])).toEqual([
      ['queued', undefined],
      ['delivered', undefined],
      ['accepted', undefined],
      ['failed', 'contactor stuck'],
    ]);
    expect(await poll(d)).toEqual([]);
  });

  it('ends in rejected straight from delivered; rejected is final', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const id = await stop(t, d, 2);
    expect(ids(await poll(d))).toEqual([id]);
    await reportOk(
      d,
      id,
      { status: 'rejected', reason: 'no session on connector 2' },
      { status: 'rejected', changed: true },
    );
    await reportOk(d, id, { status: 'accepted' }, { status: 'rejected', changed: false });
    await reportOk(d, id, { status: 'rejected' }, { status: 'rejected', changed: false });
    const view = await command(t, id);
    expect(view.status).toBe('rejected');
    expect(view.history).toEqual([
      { status: 'queued', at: expect.any(String) },
      { status: 'delivered', at: expect.any(String) },
      { status: 'rejected', at: expect.any(String), reason: 'no session on connector 2' },
    ]);
    expect(await heartbeat(d)).toEqual([]);
    expect(await poll(d)).toEqual([]);
  });
});

describe('at-least-once delivery', () => {
  it('redelivers a delivered command without a report on every heartbeat and poll, then never after a report', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const a = await stop(t, d, 1);
    const b = await stop(t, d, 2);

    const first = await heartbeat(d);
    expect(ids(first)).toEqual([a, b]);
    // Same commands again, identical, on the next heartbeat and on the long poll.
    expect(await heartbeat(d)).toEqual(first);
    expect(await poll(d)).toEqual(first);
    advance(1_000);
    expect(await heartbeat(d)).toEqual(first);

    // Delivery is recorded once, however often the command went out.
    const view = await command(t, a);
    expect(view.status).toBe('delivered');
    expect(statuses(view.history)).toEqual(['queued', 'delivered']);

    // A report (any status) ends redelivery of that command only.
    await reportOk(d, a, { status: 'accepted' }, { status: 'accepted', changed: true });
    expect(ids(await heartbeat(d))).toEqual([b]);
    expect(ids(await poll(d))).toEqual([b]);
    await reportOk(d, b, { status: 'succeeded' }, { status: 'succeeded', changed: true });
    expect(await heartbeat(d)).toEqual([]);
    expect(await poll(d)).toEqual([]);
    // An accepted command stays accepted (it is not redelivered and does not expire by itself).
    expect((await command(t, a)).status).toBe('accepted');
  });

  it('a command queued after a delivery is delivered with the redelivered one, oldest first', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const a = await stop(t, d, 1);
    expect(ids(await heartbeat(d))).toEqual([a]);
    advance(1_000);
    const b = await stop(t, d, 2);
    expect(ids(await poll(d))).toEqual([a, b]);
    expect((await command(t, b)).status).toBe('delivered');
  });
});

describe('expiry', () => {
  it('expires delivered and queued commands at their expiry: history entry, no delivery, reports refused 409/4001', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const delivered = await stop(t, d, 1);
    expect(ids(await heartbeat(d))).toEqual([delivered]);
    advance(60_000);
    const queued = await stop(t, d, 2);
    const expiryDelivered = Date.parse((await command(t, delivered)).expiry);
    const expiryQueued = Date.parse((await command(t, queued)).expiry);
    expect(expiryQueued - expiryDelivered).toBeGreaterThanOrEqual(60_000);

    // Past the first expiry only: the delivered command expires, the queued one is still pending.
    advance(expiryDelivered - platformNow() + 1_000);
    const swept = await during(() => tp.platform.sweep());
    let view = await command(t, delivered);
    expect(view.status).toBe('expired');
    expect(view.reason).toBe('no report before expiry');
    expect(view.history).toEqual([
      { status: 'queued', at: expect.any(String) },
      { status: 'delivered', at: expect.any(String) },
      { status: 'expired', at: expect.any(String), reason: 'no report before expiry' },
    ]);
    // The background sweeper may have got there first, but never before the expiry.
    expect(Date.parse(view.history[2].at)).toBeGreaterThanOrEqual(expiryDelivered);
    expect(Date.parse(view.history[2].at)).toBeLessThanOrEqual(swept.after);
    expect((await command(t, queued)).status).toBe('queued');
    expect(ids(await heartbeat(d))).toEqual([queued]);
    expect(ids(await poll(d))).toEqual([queued]);

    const late = expectError(await report(d, delivered, { status: 'succeeded' }), 409, 4001);
    expect(late.message).toContain('expired');
    expectError(await report(d, delivered, { status: 'accepted' }), 409, 4001);

    // The second command was delivered by the heartbeat above; it expires in turn.
    advance(expiryQueued - platformNow() + 1_000);
    await tp.platform.sweep();
    view = await command(t, queued);
    expect(view.status).toBe('expired');
    expect(statuses(view.history)).toEqual(['queued', 'delivered', 'expired']);
    expect(await heartbeat(d)).toEqual([]);
    expect(await poll(d)).toEqual([]);
    expectError(await report(d, queued, { status: 'rejected' }), 409, 4001);
    expect((await command(t, queued)).status).toBe('expired');
  });

  it('expires a command that was never delivered: queued → expired', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const id = await stop(t, d);
    advance(15 * 60_000 + 1_000);
    await tp.platform.sweep();
    const view = await command(t, id);
    expect(view.status).toBe('expired');
    expect(statuses(view.history)).toEqual(['queued', 'expired']);
    expect(await heartbeat(d)).toEqual([]);
    // Nothing left to cancel either.
    expectError(await tp.http.delete(`/v1/operator/commands/${id}`, { token: t.token }), 409, 4001);
  });

  it('does not expire a command that was reported before its expiry', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const id = await stop(t, d);
    await heartbeat(d);
    await reportOk(d, id, { status: 'succeeded' }, { status: 'succeeded', changed: true });
    advance(15 * 60_000 + 1_000);
    await tp.platform.sweep();
    const view = await command(t, id);
    expect(view.status).toBe('succeeded');
    expect(statuses(view.history)).toEqual(['queued', 'delivered', 'succeeded']);
  });
});

describe('status reports', () => {
  it('out of order: succeeded then a late accepted changes nothing; a repeated succeeded changes nothing', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const id = await stop(t, d);
    await heartbeat(d);
    await reportOk(d, id, { status: 'succeeded' }, { status: 'succeeded', changed: true });
    const before = await command(t, id);
    advance(1_000);
    await reportOk(d, id, { status: 'accepted' }, { status: 'succeeded', changed: false });
    await reportOk(d, id, { status: 'succeeded' }, { status: 'succeeded', changed: false });
    await reportOk(d, id, { status: 'succeeded', reason: 'again' }, { status: 'succeeded', changed: false });
    const after = await command(t, id);
    expect(after).toEqual(before);
    expect(statuses(after.history)).toEqual(['queued', 'delivered', 'succeeded']);
    expect(after.reason).toBeUndefined();
  });

  it('a repeated accepted is acknowledged without a second history entry', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const id = await stop(t, d);
    await heartbeat(d);
    await reportOk(d, id, { status: 'accepted' }, { status: 'accepted', changed: true });
    await reportOk(d, id, { status: 'accepted' }, { status: 'accepted', changed: false });
    expect(statuses((await command(t, id)).history)).toEqual(['queued', 'delivered', 'accepted']);
  });

  it('a charger reporting on another charger’s command, or an unknown one, gets 404/3001 and changes nothing', async () => {
    const t = await tenant();
    const owner = await registerDevice(tp, sn(), t.siteId);
    const stranger = await registerDevice(tp, sn(), t.siteId);
    const id = await stop(t, owner);
    await heartbeat(owner);
    expectError(await report(stranger, id, { status: 'succeeded' }), 404, 3001);
    expectError(await report(stranger, 'cmd_00000000000000000000', { status: 'accepted' }), 404, 3001);
    const view = await command(t, id);
    expect(view.status).toBe('delivered');
    expect(statuses(view.history)).toEqual(['queued', 'delivered']);
    // The owner can still report.
    await reportOk(owner, id, { status: 'accepted' }, { status: 'accepted', changed: true });
  });

  it.each([
    [{ status: 'done' }, 'status', 'done'],
    [{}, 'status', null],
    [{ reason: 'no status' }, 'status', null],
    [{ status: 'accepted', timestamp: 'yesterday' }, 'timestamp', 'yesterday'],
    [{ status: 'accepted', reason: 'r'.repeat(201) }, 'reason', `${'r'.repeat(200)}…`],
    [['accepted'], 'body', '[array of 1]'],
  ])('refuses the report %j: 400/1001 on %s, status unchanged', async (body, field, value) => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const id = await stop(t, d);
    await heartbeat(d);
    const err = expectError(await report(d, id, body), 400, 1001);
    expect(err.details).toEqual({ field, value });
    expect((await command(t, id)).status).toBe('delivered');
  });

  it('needs a device token: no token 401/2001, an operator token 401/2001', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const id = await stop(t, d);
    expectError(
      await tp.http.post(`/v1/device/commands/${id}/status`, { json: { status: 'accepted' } }),
      401,
      2001,
    );
    expectError(
      await tp.http.post(`/v1/device/commands/${id}/status`, {
        token: t.token,
        json: { status: 'accepted' },
      }),
      401,
      2001,
    );
    expect((await command(t, id)).status).toBe('queued');
  });
});

describe('cancel: DELETE /v1/operator/commands/{command_id}', () => {
  it('cancels a queued command: cancelled, never delivered, reports refused', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const id = await stop(t, d);
    const keep = await stop(t, d, 2);
    advance(1_000);
    const cancelled = await during(() => tp.http.delete(`/v1/operator/commands/${id}`, { token: t.token }));
    expect(cancelled.result.status).toBe(200);
    expect(cancelled.result.body).toEqual({
      code: 0,
      message: 'success',
      data: { command_id: id, status: 'cancelled' },
    });
    const view = await command(t, id);
    expect(view.status).toBe('cancelled');
    expect(view.history).toEqual([
      { status: 'queued', at: view.created_at },
      { status: 'cancelled', at: expect.any(String), reason: 'cancelled by operator' },
    ]);
    expectWithin(view.history[1].at, cancelled);

    expect(ids(await heartbeat(d))).toEqual([keep]);
    expect(ids(await poll(d))).toEqual([keep]);
    expectError(await report(d, id, { status: 'accepted' }), 409, 4001);
    // A second cancel: no longer queued.
    expectError(await tp.http.delete(`/v1/operator/commands/${id}`, { token: t.token }), 409, 4001);
    expect((await command(t, id)).status).toBe('cancelled');
  });

  it('refuses to cancel a delivered command: 409/4001, and it stays delivered', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const id = await stop(t, d);
    expect(ids(await heartbeat(d))).toEqual([id]);
    expectError(await tp.http.delete(`/v1/operator/commands/${id}`, { token: t.token }), 409, 4001);
    const view = await command(t, id);
    expect(view.status).toBe('delivered');
    expect(statuses(view.history)).toEqual(['queued', 'delivered']);
    expect(ids(await heartbeat(d))).toEqual([id]);
    // Nor once it is final.
    await reportOk(d, id, { status: 'succeeded' }, { status: 'succeeded', changed: true });
    expectError(await tp.http.delete(`/v1/operator/commands/${id}`, { token: t.token }), 409, 4001);
  });

  it('answers 404/3001 for another tenant’s command on GET and DELETE, and for an unknown one; nothing changes', async () => {
    const t = await tenant();
    const other = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const id = await stop(t, d);
    expectError(await tp.http.get(`/v1/operator/commands/${id}`, { token: other.token }), 404, 3001);
    expectError(await tp.http.delete(`/v1/operator/commands/${id}`, { token: other.token }), 404, 3001);
    const unknown = 'cmd_ffffffffffffffffffff';
    const a = expectError(
      await tp.http.get(`/v1/operator/commands/${unknown}`, { token: t.token }),
      404,
      3001,
    );
    const b = expectError(
      await tp.http.get(`/v1/operator/commands/${id}`, { token: other.token }),
      404,
      3001,
    );
    // Indistinguishable from a command that does not exist.
    expect(b).toEqual(a);
    expectError(await tp.http.delete(`/v1/operator/commands/${unknown}`, { token: t.token }), 404, 3001);
    expect((await command(t, id)).status).toBe('queued');
    expect(ids(await heartbeat(d))).toEqual([id]);
  });

  it('needs the write scope to cancel (403/2003) and the read scope to follow (GET)', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const id = await stop(t, d);
    const { client, secret } = await createClientOf(tp, {
      operator_ids: [t.operatorId],
      scopes: ['read'],
    });
    const res = await tp.http.post('/v1/operator/oauth/token', {
      json: { client_id: client.client_id, client_secret: secret, grant_type: 'client_credentials' },
    });
    const readOnly = res.body.access_token as string;
    expect((await tp.http.get(`/v1/operator/commands/${id}`, { token: readOnly })).status).toBe(200);
    expectError(await tp.http.delete(`/v1/operator/commands/${id}`, { token: readOnly }), 403, 2003);
    expect((await command(t, id)).status).toBe('queued');
  });
});

describe('flexibility controls', () => {
  async function fleet(n: number) {
    const t = await tenant();
    const devices: RegisteredDevice[] = [];
    for (let i = 0; i < n; i++) devices.push(await registerDevice(tp, sn(), t.siteId));
    devices.sort((a, b) => (a.deviceId < b.deviceId ? -1 : 1));
    return { t, devices };
  }
  async function flex(t: Tenant, duration: number, command = 'set_power_limit') {
    const params = command === 'set_power_limit' ? { power_limit_percent: 50, duration } : { duration };
    const res = await tp.http.post('/v1/operator/control/flexibility', {
      token: t.token,
      json: { target_type: 'site', target_ids: [t.siteId], command, params },
    });
    expect(res.status).toBe(200);
    expect(res.body.data.status).toBe('executing');
    return res.body.data.control_id as string;
  }
  // biome-ignore lint/suspicious/noExplicitAny: response bodies are inspected field by field
  async function control(t: Tenant, controlId: string): Promise<any> {
    const res = await tp.http.get(`/v1/operator/control/${controlId}`, { token: t.token });
    expect(res.status).toBe(200);
    return res.body.data;
  }
  const commandOf = (
    view: { devices: Array<{ device_id: string; command_id: string }> },
    d: RegisteredDevice,
  ) => view.devices.find((x) => x.device_id === d.deviceId)!.command_id;

  it('shows per-charger progress that moves as chargers receive and report the command', async () => {
    const { t, devices } = await fleet(3);
    const [a, b, c] = devices as [RegisteredDevice, RegisteredDevice, RegisteredDevice];
    const created = await during(() => flex(t, 3_600));
    const controlId = created.result;

    let view = await control(t, controlId);
    expect(view).toEqual({
      control_id: controlId,
      status: 'executing',
      command: 'set_power_limit',
      params: {
        power_limit_percent: 50,
        duration: 3_600,
        control_id: controlId,
        starts_at: view.created_at,
        ends_at: view.ends_at,
      },
      target_type: 'site',
      target_ids: [t.siteId],
      created_at: expect.any(String),
      ends_at: expect.any(String),
      device_count: 3,
      progress: { queued: 3 },
      devices: devices.map((d) => ({
        device_id: d.deviceId,
        command_id: expect.any(String),
        status: 'queued',
      })),
    });
    expectWithin(view.created_at, created);
    expect(Date.parse(view.ends_at) - Date.parse(view.created_at)).toBe(3_600_000);
    expect(new Set(view.devices.map((x: { command_id: string }) => x.command_id)).size).toBe(3);

    // Each per-charger command is a command like any other, linked to its control.
    const cmdA = commandOf(view, a);
    const cmdView = await command(t, cmdA);
    expect(cmdView).toMatchObject({
      command_id: cmdA,
      device_id: a.deviceId,
      command: 'set_power_limit',
      control_id: controlId,
      status: 'queued',
      expiry: view.ends_at,
      params: view.params,
    });

    expect(ids(await heartbeat(a))).toEqual([cmdA]);
    view = await control(t, controlId);
    expect(view.progress).toEqual({ queued: 2, delivered: 1 });

    await reportOk(a, cmdA, { status: 'accepted' }, { status: 'accepted', changed: true });
    expect(ids(await poll(b))).toEqual([commandOf(view, b)]);
    view = await control(t, controlId);
    expect(view.progress).toEqual({ queued: 1, delivered: 1, accepted: 1 });

    await reportOk(a, cmdA, { status: 'succeeded' }, { status: 'succeeded', changed: true });
    await reportOk(b, commandOf(view, b), { status: 'rejected' }, { status: 'rejected', changed: true });
    view = await control(t, controlId);
    expect(view.progress).toEqual({ queued: 1, succeeded: 1, rejected: 1 });
    expect(view.devices).toEqual([
      { device_id: a.deviceId, command_id: cmdA, status: 'succeeded' },
      { device_id: b.deviceId, command_id: commandOf(view, b), status: 'rejected' },
      { device_id: c.deviceId, command_id: commandOf(view, c), status: 'queued' },
    ]);
    expect(view.status).toBe('executing');
  });

  it('is completed once its duration has passed; its undelivered commands expire', async () => {
    const { t, devices } = await fleet(2);
    const [a] = devices as [RegisteredDevice, RegisteredDevice];
    const controlId = await flex(t, 60, 'pause_charging');
    let view = await control(t, controlId);
    await heartbeat(a);
    await reportOk(a, commandOf(view, a), { status: 'succeeded' }, { status: 'succeeded', changed: true });

    advance(30_000);
    await tp.platform.sweep();
    expect((await control(t, controlId)).status).toBe('executing');
    expect((await tp.store.getControl(controlId))?.control.status).toBe('executing');

    advance(31_000);
    await tp.platform.sweep();
    view = await control(t, controlId);
    expect(view.status).toBe('completed');
    // Stored as completed by the sweep, not only computed on read.
    expect((await tp.store.getControl(controlId))?.control.status).toBe('completed');
    expect(view.progress).toEqual({ succeeded: 1, expired: 1 });
    expect(await heartbeat(devices[1]!)).toEqual([]);

    // Completed: nothing left to cancel.
    const err = expectError(
      await tp.http.delete(`/v1/operator/control/${controlId}`, { token: t.token }),
      409,
      4001,
    );
    expect(err.message).toContain('completed');
    expect((await control(t, controlId)).status).toBe('completed');
  });

  it('DELETE cancels: queued commands are cancelled, chargers that received it get a reversal ending now', async () => {
    const { t, devices } = await fleet(3);
    const [a, b, c] = devices as [RegisteredDevice, RegisteredDevice, RegisteredDevice];
    const controlId = await flex(t, 3_600);
    let view = await control(t, controlId);
    const original = { a: commandOf(view, a), b: commandOf(view, b), c: commandOf(view, c) };

    expect(ids(await heartbeat(a))).toEqual([original.a]); // delivered, not reported
    expect(ids(await heartbeat(b))).toEqual([original.b]);
    await reportOk(b, original.b, { status: 'accepted' }, { status: 'accepted', changed: true });
    // c never asked: its command is still queued.

    advance(10_000);
    const cancelled = await during(() =>
      tp.http.delete(`/v1/operator/control/${controlId}`, { token: t.token }),
    );
    expect(cancelled.result.status).toBe(200);
    expect(cancelled.result.body).toEqual({
      code: 0,
      message: 'success',
      data: { control_id: controlId, status: 'cancelled' },
    });

    view = await control(t, controlId);
    expect(view.status).toBe('cancelled');
    expect(view.progress).toEqual({ delivered: 1, accepted: 1, cancelled: 1 });
    const cView = await command(t, original.c);
    expect(cView.status).toBe('cancelled');
    expect(cView.history.at(-1)).toEqual({
      status: 'cancelled',
      at: expect.any(String),
      reason: 'control cancelled',
    });
    expectWithin(cView.history.at(-1).at, cancelled);

    // The reversal: same command name and control_id, the window ended at the cancellation.
    const checkReversal = (cmds: Pending[]) => {
      const reversals = cmds.filter((x) => x.command_id !== original.a && x.command_id !== original.b);
      expect(reversals).toHaveLength(1);
      const r = reversals[0]!;
      expect(r.command).toBe('set_power_limit');
      expect(r.params).toEqual({ ...view.params, ends_at: expect.any(String) });
      expect(r.params.control_id).toBe(controlId);
      expectWithin(r.params.ends_at as string, cancelled);
      expect(r.expiry).toBe(view.ends_at);
      return r.command_id;
    };
    const revA = checkReversal(await heartbeat(a));
    const revB = checkReversal(await poll(b));
    expect(revA).not.toBe(revB);
    // Nothing for the charger that never received the limit.
    expect(await heartbeat(c)).toEqual([]);
    expect(await poll(c)).toEqual([]);
    expectError(await report(c, original.c, { status: 'accepted' }), 409, 4001);

    // The reversal is a command like any other: the charger reports it.
    await reportOk(a, revA, { status: 'succeeded' }, { status: 'succeeded', changed: true });
    expect((await command(t, revA)).status).toBe('succeeded');

    // Cancelled: a second DELETE conflicts and queues nothing more.
    expectError(await tp.http.delete(`/v1/operator/control/${controlId}`, { token: t.token }), 409, 4001);
    expect(ids(await heartbeat(c))).toEqual([]);
    expect((await heartbeat(a)).filter((x) => x.command_id !== original.a)).toEqual([]);
  });

  it('answers 404/3001 for another tenant’s control and an unknown one, on GET and DELETE', async () => {
    const { t } = await fleet(1);
    const other = await tenant();
    const controlId = await flex(t, 600);
    expectError(await tp.http.get(`/v1/operator/control/${controlId}`, { token: other.token }), 404, 3001);
    expectError(await tp.http.delete(`/v1/operator/control/${controlId}`, { token: other.token }), 404, 3001);
    expectError(
      await tp.http.get('/v1/operator/control/ctl_00000000000000000000', { token: t.token }),
      404,
      3001,
    );
    expectError(
      await tp.http.delete('/v1/operator/control/ctl_00000000000000000000', { token: t.token }),
      404,
      3001,
    );
    expect((await control(t, controlId)).status).toBe('executing');
  });
});

describe('commands across a platform restart', () => {
  it('a command queued (or delivered and unreported) before the restart is delivered after it', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'cp-restart-'));
    try {
      const first = await startTestPlatform({ dataDir });
      const t = await createTenant(first, 'restart');
      const [a, b] = [
        await registerDevice(first, sn(), t.siteId),
        await registerDevice(first, sn(), t.siteId),
      ];
      const stopOn = async (p: TestPlatform, d: RegisteredDevice) => {
        const res = await p.http.post(`/v1/operator/devices/${d.deviceId}/connectors/1/stop`, {
          token: t.token,
          json: { reason: 'user_request' },
        });
        expect(res.status).toBe(200);
        return res.body.data.command_id as string;
      };
      const beat = async (p: TestPlatform, d: RegisteredDevice) => {
        const res = await p.http.post('/v1/device/heartbeat', {
          token: d.token,
          json: { timestamp: new Date(p.now()).toISOString(), status: 'online', fault_code: 0 },
        });
        expect(res.status).toBe(200);
        return (res.body.data.commands as Pending[]).map((c) => c.command_id);
      };
      const queued = await stopOn(first, a);
      const delivered = await stopOn(first, b);
      expect(await beat(first, b)).toEqual([delivered]);
      await first.stop();

      const second = await startTestPlatform({ dataDir });
      try {
        expect(await beat(second, a)).toEqual([queued]);
        expect(await beat(second, b)).toEqual([delivered]);
      } finally {
        await second.stop();
      }
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
