import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  expectWithin,
  type HistoryEntry,
  ids,
  lifecycleCalls,
  type Pending,
  statuses,
} from '../helpers/command-lifecycle.js';
import {
  createTenant,
  expectError,
  type RegisteredDevice,
  registerDevice,
  startTestPlatform,
  type TestPlatform,
} from '../helpers/platform.js';
import { platformPerFile } from '../helpers/platform-per-file.js';

/**
 * The command state machine of DESIGN.md §5 over real HTTPS and SQLite:
 *
 *   queued ──> delivered ──> accepted ──> succeeded | failed
 *     │            ├──> rejected
 *     │            └──> expired
 *     ├──> cancelled
 *     └──> expired
 *
 * Here: the path to a final status, at-least-once delivery, expiry and a restart; status reports and
 * cancellation are in command-reports-and-cancel.test.ts, flexibility controls in command-controls.test.ts.
 * One platform for the file; every test has its own tenant and chargers. The fake clock only moves forward.
 */

const tp = platformPerFile();

const { advance, platformNow, isoNow, sn, tenant, heartbeat, poll, report, reportOk, stop, command, during } =
  lifecycleCalls(() => tp);

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
