import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTenant,
  type RegisteredDevice,
  registerDevice,
  startTestPlatform,
  type TestPlatform,
} from '../helpers/platform.js';
import { type StreamConn, sleep, streamCalls } from '../helpers/stream-client.js';

/**
 * What the live telemetry stream (DESIGN.md §8) sends over real WSS: every message kind (telemetry,
 * device_status, command_status) to its subscribers, in order, and the slow-consumer cut-off.
 */

let tp: TestPlatform;
let tenant: Awaited<ReturnType<typeof createTenant>>;
let dev: RegisteredDevice;
let dev2: RegisteredDevice;
let statusDev: RegisteredDevice;
let floodDev: RegisteredDevice;

const { connect, subscribe, spendRealtime, record, postTelemetry, heartbeat, waitForSite, closeAll } =
  streamCalls(() => tp);

beforeAll(async () => {
  tp = await startTestPlatform();
  tenant = await createTenant(tp, 'Stream Alpha');
  dev = await registerDevice(tp, 'ST-SN-1', tenant.siteId);
  dev2 = await registerDevice(tp, 'ST-SN-2', tenant.siteId);
  statusDev = await registerDevice(tp, 'ST-SN-STATUS', tenant.siteId);
  floodDev = await registerDevice(tp, 'ST-SN-FLOOD', tenant.siteId);
  for (const d of [dev, dev2, statusDev, floodDev]) await waitForSite(d.deviceId, tenant.siteId);
});
afterAll(async () => {
  closeAll();
  await tp.stop();
});

describe('subscriptions and messages', () => {
  it('streams every telemetry POST to the subscriber, in order, with the record as posted', async () => {
    const byDevice = await connect({ token: tenant.token });
    expect(await subscribe(byDevice, { device_ids: [dev.deviceId] })).toEqual({
      type: 'subscribed',
      device_ids: [dev.deviceId],
    });
    const bySite = await connect({ token: tenant.token });
    expect(await subscribe(bySite, { site_ids: [tenant.siteId] })).toEqual({
      type: 'subscribed',
      site_ids: [tenant.siteId],
    });

    const N = 200;
    const sent: Array<Record<string, unknown>> = [];
    const postedAt: number[] = [];
    const ackedAt: number[] = [];
    for (let i = 0; i < N; i++) {
      const body = record(1 + (i % 2), { soc: i % 101, phase_details: { l1: { voltage: 230, current: i } } });
      postedAt.push(performance.now());
      await postTelemetry(dev, body);
      ackedAt.push(performance.now());
      sent.push(body);
    }
    await byDevice.fence();
    await bySite.fence();
    const tel = (c: StreamConn) => c.received.filter((r) => r.data.type === 'telemetry');
    const expected = sent.map((b) => ({
      type: 'telemetry',
      device_id: dev.deviceId,
      site_id: tenant.siteId,
      ...b,
    }));
    expect(tel(byDevice).map((r) => r.data)).toEqual(expected);
    expect(tel(bySite).map((r) => r.data)).toEqual(expected);

    const ackToReceive = tel(byDevice).map((r, i) => r.at - ackedAt[i]!);
    const postToReceive = tel(byDevice).map((r, i) => r.at - postedAt[i]!);
    const pct = (xs: number[], p: number) => {
      const s = [...xs].sort((a, b) => a - b);
      return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
    };
    const ms = (x: number) => `${x.toFixed(2)} ms`;
    console.log(
      `stream latency over ${N} telemetry messages: POST acknowledged → received p50 ${ms(pct(ackToReceive, 50))}, ` +
        `p99 ${ms(pct(ackToReceive, 99))} (negative: the message arrived before the HTTP acknowledgement); ` +
        `POST sent → received p50 ${ms(pct(postToReceive, 50))}, p99 ${ms(pct(postToReceive, 99))}`,
    );
    await byDevice.close();
    await bySite.close();
  });

  it('pushes device_status: online on the first request, offline on a heartbeat saying offline', async () => {
    const fresh = statusDev; // has made no authenticated request yet
    const conn = await connect({ token: tenant.token });
    expect((await subscribe(conn, { device_ids: [fresh.deviceId] })).type).toBe('subscribed');

    await heartbeat(fresh, 'online');
    expect(await conn.take((m) => m.type === 'device_status')).toEqual({
      type: 'device_status',
      device_id: fresh.deviceId,
      status: 'online',
      at: expect.any(String),
    });
    await heartbeat(fresh, 'online'); // already online: no message
    await heartbeat(fresh, 'offline');
    expect(await conn.take((m) => m.type === 'device_status')).toMatchObject({
      device_id: fresh.deviceId,
      status: 'offline',
    });
    await postTelemetry(fresh);
    expect(await conn.take((m) => m.type === 'device_status')).toMatchObject({
      device_id: fresh.deviceId,
      status: 'online',
    });
    await conn.fence();
    expect(conn.received.filter((r) => r.data.type === 'device_status')).toHaveLength(3);
    await conn.close();
  });

  it('pushes command_status as a stop is queued, delivered, accepted and succeeded', async () => {
    const conn = await connect({ token: tenant.token });
    expect((await subscribe(conn, { device_ids: [dev2.deviceId] })).type).toBe('subscribed');
    await heartbeat(dev2); // online now, so no device_status interleaves below

    const stop = await tp.http.post(`/v1/operator/devices/${dev2.deviceId}/connectors/1/stop`, {
      token: tenant.token,
      json: { reason: 'user_request' },
    });
    expect(stop.status).toBe(200);
    const commandId = stop.body.data.command_id as string;
    const base = { type: 'command_status', command_id: commandId, device_id: dev2.deviceId, command: 'stop' };
    const next = () => conn.take((m) => m.type === 'command_status');
    expect(await next()).toEqual({ ...base, status: 'queued', at: expect.any(String) });

    const hb = await heartbeat(dev2);
    expect(hb.commands.map((c: { command_id: string }) => c.command_id)).toEqual([commandId]);
    expect(await next()).toEqual({ ...base, status: 'delivered', at: expect.any(String) });

    for (const status of ['accepted', 'succeeded'] as const) {
      const res = await tp.http.post(`/v1/device/commands/${commandId}/status`, {
        token: dev2.token,
        json: { status },
      });
      expect(res.status).toBe(200);
      expect(await next()).toEqual({ ...base, status, at: expect.any(String) });
    }
    // A repeated report changes nothing and is not streamed again.
    await tp.http.post(`/v1/device/commands/${commandId}/status`, {
      token: dev2.token,
      json: { status: 'succeeded' },
    });
    await conn.fence();
    expect(conn.received.filter((r) => r.data.type === 'command_status')).toHaveLength(4);
    await conn.close();
  });
  it('pushes a control’s reversal as queued when the control is cancelled, and wakes the charger’s long poll', async () => {
    const conn = await connect({ token: tenant.token });
    expect((await subscribe(conn, { device_ids: [dev2.deviceId] })).type).toBe('subscribed');
    await heartbeat(dev2);
    const flex = await tp.http.post('/v1/operator/control/flexibility', {
      token: tenant.token,
      json: {
        target_type: 'site',
        target_ids: [tenant.siteId],
        command: 'set_power_limit',
        params: { power_limit_percent: 50, duration: 3600 },
      },
    });
    expect(flex.status).toBe(200);
    const controlId = flex.body.data.control_id as string;
    const next = () => conn.take((m) => m.type === 'command_status');
    const limit = await next();
    expect(limit).toMatchObject({ device_id: dev2.deviceId, command: 'set_power_limit', status: 'queued' });
    // The charger has the limit: cancelling the control must lift it with a reversal command.
    const hb = await heartbeat(dev2);
    expect(hb.commands.map((c: { command_id: string }) => c.command_id)).toContain(limit.command_id);
    expect(await next()).toMatchObject({ command_id: limit.command_id, status: 'delivered' });
    const applied = await tp.http.post(`/v1/device/commands/${limit.command_id}/status`, {
      token: dev2.token,
      json: { status: 'succeeded' },
    });
    expect(applied.status).toBe(200);
    expect(await next()).toMatchObject({ command_id: limit.command_id, status: 'succeeded' });

    spendRealtime(dev2.deviceId);
    const parked = tp.http.get('/v1/device/commands?wait=20', { token: dev2.token });
    await sleep(200);
    const del = await tp.http.delete(`/v1/operator/control/${controlId}`, { token: tenant.token });
    expect(del.status).toBe(200);
    const reversal = await next();
    expect(reversal).toMatchObject({
      device_id: dev2.deviceId,
      command: 'set_power_limit',
      status: 'queued',
    });
    expect(reversal.command_id).not.toBe(limit.command_id);
    // A poll that timed out instead of being woken would answer with no commands (it read none before it waited).
    const woken = await parked;
    expect(woken.status).toBe(200);
    expect(woken.body.data.commands.map((c: { command_id: string }) => c.command_id)).toEqual([
      reversal.command_id,
    ]);
    await conn.close();
  });
});

describe('slow consumer', () => {
  it('cuts a subscriber that stops reading with 4008 while a healthy one keeps receiving everything', async () => {
    const slowDev = floodDev;
    const healthy = await connect({ token: tenant.token });
    expect((await subscribe(healthy, { device_ids: [slowDev.deviceId] })).type).toBe('subscribed');
    const slow = await connect({ token: tenant.token });
    expect((await subscribe(slow, { device_ids: [slowDev.deviceId, dev.deviceId] })).type).toBe('subscribed');
    await heartbeat(slowDev);
    await healthy.take((m) => m.type === 'device_status');
    await slow.take((m) => m.type === 'device_status');

    slow.ws.pause(); // stops reading the socket: the server's buffer for it grows

    // ~500-byte messages, 500 per batch POST: far more than the 1 MiB allowance plus the kernel's buffers.
    const phase = { voltage: 230.123456789, current: 31.987654321, power: 7.3612345678 };
    const batches = 40;
    const expectedTimestamps: string[] = [];
    const started = performance.now();
    for (let b = 0; b < batches; b++) {
      const records = Array.from({ length: 500 }, (_, i) =>
        record(1 + (i % 4), { phase_details: { l1: phase, l2: phase, l3: phase } }),
      );
      spendRealtime(slowDev.deviceId);
      const res = await tp.http.post('/v1/device/telemetry/batch', {
        token: slowDev.token,
        json: { records },
      });
      expect(res.status).toBe(200);
      expect(res.body.data.accepted).toBe(500);
      expectedTimestamps.push(...records.map((r) => r.timestamp));
    }
    const publishedMs = performance.now() - started;

    // The healthy subscriber got every record, in order, while the slow one was being dealt with.
    await healthy.fence();
    const got = healthy.received.filter((r) => r.data.type === 'telemetry').map((r) => r.data.timestamp);
    expect(got).toEqual(expectedTimestamps);

    // When the slow subscriber reads again, what reaches it ends with the 4008 close, promptly.
    const resumedAt = performance.now();
    slow.ws.resume();
    const closed = await Promise.race([slow.closed, sleep(5_000).then(() => undefined)]);
    expect(closed?.code).toBe(4008);
    const drainMs = performance.now() - resumedAt;
    const slowGot = slow.received.filter((r) => r.data.type === 'telemetry');
    expect(slowGot.length).toBeLessThan(expectedTimestamps.length);
    // What it did get is a gap-free prefix: nothing is skipped before the cut.
    expect(slowGot.map((r) => r.data.timestamp)).toEqual(expectedTimestamps.slice(0, slowGot.length));
    console.log(
      `slow consumer: ${expectedTimestamps.length} messages published in ${publishedMs.toFixed(0)} ms; the paused ` +
        `subscriber got ${slowGot.length} of them and its 4008 close ${drainMs.toFixed(0)} ms after it resumed reading`,
    );

    // Its subscription set is free again: reconnecting with it is not refused as a duplicate.
    const back = await connect({ token: tenant.token });
    expect(await subscribe(back, { device_ids: [slowDev.deviceId, dev.deviceId] })).toMatchObject({
      type: 'subscribed',
    });
    await back.close();

    // The stream still works for the healthy subscriber afterwards.
    const posted = await postTelemetry(slowDev);
    expect(
      await healthy.take((m) => m.type === 'telemetry' && m.timestamp === posted.timestamp),
    ).toBeDefined();
    await healthy.close();
  });
});
