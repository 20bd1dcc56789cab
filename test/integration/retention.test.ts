import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadOrCreatePlatformKeys } from '../../platform/platform-keys.js';
import { createSqliteStore, DATABASE_FILE } from '../../platform/storage/sqlite/store.js';
import type { Store } from '../../platform/storage/store.js';

/**
 * Retention on the real store with an injected clock: years pass in milliseconds. Raw telemetry goes after
 * 30 days while its energy stays in the rollups; events and finished commands and controls after 180 days,
 * unfinished commands never; rollups after 1,830 days; charging records stay.
 */
const DAY = 86_400_000;
const T0 = Date.UTC(2026, 0, 5, 10);
const iso = (ms: number) => new Date(ms).toISOString();

let dir: string;
let store: Store;
let clock = T0;
let deviceId: string;
let peek: Database.Database;
const count = (table: string) =>
  (peek.prepare(`SELECT COUNT(*) AS n FROM ${table}`).get() as { n: number }).n;

/** An hour at 12 kW from `from`, a sample every 10 s: 12 kWh. */
const hourAt = (from: number) =>
  Array.from({ length: 361 }, (_, i) => ({
    timestamp: iso(from + i * 10_000),
    connector_id: 1,
    state: 'charging' as const,
    power: 12,
  }));
const energyOfHour = async (from: number) =>
  (await store.energyBuckets([deviceId], from, from + 3_600_000, 3_600_000))[0]?.imported_kwh ?? 0;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cp-retention-'));
  store = createSqliteStore(dir, loadOrCreatePlatformKeys(dir), () => clock);
  peek = new Database(join(dir, DATABASE_FILE), { readonly: true });
  const op = await store.createOperator('A');
  const site = await store.createSite({ operator_id: op.operator_id, name: 's', timezone: 'UTC' });
  const reg = await store.registerDevice(
    { sn: 'SN-RET', model: 'M', manufacturer: 'X', firmware_version: '1' },
    { registration: 'open', defaultSiteId: site.site_id },
  );
  if (reg.kind !== 'registered') throw new Error(reg.kind);
  deviceId = reg.device.device_id;

  await store.recordTelemetry(deviceId, hourAt(T0), T0);
  await store.insertEvents(
    deviceId,
    [
      {
        event_id: 'e1',
        kind: 'fault',
        severity: 'error',
        connector_id: 1,
        ts_ms: T0,
        message: null,
        data: null,
      },
    ],
    T0,
  );
  const [done, pending] = await store.enqueueCommands(
    [
      { device_id: deviceId, command: 'stop', params: { connector_id: 1 }, expiry_ms: T0 + 60_000 },
      { device_id: deviceId, command: 'stop', params: { connector_id: 1 }, expiry_ms: T0 + 400 * DAY },
    ],
    T0,
  );
  await store.takePendingCommands(deviceId, T0);
  await store.reportCommandStatus(deviceId, done!.command_id, { status: 'succeeded' }, T0 + 1000);
  expect(pending).toBeDefined();
  await store.insertChargingRecords([
    {
      record_id: 'r1',
      device_id: deviceId,
      connector_id: 1,
      start_time: iso(T0),
      end_time: iso(T0 + 3_600_000),
      energy: 12,
    },
  ]);
});
afterAll(async () => {
  peek.close();
  await store.close();
  await rm(dir, { recursive: true, force: true });
});

describe('retention', () => {
  it('keeps everything inside its window', async () => {
    clock = T0 + 29 * DAY;
    await store.runMaintenance();
    expect(count('telemetry')).toBe(361);
    expect(count('device_events')).toBe(1);
    expect(count('commands')).toBe(2);
    expect(store.maintenanceStats().pruned.telemetry).toBe(0);
  });

  it('after 30 days drops raw telemetry but not its energy, and keeps the newest row', async () => {
    clock = T0 + 31 * DAY;
    await store.runMaintenance();
    // Every row is older than 30 days; the newest stays so that row ids never restart.
    expect(count('telemetry')).toBe(1);
    expect(store.maintenanceStats().pruned.telemetry).toBe(360);
    expect(await energyOfHour(T0)).toBeCloseTo(12, 9);
    // New telemetry arrives; now the old newest row goes too.
    await store.recordTelemetry(deviceId, hourAt(clock), clock);
    await store.runMaintenance();
    expect(count('telemetry')).toBe(361);
    expect(await energyOfHour(T0)).toBeCloseTo(12, 9);
    expect(await energyOfHour(clock)).toBeCloseTo(12, 9);
    expect(store.maintenanceStats().retentionPasses).toBe(3);
  });

  it('a late record from before the window does not recompute buckets from pruned neighbours', async () => {
    await store.recordTelemetry(
      deviceId,
      [{ timestamp: iso(T0 + 30 * 60_000 + 5_000), connector_id: 1, state: 'charging', power: 50 }],
      clock,
    );
    expect(await energyOfHour(T0)).toBeCloseTo(12, 9);
  });

  it('after 180 days drops events and finished commands, never an unfinished one; records stay', async () => {
    clock = T0 + 181 * DAY;
    await store.runMaintenance();
    expect(count('device_events')).toBe(0);
    expect(count('commands')).toBe(1);
    expect(count('command_history')).toBeGreaterThan(0);
    expect((peek.prepare('SELECT status FROM commands').get() as { status: string }).status).toBe(
      'delivered',
    );
    expect(count('charging_records')).toBe(1);
    expect(store.maintenanceStats().pruned).toMatchObject({ device_events: 1, commands: 1 });
    expect(await energyOfHour(T0)).toBeCloseTo(12, 9);
  });

  it('after 1,830 days drops the rollups', async () => {
    clock = T0 + 1831 * DAY;
    await store.runMaintenance();
    expect(await energyOfHour(T0)).toBe(0);
    expect(store.maintenanceStats().pruned.energy_rollups).toBeGreaterThan(0);
    expect(count('charging_records')).toBe(1);
  });
});
