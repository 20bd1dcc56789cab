import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTenant,
  type RegisteredDevice,
  registerDevice,
  startTestPlatform,
  type TestPlatform,
} from '../helpers/platform.js';
import { sleep, streamCalls } from '../helpers/stream-client.js';

/**
 * Tenancy on the live telemetry stream (DESIGN.md §8) over real WSS: another tenant's devices and sites are
 * refused like unknown ones and never streamed, and a device that moves to another tenant's site stops
 * streaming to the old one.
 */

let tp: TestPlatform;
let tenant: Awaited<ReturnType<typeof createTenant>>;
let other: Awaited<ReturnType<typeof createTenant>>;
let dev: RegisteredDevice;
let otherDev: RegisteredDevice;
let mover: RegisteredDevice;

const { connect, subscribe, postTelemetry, heartbeat, waitForSite, closeAll } = streamCalls(() => tp);

beforeAll(async () => {
  tp = await startTestPlatform();
  tenant = await createTenant(tp, 'Stream Alpha');
  other = await createTenant(tp, 'Stream Beta');
  dev = await registerDevice(tp, 'ST-SN-1', tenant.siteId);
  otherDev = await registerDevice(tp, 'ST-SN-3', other.siteId);
  mover = await registerDevice(tp, 'ST-SN-MOVER', tenant.siteId);
  for (const d of [dev, mover]) await waitForSite(d.deviceId, tenant.siteId);
  await waitForSite(otherDev.deviceId, other.siteId);
});
afterAll(async () => {
  closeAll();
  await tp.stop();
});

describe('tenancy', () => {
  it('refuses another tenant’s device or site with 3001 and never streams it', async () => {
    const conn = await connect({ token: tenant.token });
    const unknown = await subscribe(conn, { device_ids: ['dev_doesnotexist'] });
    expect(unknown).toMatchObject({ type: 'error', code: 3001 });
    const foreign = await subscribe(conn, { device_ids: [otherDev.deviceId] });
    expect(foreign).toMatchObject({ type: 'error', code: 3001 });
    expect(foreign.message.replace(otherDev.deviceId, 'X')).toBe(
      unknown.message.replace('dev_doesnotexist', 'X'),
    );
    expect(await subscribe(conn, { device_ids: [dev.deviceId, otherDev.deviceId] })).toMatchObject({
      type: 'error',
      code: 3001,
    });
    expect(await subscribe(conn, { site_ids: [other.siteId] })).toMatchObject({ type: 'error', code: 3001 });
    expect(await subscribe(conn, { site_ids: [tenant.siteId, other.siteId] })).toMatchObject({
      type: 'error',
      code: 3001,
    });

    // The owner sees the telemetry; the refused subscriber sees nothing of it, nor of the mixed list's own device.
    const owner = await connect({ token: other.token });
    expect((await subscribe(owner, { device_ids: [otherDev.deviceId] })).type).toBe('subscribed');
    const posted = await postTelemetry(otherDev);
    await postTelemetry(dev);
    await heartbeat(otherDev, 'offline');
    expect(await owner.take((m) => m.type === 'telemetry')).toMatchObject({
      device_id: otherDev.deviceId,
      timestamp: posted.timestamp,
    });
    await conn.fence();
    expect(conn.received.map((r) => r.data).filter((m) => m.type !== 'error' && m.type !== 'pong')).toEqual(
      [],
    );
    expect(JSON.stringify(conn.received.map((r) => r.data))).not.toContain(
      `"device_id":"${otherDev.deviceId}"`,
    );
    await conn.close();
    await owner.close();
  });

  it('stops streaming a device to the old tenant once it moves to another tenant’s site', async () => {
    const byDevice = await connect({ token: tenant.token });
    expect((await subscribe(byDevice, { device_ids: [mover.deviceId] })).type).toBe('subscribed');
    const bySite = await connect({ token: tenant.token });
    expect((await subscribe(bySite, { site_ids: [tenant.siteId] })).type).toBe('subscribed');
    const newOwner = await connect({ token: other.token });
    expect((await subscribe(newOwner, { site_ids: [other.siteId] })).type).toBe('subscribed');

    const before = await postTelemetry(mover);
    for (const c of [byDevice, bySite]) {
      expect(await c.take((m) => m.type === 'telemetry')).toMatchObject({ timestamp: before.timestamp });
    }

    expect(await tp.store.assignDevice(mover.deviceId, other.siteId)).toBe(true);
    // Keep publishing until the new owner's site subscription starts receiving the charger.
    let firstSeenByNewOwner: string | undefined;
    const deadline = Date.now() + 5_000;
    while (!firstSeenByNewOwner && Date.now() < deadline) {
      await postTelemetry(mover);
      await newOwner.fence();
      firstSeenByNewOwner = newOwner.received.find(
        (r) => r.data.type === 'telemetry' && r.data.device_id === mover.deviceId,
      )?.data.timestamp;
      if (!firstSeenByNewOwner) await sleep(100);
    }
    expect(firstSeenByNewOwner).toBeDefined();
    const after: string[] = [];
    for (let i = 0; i < 3; i++) after.push((await postTelemetry(mover)).timestamp);
    expect((await newOwner.take((m) => m.type === 'telemetry' && m.timestamp === after[2])).site_id).toBe(
      other.siteId,
    );

    for (const c of [byDevice, bySite]) {
      await c.fence();
      const seen = c.received
        .filter((r) => r.data.type === 'telemetry' && r.data.device_id === mover.deviceId)
        .map((r) => r.data.timestamp as string);
      expect(seen.every((ts) => ts < firstSeenByNewOwner!)).toBe(true);
      for (const ts of after) expect(seen).not.toContain(ts);
    }
    const rest = await tp.http.get(`/v1/operator/devices/${mover.deviceId}`, { token: tenant.token });
    expect(rest.status).toBe(404);
    for (const c of [byDevice, bySite, newOwner]) await c.close();
  });
});
