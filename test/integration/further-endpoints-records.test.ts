import { describe, expect, it } from 'vitest';
import { expectValidation } from '../helpers/device-calls.js';
import { furtherCalls, isoAt, okData } from '../helpers/further-calls.js';
import { expectError, type RegisteredDevice, registerDevice } from '../helpers/platform.js';
import { platformPerFile } from '../helpers/platform-per-file.js';

/**
 * The further endpoints of DESIGN.md §9 over real HTTPS and SQLite: a charger's events and charging records,
 * uploaded idempotently and read by the operator. One platform for the file; every test has its own tenant and
 * chargers.
 */

const tp = platformPerFile();

const { platformNow, isoNow, sn, tenant, get } = furtherCalls(() => tp);

describe('POST /v1/device/events and GET /v1/operator/devices/{device_id}/events', () => {
  const post = (d: RegisteredDevice, events: unknown[]) =>
    tp.http.post('/v1/device/events', { token: d.token, json: { events } });

  it('stores events, lists them newest first by timestamp, ignores repeated event_ids', async () => {
    const t = await tenant();
    const other = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const base = platformNow() - 60_000;
    const received = { before: platformNow(), after: 0 };
    const first = await okData(
      post(d, [
        { event_id: 'e1', kind: 'boot', timestamp: isoAt(base) },
        {
          event_id: 'e3',
          kind: 'fault_raised',
          severity: 'error',
          timestamp: isoAt(base + 20_000),
          connector_id: 2,
          message: 'ground fault',
          data: { code: 17, latched: true, note: null },
        },
        {
          event_id: 'e2',
          kind: 'vehicle_plugged',
          severity: 'info',
          connector_id: 1,
          timestamp: isoAt(base + 10_000),
        },
      ]),
    );
    received.after = platformNow();
    expect(first).toEqual({ accepted: 3, duplicates: 0 });

    const page = await okData(get(t, `/v1/operator/devices/${d.deviceId}/events`));
    expect(page).toMatchObject({ total: 3, page: 1, size: 20 });
    expect(page.items.map((e: { event_id: string }) => e.event_id)).toEqual(['e3', 'e2', 'e1']);
    expect(page.items[0]).toEqual({
      device_id: d.deviceId,
      event_id: 'e3',
      kind: 'fault_raised',
      severity: 'error',
      timestamp: isoAt(base + 20_000),
      received_at: expect.any(String),
      connector_id: 2,
      message: 'ground fault',
      data: { code: 17, latched: true, note: null },
    });
    // Severity defaults to info; optional fields are left out, not null.
    expect(page.items[2]).toEqual({
      device_id: d.deviceId,
      event_id: 'e1',
      kind: 'boot',
      severity: 'info',
      timestamp: isoAt(base),
      received_at: expect.any(String),
    });
    const rx = Date.parse(page.items[2].received_at);
    expect(rx).toBeGreaterThanOrEqual(received.before);
    expect(rx).toBeLessThanOrEqual(received.after);

    // A replay (the agent's outbox) with one new event.
    expect(
      await okData(
        post(d, [
          { event_id: 'e2', kind: 'vehicle_unplugged', timestamp: isoAt(base + 50_000) },
          { event_id: 'e4', kind: 'session_started', timestamp: isoAt(base + 30_000) },
        ]),
      ),
    ).toEqual({ accepted: 1, duplicates: 1 });
    const after = await okData(get(t, `/v1/operator/devices/${d.deviceId}/events?size=2`));
    expect(after).toMatchObject({ total: 4, size: 2 });
    expect(after.items.map((e: { event_id: string }) => e.event_id)).toEqual(['e4', 'e3']);
    const p2 = await okData(get(t, `/v1/operator/devices/${d.deviceId}/events?size=2&page=2`));
    expect(p2.items.map((e: { event_id: string; kind: string }) => [e.event_id, e.kind])).toEqual([
      ['e2', 'vehicle_plugged'],
      ['e1', 'boot'],
    ]);

    // Another tenant cannot read them.
    expectError(await get(other, `/v1/operator/devices/${d.deviceId}/events`), 404, 3001);
    expectValidation(await get(t, `/v1/operator/devices/${d.deviceId}/events?page=0`), 'page', '0');
  });

  it('keeps event ids per charger: another charger may use the same id', async () => {
    const t = await tenant();
    const a = await registerDevice(tp, sn(), t.siteId);
    const b = await registerDevice(tp, sn(), t.siteId);
    expect(await okData(post(a, [{ event_id: 'boot-1', kind: 'boot', timestamp: isoNow() }]))).toEqual({
      accepted: 1,
      duplicates: 0,
    });
    expect(await okData(post(b, [{ event_id: 'boot-1', kind: 'boot', timestamp: isoNow() }]))).toEqual({
      accepted: 1,
      duplicates: 0,
    });
  });

  it.each([
    [[{ event_id: 'x', kind: 'Bad Kind', timestamp: '2024-01-01T00:00:00Z' }], 'events.0.kind', 'Bad Kind'],
    [
      [{ event_id: 'x', kind: 'boot', severity: 'fatal', timestamp: '2024-01-01T00:00:00Z' }],
      'events.0.severity',
      'fatal',
    ],
    [[{ event_id: 'x', kind: 'boot' }], 'events.0.timestamp', null],
    [[{ event_id: 'a b', kind: 'boot', timestamp: '2024-01-01T00:00:00Z' }], 'events.0.event_id', 'a b'],
    [[], 'events', '[array of 0]'],
  ])('refuses %j: 400/1001 and stores nothing', async (events, field, value) => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const mixed = [{ event_id: 'good', kind: 'boot', timestamp: isoNow() }, ...events];
    const res = await post(d, events.length === 0 ? [] : mixed);
    expectValidation(res, events.length === 0 ? field : field.replace('events.0', 'events.1'), value);
    expect((await okData(get(t, `/v1/operator/devices/${d.deviceId}/events`))).total).toBe(0);
  });
});

describe('POST /v1/device/charging-records', () => {
  const record = (id: string, startMs: number, overrides: Record<string, unknown> = {}) => ({
    record_id: id,
    connector_id: 1,
    start_time: isoAt(startMs),
    end_time: isoAt(startMs + 3_600_000),
    energy: 18.25,
    max_power: 11,
    avg_power: 10.2,
    cost: 6.4,
    meter_start: 1200.5,
    meter_end: 1218.75,
    vehicle_info: { vin: 'WVWZZZ1JZXW000001', soc_start: 20, soc_end: 80 },
    ...overrides,
  });
  const upload = (d: RegisteredDevice, records: unknown[]) =>
    tp.http.post('/v1/device/charging-records', { token: d.token, json: { records } });

  it('is idempotent on record_id, and what was uploaded is exactly what the operator reads', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const t0 = Date.parse('2025-02-01T08:00:00.000Z');
    const r1 = record('rec-1', t0);
    const r2 = record('rec-2', t0 + 4 * 3_600_000, {
      connector_id: 2,
      vehicle_info: undefined,
      cost: undefined,
    });
    const minimal = {
      record_id: 'rec-3',
      connector_id: 1,
      start_time: '2025-02-01T12:30:00+01:00',
      end_time: '2025-02-01T12:45:00+01:00',
      energy: 0,
    };
    expect(await okData(upload(d, [r1, r2, minimal]))).toEqual({ accepted: 3, duplicates: 0 });
    expect(await okData(upload(d, [r1, r2]))).toEqual({ accepted: 0, duplicates: 2 });
    // The first upload wins: a changed replay of a stored record_id is ignored.
    expect(await okData(upload(d, [{ ...r1, energy: 99 }]))).toEqual({ accepted: 0, duplicates: 1 });

    const page = await okData(get(t, `/v1/operator/charging-records?device_id=${d.deviceId}`));
    const { vehicle_info: _v, cost: _c, ...r2Stored } = r2;
    expect(page).toEqual({
      total: 3,
      page: 1,
      size: 20,
      items: [
        { ...r2Stored, device_id: d.deviceId },
        {
          record_id: 'rec-3',
          device_id: d.deviceId,
          connector_id: 1,
          start_time: '2025-02-01T11:30:00.000Z',
          end_time: '2025-02-01T11:45:00.000Z',
          energy: 0,
        },
        { ...r1, device_id: d.deviceId },
      ],
    });
  });

  it('keeps record ids per charger: another charger’s same id is a new record', async () => {
    const t = await tenant();
    const a = await registerDevice(tp, sn(), t.siteId);
    const b = await registerDevice(tp, sn(), t.siteId);
    const t0 = Date.parse('2025-03-01T08:00:00.000Z');
    expect(await okData(upload(a, [record('same', t0)]))).toEqual({ accepted: 1, duplicates: 0 });
    expect(await okData(upload(b, [record('same', t0)]))).toEqual({ accepted: 1, duplicates: 0 });
    const page = await okData(get(t, '/v1/operator/charging-records'));
    expect(page.items.map((r: { device_id: string }) => r.device_id).sort()).toEqual(
      [a.deviceId, b.deviceId].sort(),
    );
  });

  it.each([
    [
      'end before start',
      { end_time: '2025-01-01T07:00:00.000Z' },
      'records.0.end_time',
      '2025-01-01T07:00:00.000Z',
    ],
    ['meter_end below meter_start', { meter_end: 1000 }, 'records.0.meter_end', 1000],
    ['negative energy', { energy: -1 }, 'records.0.energy', -1],
    ['soc over 100', { vehicle_info: { soc_end: 101 } }, 'records.0.vehicle_info.soc_end', 101],
    ['connector 0', { connector_id: 0 }, 'records.0.connector_id', 0],
  ])('refuses %s: 400/1001, nothing stored', async (_name, overrides, field, value) => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const bad = record('bad', Date.parse('2025-01-01T08:00:00.000Z'), overrides);
    expectValidation(await upload(d, [bad]), field, value);
    expect((await okData(get(t, `/v1/operator/charging-records?device_id=${d.deviceId}`))).total).toBe(0);
  });
});
