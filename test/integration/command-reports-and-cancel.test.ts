import { describe, expect, it } from 'vitest';
import { expectWithin, ids, lifecycleCalls, statuses } from '../helpers/command-lifecycle.js';
import { expectError, registerDevice } from '../helpers/platform.js';
import { platformPerFile } from '../helpers/platform-per-file.js';
import { createClientOf } from '../helpers/sealed-writes.js';

/**
 * A charger's status reports on a command (order, repeats, other chargers' commands, bad bodies) and an
 * operator's cancellation of a command (DESIGN.md §5), over real HTTPS and SQLite. The state machine is drawn in
 * command-lifecycle.test.ts. One platform for the file; every test has its own tenant and chargers.
 */

const tp = platformPerFile();

const { advance, sn, tenant, heartbeat, poll, report, reportOk, stop, command, during } = lifecycleCalls(
  () => tp,
);

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
