import { describe, expect, it } from 'vitest';
import { expectValidation } from '../helpers/device-calls.js';
import { furtherCalls, isoAt, okData } from '../helpers/further-calls.js';
import { type RegisteredDevice, registerDevice } from '../helpers/platform.js';
import { platformPerFile } from '../helpers/platform-per-file.js';

/**
 * The further endpoints of DESIGN.md §9 over real HTTPS and SQLite: telemetry batches and the live state they
 * leave, and firmware status reports. One platform for the file; every test has its own tenant and chargers.
 */

const tp = platformPerFile();

const { platformNow, isoNow, sn, tenant, batch, deviceView } = furtherCalls(() => tp);

describe('POST /v1/device/telemetry/batch', () => {
  const rec = (ms: number, overrides: Record<string, unknown> = {}) => ({
    timestamp: isoAt(ms),
    connector_id: 1,
    state: 'charging',
    voltage: 230,
    current: 16,
    power: 11,
    energy_delivered: 5,
    soc: 50,
    ...overrides,
  });

  it('refuses 501 records: 400/1001; accepts 500', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const base = platformNow() - 3_600_000;
    const records = Array.from({ length: 501 }, (_, i) => rec(base + i * 5_000));
    expectValidation(await batch(d, records), 'records', '[array of 501]');
    expect(await okData(batch(d, records.slice(0, 500)))).toEqual({ accepted: 500, duplicates: 0 });
    expectValidation(await batch(d, []), 'records', '[array of 0]');
    expectValidation(await batch(d, [rec(base, { state: 'discharging', power: 3 })]), 'records.0.power', 3);
  });

  it('counts replayed records as duplicates', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const base = platformNow() - 60_000;
    const three = [rec(base), rec(base + 5_000), rec(base + 10_000)];
    expect(await okData(batch(d, three))).toEqual({ accepted: 3, duplicates: 0 });
    expect(await okData(batch(d, three))).toEqual({ accepted: 0, duplicates: 3 });
    expect(await okData(batch(d, [...three.slice(1), rec(base + 15_000)]))).toEqual({
      accepted: 1,
      duplicates: 2,
    });
    // Same timestamp on another connector is a different record.
    expect(await okData(batch(d, [rec(base, { connector_id: 2 })]))).toEqual({ accepted: 1, duplicates: 0 });
  });

  it('the connector live state reflects the newest record, even when an older batch arrives later', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const now = platformNow();
    // Newest first inside the batch: the order within a batch does not matter either.
    expect(
      await okData(
        batch(d, [
          rec(now - 10_000, { soc: 80, power: 11.5, energy_delivered: 9.5 }),
          rec(now - 20_000, { soc: 78, power: 11 }),
        ]),
      ),
    ).toEqual({ accepted: 2, duplicates: 0 });
    // The backlog of an outage, older than what is already known.
    expect(
      await okData(
        batch(d, [
          rec(now - 300_000, { state: 'idle', power: 0, soc: 40, energy_delivered: 0 }),
          rec(now - 200_000, { state: 'fault', power: 0, soc: 41 }),
        ]),
      ),
    ).toEqual({ accepted: 2, duplicates: 0 });
    const view = await deviceView(t, d);
    expect(view.connectors[0]).toEqual({
      connector_id: 1,
      status: 'charging',
      power: 11.5,
      voltage: 230,
      current: 16,
      energy_delivered: 9.5,
      soc: 80,
      last_telemetry_time: isoAt(now - 10_000),
      max_power_kw: 22,
      v2g_capable: false,
      available: true,
    });
    // A newer record does move it.
    expect(await okData(batch(d, [rec(now - 1_000, { state: 'idle', power: 0, soc: 81 })]))).toEqual({
      accepted: 1,
      duplicates: 0,
    });
    expect((await deviceView(t, d)).connectors[0]).toMatchObject({
      status: 'idle',
      soc: 81,
      last_telemetry_time: isoAt(now - 1_000),
    });
  });
});

describe('POST /v1/device/firmware/status', () => {
  const report = (d: RegisteredDevice, body: unknown) =>
    tp.http.post('/v1/device/firmware/status', { token: d.token, json: body });

  it('installed with a version updates the device’s firmware_version; other states do not', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    expect((await deviceView(t, d)).firmware_version).toBe('1.0.0');
    expect(
      await okData(report(d, { status: 'downloading', version: '2.0.0', progress: 40, timestamp: isoNow() })),
    ).toEqual({ status: 'downloading' });
    expect(await okData(report(d, { status: 'installing', version: '2.0.0', timestamp: isoNow() }))).toEqual({
      status: 'installing',
    });
    expect((await deviceView(t, d)).firmware_version).toBe('1.0.0');
    expect(await okData(report(d, { status: 'installed', version: '2.0.0', timestamp: isoNow() }))).toEqual({
      status: 'installed',
    });
    expect((await deviceView(t, d)).firmware_version).toBe('2.0.0');
    // Installed without a version, or a failed upgrade to another version: unchanged.
    expect(await okData(report(d, { status: 'installed', timestamp: isoNow() }))).toEqual({
      status: 'installed',
    });
    expect(
      await okData(
        report(d, { status: 'failed', version: '3.0.0', message: 'bad image', timestamp: isoNow() }),
      ),
    ).toEqual({ status: 'failed' });
    expect((await deviceView(t, d)).firmware_version).toBe('2.0.0');
  });

  it('accepts every detailed state of DESIGN.md §19 beside the six, and answers each with its status', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    for (const status of [
      'idle',
      'failed',
      'download_scheduled',
      'downloading',
      'downloaded',
      'download_failed',
      'signature_verified',
      'invalid_signature',
      'install_scheduled',
      'installing',
      'install_rebooting',
      'install_failed',
      'install_verification_failed',
      'rolled_back',
    ]) {
      expect(
        await okData(report(d, { status, version: '2.0.0', update_id: 'upd_1', timestamp: isoNow() })),
      ).toEqual({ status });
    }
    expect((await deviceView(t, d)).firmware_version).toBe('1.0.0');
  });

  it('installed with an update_id leaves the versions (the update says agent or firmware); without, firmware', async () => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    const at = isoNow();
    expect(
      await okData(report(d, { status: 'installed', version: '2.0.0', update_id: 'upd_2', timestamp: at })),
    ).toEqual({ status: 'installed' });
    // Both as registered.
    expect(await deviceView(t, d)).toMatchObject({ firmware_version: '1.0.0', agent_version: '1.0.0' });
    expect(
      await okData(report(d, { status: 'installed', version: '2.0.1', report_id: 'r1', timestamp: at })),
    ).toEqual({ status: 'installed' });
    expect((await deviceView(t, d)).firmware_version).toBe('2.0.1');
  });

  it.each([
    [{ status: 'done', timestamp: '2025-01-01T00:00:00Z' }, 'status', 'done'],
    [{ timestamp: '2025-01-01T00:00:00Z' }, 'status', null],
    [{ status: 'installed', version: '9.9.9' }, 'timestamp', null],
    [{ status: 'downloading', progress: 101, timestamp: '2025-01-01T00:00:00Z' }, 'progress', 101],
    [{ status: 'installed', version: '', timestamp: '2025-01-01T00:00:00Z' }, 'version', ''],
    [
      { status: 'installed', version: '9', report_id: '', timestamp: '2025-01-01T00:00:00Z' },
      'report_id',
      '',
    ],
    [
      { status: 'installed', version: '9', update_id: 'a b', timestamp: '2025-01-01T00:00:00Z' },
      'update_id',
      'a b',
    ],
    [{ status: 'rolled_back ', timestamp: '2025-01-01T00:00:00Z' }, 'status', 'rolled_back '],
  ])('refuses %j: 400/1001, firmware_version unchanged', async (body, field, value) => {
    const t = await tenant();
    const d = await registerDevice(tp, sn(), t.siteId);
    expectValidation(await report(d, body), field, value);
    expect((await deviceView(t, d)).firmware_version).toBe('1.0.0');
  });
});

// POST /v1/device/secret/rotate (two-phase, DESIGN.md §17): device-secret-rotation.test.ts.
