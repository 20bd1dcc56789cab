import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createSqliteStore } from '../../../platform/storage/backends.js';
import { DATABASE_FILE } from '../../../platform/storage/sqlite/store.js';
import type { Store } from '../../../platform/storage/store.js';
import { registerOnStore } from '../../helpers/sealed-writes.js';

const T0 = Date.parse('2026-03-01T12:00:00Z');
const at = (s: number) => new Date(T0 + s * 1000).toISOString();

describe("connectors' live state", () => {
  let dir: string;
  const open: Store[] = [];
  const store = () => {
    const s = createSqliteStore(dir);
    open.push(s);
    return s;
  };
  const table = () => {
    const db = new Database(path.join(dir, DATABASE_FILE), { readonly: true });
    try {
      return db.prepare('SELECT connector_id, power, last_telemetry_ms FROM connectors ORDER BY 1').all();
    } finally {
      db.close();
    }
  };
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'live-state-'));
  });
  afterEach(async () => {
    for (const s of open.splice(0).reverse()) await s.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('reads current at once, reaches the table later, and survives a crash before it did', async () => {
    const a = store();
    const reg = await registerOnStore(
      a,
      {
        sn: 'SN-LIVE',
        model: 'M',
        manufacturer: 'A',
        firmware_version: '1',
        connectors: [{ connector_id: 1, max_power_kw: 22, v2g_capable: true }],
      },
      { registration: 'open' },
    );
    if (reg.kind !== 'registered') throw new Error(reg.kind);
    const id = reg.device.device_id;
    await a.recordTelemetry(id, [{ timestamp: at(10), connector_id: 1, state: 'charging', power: 7 }], T0);
    await a.recordTelemetry(id, [{ timestamp: at(20), connector_id: 2, state: 'charging', power: 3 }], T0);
    // An older record arriving late does not become the live state.
    await a.recordTelemetry(id, [{ timestamp: at(5), connector_id: 1, state: 'idle', power: 0 }], T0);
    const expected = [
      expect.objectContaining({ connector_id: 1, v2g_capable: true, max_power_kw: 22, power: 7 }),
      // Learned from telemetry, not declared: not V2G-capable.
      expect.objectContaining({ connector_id: 2, v2g_capable: false, max_power_kw: null, power: 3 }),
    ];
    expect(await a.listConnectors(id)).toEqual(expected);
    expect(await a.getConnector(id, 2)).toEqual(expected[1]);
    expect(await a.listConnectorsOf([id])).toEqual(expected);
    // Not yet written out: the table still holds what was declared only.
    expect(table()).toEqual([{ connector_id: 1, power: null, last_telemetry_ms: null }]);

    // The process dies here (a is never closed before b opens): b replays the telemetry stored since.
    const b = store();
    expect(await b.listConnectors(id)).toEqual(expected);
    await b.close();
    open.splice(open.indexOf(b), 1);
    expect(table()).toEqual([
      { connector_id: 1, power: 7, last_telemetry_ms: T0 + 10_000 },
      { connector_id: 2, power: 3, last_telemetry_ms: T0 + 20_000 },
    ]);
    // And a store that finds it all written replays nothing and reads the same.
    expect(await store().listConnectors(id)).toEqual(expected);
  });

  it('does not let a late, older record hide the state already written out', async () => {
    const a = store();
    const reg = await registerOnStore(
      a,
      { sn: 'SN-LATE', model: 'M', manufacturer: 'A', firmware_version: '1' },
      { registration: 'open' },
    );
    if (reg.kind !== 'registered') throw new Error(reg.kind);
    const id = reg.device.device_id;
    await a.recordTelemetry(id, [{ timestamp: at(20), connector_id: 1, state: 'charging', power: 9 }], T0);
    await a.close();
    open.splice(open.indexOf(a), 1);
    expect(table()).toEqual([{ connector_id: 1, power: 9, last_telemetry_ms: T0 + 20_000 }]);

    // An outbox replayed after an outage: stored, but older than the state the table holds.
    const b = store();
    expect(
      await b.recordTelemetry(id, [{ timestamp: at(5), connector_id: 1, state: 'idle', power: 0 }], T0),
    ).toBe(1);
    const current = expect.objectContaining({
      connector_id: 1,
      state: 'charging',
      power: 9,
      last_telemetry_ms: T0 + 20_000,
    });
    expect(await b.listConnectors(id)).toEqual([current]);
    expect(await b.getConnector(id, 1)).toEqual(current);
    await b.close();
    open.splice(open.indexOf(b), 1);
    expect(table()).toEqual([{ connector_id: 1, power: 9, last_telemetry_ms: T0 + 20_000 }]);
  });

  it('is written out every 5 s while the platform runs', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    try {
      const s = store();
      const reg = await registerOnStore(
        s,
        { sn: 'SN-TICK', model: 'M', manufacturer: 'A', firmware_version: '1' },
        { registration: 'open' },
      );
      if (reg.kind !== 'registered') throw new Error(reg.kind);
      await s.recordTelemetry(
        reg.device.device_id,
        [{ timestamp: at(1), connector_id: 1, state: 'charging', power: 11 }],
        T0,
      );
      expect(table()).toEqual([]);
      vi.advanceTimersByTime(5_000);
      await vi.waitFor(() =>
        expect(table()).toEqual([{ connector_id: 1, power: 11, last_telemetry_ms: T0 + 1_000 }]),
      );
    } finally {
      vi.useRealTimers();
    }
  });
});
