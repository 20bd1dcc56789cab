import { describe, expect, it } from 'vitest';
import { deviceCalls, expectValidation } from '../helpers/device-calls.js';
import { expectError, registerDevice } from '../helpers/platform.js';
import { platformPerFile } from '../helpers/platform-per-file.js';

/**
 * The charger-side surface (DESIGN.md §3, §7) over real HTTPS and SQLite: telemetry and the connector live state
 * it shows, and liveness. One platform for the file; every test uses its own tenant and serial numbers. The fake
 * clock only moves forward.
 */

const tp = platformPerFile();

const { advance, platformNow, isoNow, sn, tenant, heartbeat, telemetry, operatorDevice } = deviceCalls(
  () => tp,
);

describe('POST /v1/device/telemetry', () => {
  const base = (overrides: Record<string, unknown> = {}) => ({
    timestamp: isoNow(),
    connector_id: 1,
    state: 'charging',
    voltage: 230,
    current: 16,
    power: 11,
    energy_delivered: 4.25,
    soc: 55,
    temperature: 31.5,
    ...overrides,
  });

  it('updates the connector live state shown on the operator device endpoint', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const ts = new Date(platformNow() - 1_000).toISOString();
    const res = await telemetry(
      d.token,
      base({
        timestamp: ts,
        phase_details: { l1: { voltage: 230, current: 16, power: 3.7 }, l2: { voltage: 231 } },
      }),
    );
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ code: 0, message: 'success', data: { accepted: 1 } });

    const view = await operatorDevice(t.token, d.deviceId);
    expect(view.status).toBe('online');
    expect(view.connectors).toEqual([
      {
        connector_id: 1,
        status: 'charging',
        power: 11,
        voltage: 230,
        current: 16,
        energy_delivered: 4.25,
        soc: 55,
        temperature: 31.5,
        last_telemetry_time: ts,
        max_power_kw: 22,
        v2g_capable: false,
        available: true,
      },
      {
        connector_id: 2,
        status: 'unavailable',
        energy_delivered: 0,
        max_power_kw: 50,
        v2g_capable: true,
        available: true,
      },
    ]);
  });

  it('keeps the newest state when an older record arrives late', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const newer = new Date(platformNow() - 1_000).toISOString();
    const older = new Date(platformNow() - 60_000).toISOString();
    expect((await telemetry(d.token, base({ timestamp: newer, soc: 70 }))).status).toBe(200);
    expect(
      (await telemetry(d.token, base({ timestamp: older, state: 'idle', power: 0, soc: 40 }))).status,
    ).toBe(200);
    const view = await operatorDevice(t.token, d.deviceId);
    expect(view.connectors[0]).toMatchObject({ status: 'charging', soc: 70, last_telemetry_time: newer });
  });

  it('learns a connector it was not told about from telemetry', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId, [
      { connector_id: 1, max_power_kw: 22, v2g_capable: false },
    ]);
    const ts = isoNow();
    expect((await telemetry(d.token, { timestamp: ts, connector_id: 3, state: 'idle' })).status).toBe(200);
    const view = await operatorDevice(t.token, d.deviceId);
    expect(view.connectors).toHaveLength(2);
    expect(view.connectors[1]).toEqual({
      connector_id: 3,
      status: 'idle',
      energy_delivered: 0,
      last_telemetry_time: ts,
      v2g_capable: false,
      available: true,
    });
  });

  it('accepts a discharging record with negative power and shows it', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const res = await telemetry(
      d.token,
      base({ connector_id: 2, state: 'discharging', power: -7.4, current: -32, soc: 64 }),
    );
    expect(res.status).toBe(200);
    const view = await operatorDevice(t.token, d.deviceId);
    expect(view.connectors[1]).toMatchObject({
      connector_id: 2,
      status: 'discharging',
      power: -7.4,
      current: -32,
      soc: 64,
      v2g_capable: true,
      available: true,
    });
  });

  it.each([
    ['soc', { soc: 101 }, 101],
    ['soc', { soc: -1 }, -1],
    ['soc', { soc: 55.5 }, 55.5],
    ['connector_id', { connector_id: 0 }, 0],
    ['connector_id', { connector_id: 1.5 }, 1.5],
    ['connector_id', { connector_id: '1' }, '1'],
    ['state', { state: 'unavailable' }, 'unavailable'],
    ['state', { state: 'boosting' }, 'boosting'],
    ['timestamp', { timestamp: 'not-a-date' }, 'not-a-date'],
    ['timestamp', { timestamp: '2025-02-30T10:00:00Z' }, '2025-02-30T10:00:00Z'],
    ['timestamp', { timestamp: '2025-06-01T10:00:00' }, '2025-06-01T10:00:00'],
    ['power', { state: 'discharging', power: 7.4 }, 7.4],
    ['power', { state: 'discharging', power: 0 }, 0],
    ['voltage', { voltage: -1 }, -1],
    ['temperature', { temperature: 500 }, 500],
    ['phase_details.l1.voltage', { phase_details: { l1: { voltage: 'high' } } }, 'high'],
  ])('refuses %s in %j: 400/1001 naming the field and value', async (field, overrides, value) => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    expectValidation(await telemetry(d.token, base(overrides)), field, value);
  });

  it('refuses discharging without power: 400/1001 on power', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const body: Record<string, unknown> = base({ state: 'discharging' });
    delete body.power;
    expectValidation(await telemetry(d.token, body), 'power', null);
  });

  it.each(['timestamp', 'connector_id', 'state'])('refuses a record without %s: 400/1001', async (field) => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const body: Record<string, unknown> = base();
    delete body[field];
    expectValidation(await telemetry(d.token, body), field, null);
  });

  it('a refused record changes nothing', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    expectValidation(await telemetry(d.token, base({ soc: 101 })), 'soc', 101);
    const view = await operatorDevice(t.token, d.deviceId);
    expect(view.connectors[0]).toEqual({
      connector_id: 1,
      status: 'unavailable',
      energy_delivered: 0,
      max_power_kw: 22,
      v2g_capable: false,
      available: true,
    });
  });
});

describe('liveness (DESIGN.md §7)', () => {
  it('is offline until the first authenticated request, online after it, offline 90 s after the last one', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    // Registration and token exchange are not authenticated requests.
    const fresh = await operatorDevice(t.token, d.deviceId);
    expect(fresh.status).toBe('offline');

    expect(
      (await telemetry(d.token, { timestamp: isoNow(), connector_id: 1, state: 'charging', power: 11 }))
        .status,
    ).toBe(200);
    const online = await operatorDevice(t.token, d.deviceId);
    expect(online.status).toBe('online');
    expect(online.connectors[0].status).toBe('charging');

    advance(80_000);
    const still = await operatorDevice(t.token, d.deviceId);
    expect(still.status).toBe('online');
    expect(still.connectors[0].status).toBe('charging');

    advance(11_000);
    const gone = await operatorDevice(t.token, d.deviceId);
    expect(gone.status).toBe('offline');
    expect(gone.connectors.map((c: { status: string }) => c.status)).toEqual(['unavailable', 'unavailable']);
    // The last reported values stay visible.
    expect(gone.connectors[0].power).toBe(11);

    expect((await heartbeat(d.token)).status).toBe(200);
    expect((await operatorDevice(t.token, d.deviceId)).status).toBe('online');
  });

  it('an unauthenticated request does not make a device online', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    // Unauthenticated: does not make the device online.
    expectError(
      await tp.http.post('/v1/device/heartbeat', {
        json: { timestamp: isoNow(), status: 'online', fault_code: 0 },
      }),
      401,
      2001,
    );
    expect((await operatorDevice(t.token, d.deviceId)).status).toBe('offline');
  });
});
