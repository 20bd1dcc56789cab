import { describe, expect, it } from 'vitest';
import {
  createTenant,
  expectError,
  type HttpResult,
  operatorToken,
  type RegisteredDevice,
  registerDevice,
} from '../helpers/platform.js';
import { platformPerFile } from '../helpers/platform-per-file.js';
import { createClientOf } from '../helpers/sealed-writes.js';

/**
 * GET /v1/operator/devices/{device_id}/commands over real HTTPS, on the run's backend: a device's commands with
 * their statuses, newest first, paged and filtered, under the tenancy and scope rules of the other device reads.
 * One platform for the file; every test has its own tenant and chargers.
 */

const tp = platformPerFile();

let counter = 0;
function sn(): string {
  counter += 1;
  return `DC-${process.pid}-${counter}-${Math.random().toString(36).slice(2, 8)}`;
}
async function tenant() {
  counter += 1;
  return createTenant(tp, `device-commands-${counter}`);
}
type Tenant = Awaited<ReturnType<typeof tenant>>;

interface CommandItem {
  command_id: string;
  device_id: string;
  command: string;
  status: string;
  created_at: string;
  control_id?: string;
  history: Array<{ status: string; at: string; reason?: string }>;
}
interface CommandPage {
  total: number;
  page: number;
  size: number;
  items: CommandItem[];
}

// biome-ignore lint/suspicious/noExplicitAny: response bodies are inspected field by field
async function okData(res: Promise<HttpResult>): Promise<any> {
  const r = await res;
  if (r.status !== 200) throw new Error(`expected 200, got ${r.status} ${r.text}`);
  expect(r.body).toMatchObject({ code: 0, message: 'success' });
  return r.body.data;
}
const list = (token: string, deviceId: string, query = ''): Promise<HttpResult> =>
  tp.http.get(`/v1/operator/devices/${deviceId}/commands${query}`, { token });
const listOk = (t: Tenant, d: RegisteredDevice, query = ''): Promise<CommandPage> =>
  okData(list(t.token, d.deviceId, query));
const ids = (page: CommandPage) => page.items.map((c) => c.command_id);

async function queue(t: Tenant, d: RegisteredDevice, action: 'stop' | 'start', connector = 1) {
  const data = await okData(
    tp.http.post(`/v1/operator/devices/${d.deviceId}/connectors/${connector}/${action}`, {
      token: t.token,
      json: {},
    }),
  );
  return data.command_id as string;
}
async function heartbeat(d: RegisteredDevice): Promise<string[]> {
  const data = await okData(
    tp.http.post('/v1/device/heartbeat', {
      token: d.token,
      json: { timestamp: new Date(tp.now()).toISOString(), status: 'online', fault_code: 0 },
    }),
  );
  return (data.commands as Array<{ command_id: string }>).map((c) => c.command_id);
}
const report = (d: RegisteredDevice, commandId: string, status: string, reason?: string) =>
  okData(
    tp.http.post(`/v1/device/commands/${commandId}/status`, {
      token: d.token,
      json: reason ? { status, reason } : { status },
    }),
  );

/** Newest first: created_at, then command_id, both descending. */
const newestFirst = (a: CommandItem, b: CommandItem) =>
  Date.parse(b.created_at) - Date.parse(a.created_at) || (a.command_id < b.command_id ? 1 : -1);

describe('GET /v1/operator/devices/{device_id}/commands', () => {
  it('lists the device’s commands with their statuses as they move, newest first, each as GET …/commands/{id} answers it', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const neighbour = await registerDevice(tp, sn(), t.siteId);

    expect(await listOk(t, d)).toEqual({ total: 0, page: 1, size: 20, items: [] });

    const stop = await queue(t, d, 'stop', 1);
    const start = await queue(t, d, 'start', 2);
    await queue(t, neighbour, 'stop');
    let page = await listOk(t, d);
    expect(page).toMatchObject({ total: 2, page: 1, size: 20 });
    expect(page.items.map((c) => [c.command_id, c.status])).toEqual(
      [...page.items].sort(newestFirst).map((c) => [c.command_id, 'queued']),
    );
    expect(ids(page).sort()).toEqual([stop, start].sort());

    // Delivered on the heartbeat; the charger accepts and completes the stop and rejects the start.
    expect((await heartbeat(d)).sort()).toEqual([stop, start].sort());
    expect((await listOk(t, d)).items.map((c) => c.status)).toEqual(['delivered', 'delivered']);
    await report(d, stop, 'accepted');
    await report(d, stop, 'succeeded');
    await report(d, start, 'rejected', 'no vehicle');

    // Commands queued by another client of the same operator, and by a flexibility control, are listed too.
    const { client, secret } = await createClientOf(tp, {
      operator_ids: [t.operatorId],
      scopes: ['read', 'write'],
    });
    const colleague = { ...t, token: await operatorToken(tp.http, client.client_id, secret) };
    const theirs = await queue(colleague, d, 'stop', 2);
    const control = await okData(
      tp.http.post('/v1/operator/control/flexibility', {
        token: t.token,
        json: {
          target_type: 'site',
          target_ids: [t.siteId],
          command: 'pause_charging',
          params: { duration: 600 },
        },
      }),
    );

    page = await listOk(t, d);
    expect(page.total).toBe(4);
    expect([...page.items].sort(newestFirst)).toEqual(page.items);
    const byId = new Map(page.items.map((c) => [c.command_id, c]));
    expect(byId.get(stop)).toMatchObject({ command: 'stop', status: 'succeeded' });
    expect(byId.get(stop)?.history.map((h) => h.status)).toEqual([
      'queued',
      'delivered',
      'accepted',
      'succeeded',
    ]);
    expect(byId.get(start)).toMatchObject({ command: 'start', status: 'rejected', reason: 'no vehicle' });
    expect(byId.get(theirs)).toMatchObject({ command: 'stop', status: 'queued' });
    const fromControl = page.items.find((c) => c.control_id === control.control_id);
    expect(fromControl).toMatchObject({ command: 'pause_charging', status: 'queued', device_id: d.deviceId });
    // Each item is exactly what the command's own endpoint answers.
    for (const item of page.items) {
      expect(item).toEqual(
        await okData(tp.http.get(`/v1/operator/commands/${item.command_id}`, { token: t.token })),
      );
    }
    // The colleague sees the same list.
    expect(await listOk(colleague, d)).toEqual(page);
  });

  it('pages without gaps or repeats and filters by status', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const queued: string[] = [];
    for (let i = 0; i < 5; i++) queued.push(await queue(t, d, i % 2 === 0 ? 'stop' : 'start', 1 + (i % 2)));
    const all = await listOk(t, d, '?size=100');
    expect(all).toMatchObject({ total: 5, page: 1, size: 100 });
    const pages = [await listOk(t, d, '?size=2'), await listOk(t, d, '?size=2&page=2')];
    pages.push(await listOk(t, d, '?page=3&size=2'));
    expect(pages.map((p) => [p.total, p.page, p.size, p.items.length])).toEqual([
      [5, 1, 2, 2],
      [5, 2, 2, 2],
      [5, 3, 2, 1],
    ]);
    expect(pages.flatMap(ids)).toEqual(ids(all));
    expect(await listOk(t, d, '?size=2&page=4')).toEqual({ total: 5, page: 4, size: 2, items: [] });

    // Cancel one while queued, deliver the rest, complete one.
    const [first, second] = queued;
    await okData(tp.http.delete(`/v1/operator/commands/${first}`, { token: t.token }));
    await heartbeat(d);
    await report(d, second ?? '', 'succeeded');
    const cancelled = await listOk(t, d, '?status=cancelled');
    expect(cancelled).toMatchObject({ total: 1, page: 1, size: 20 });
    expect(cancelled.items[0]).toMatchObject({ command_id: first, status: 'cancelled' });
    expect(ids(await listOk(t, d, '?status=succeeded'))).toEqual([second]);
    const delivered = await listOk(t, d, '?status=delivered&size=2&page=2');
    expect(delivered).toMatchObject({ total: 3, page: 2, size: 2 });
    expect(ids(delivered)).toEqual(
      all.items
        .filter((c) => c.command_id !== first && c.command_id !== second)
        .map((c) => c.command_id)
        .slice(2),
    );
    expect(await listOk(t, d, '?status=queued')).toEqual({ total: 0, page: 1, size: 20, items: [] });
  });

  it('refuses a bad status, page or size, unknown and repeated parameters: 400/1001 naming the field', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const cases: Array<[string, string, unknown]> = [
      ['?status=done', 'status', 'done'],
      ['?status=', 'status', ''],
      ['?status=Queued', 'status', 'Queued'],
      ['?size=0', 'size', '0'],
      ['?size=101', 'size', '101'],
      ['?size=ten', 'size', 'ten'],
      ['?page=0', 'page', '0'],
      ['?device_id=other', 'device_id', 'other'],
    ];
    for (const [query, field, value] of cases) {
      const body = expectError(await list(t.token, d.deviceId, query), 400, 1001);
      expect(body.details, query).toEqual({ field, value });
    }
    const repeated = expectError(await list(t.token, d.deviceId, '?status=queued&status=failed'), 400, 1001);
    expect(repeated.details.field).toBe('status');
  });

  it('answers another tenant’s device and an unknown one 404/3001, as the device’s other reads do', async () => {
    const t = await tenant();
    const other = await tenant();
    const foreign = await registerDevice(tp, sn(), other.siteId);
    const unassigned = await registerDevice(tp, sn(), undefined);
    await queue(other, foreign, 'stop');
    for (const deviceId of [foreign.deviceId, unassigned.deviceId, 'dev_doesnotexist']) {
      const res = await list(t.token, deviceId);
      expectError(res, 404, 3001);
      const events = await tp.http.get(`/v1/operator/devices/${deviceId}/events`, { token: t.token });
      expect(res.body).toEqual(events.body);
    }
    // Even with a filter that would match nothing: the device is checked first.
    expectError(await list(t.token, foreign.deviceId, '?status=failed'), 404, 3001);
    expect((await listOk(other, foreign)).total).toBe(1);
  });

  it('needs the read scope: a read-only client reads, a write-only one is refused 403/2003', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const stop = await queue(t, d, 'stop');
    const token = async (scopes: Array<'read' | 'write'>) => {
      const { client, secret } = await createClientOf(tp, { operator_ids: [t.operatorId], scopes });
      return operatorToken(tp.http, client.client_id, secret);
    };
    const readOnly = await okData(list(await token(['read']), d.deviceId));
    expect(readOnly).toMatchObject({ total: 1, items: [{ command_id: stop, status: 'queued' }] });
    expectError(await list(await token(['write']), d.deviceId), 403, 2003);
    expectError(await tp.http.get(`/v1/operator/devices/${d.deviceId}/commands`), 401, 2001);
  });
});
