import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { partitionName } from '../../platform/storage/postgres/telemetry-partitions.js';
import { DATABASE_FILE } from '../../platform/storage/sqlite/store.js';
import type { Store, TelemetryHistoryRead } from '../../platform/storage/store.js';
import type { TelemetryRecord } from '../../shared/index.js';
import { BACKENDS, openTestStore, type TestStore } from '../helpers/backends.js';
import { registerOnStore } from '../helpers/sealed-writes.js';

/**
 * Telemetry compaction (DESIGN.md §21) on the real store of each backend, with an injected clock: samples
 * older than an hour move from the recent table into compressed blocks, and nothing an operator or a charger
 * sees changes. Charger A gets its samples in two parts, a late part after its hours were compacted; charger B
 * gets the same samples at once. Their history (raw, 1m, 15m) and energy must be identical, re-sent samples
 * must count as duplicates whether they sit in a block or in the recent table, and the late part must be
 * merged into the blocks by the next pass.
 */
const T0 = Date.UTC(2026, 2, 2, 10);
const iso = (ms: number) => new Date(ms).toISOString();
const round = (v: number, d: number) => Math.round(v * 10 ** d) / 10 ** d;

/** Two hours of two connectors at 5 s: values as an agent rounds them, some absent, some phase details. */
function samples(): TelemetryRecord[] {
  const out: TelemetryRecord[] = [];
  for (let i = 0; i < 1440; i++) {
    for (const connector of [1, 2]) {
      const charging = connector === 1 ? i < 1000 : i > 300 && i < 1300;
      const r: TelemetryRecord = {
        timestamp: iso(T0 + i * 5000 + (connector === 2 ? 1 : 0)),
        connector_id: connector,
        state: charging ? 'charging' : 'idle',
        voltage: round(230 + Math.sin(i * 1.7 + connector) * 2, 1),
        current: charging ? round(15.9 + Math.cos(i) * 0.05, 2) : 0,
        power: charging ? round(11 - Math.sin(i / 3) * 0.04, 3) : 0,
        energy_delivered: round((i * 11 * 5) / 3600, 3),
        temperature: round(30 + i / 100, 1),
      };
      if (charging) r.soc = 20 + Math.floor(i / 30);
      if (i % 97 === 0) r.phase_details = { l1: { voltage: 230.4, current: 16.01 } };
      out.push(r);
    }
  }
  return out;
}

async function registerDevice(store: Store, siteId: string, sn: string): Promise<string> {
  const reg = await registerOnStore(
    store,
    { sn, model: 'M', manufacturer: 'X', firmware_version: '1' },
    { registration: 'open', defaultSiteId: siteId },
  );
  if (reg.kind !== 'registered') throw new Error(reg.kind);
  return reg.device.device_id;
}

describe.each(BACKENDS)('telemetry compaction (%s)', (backend) => {
  let t: TestStore;
  let store: Store;
  let clock = T0 + 2 * 3_600_000;
  let a: string;
  let b: string;
  const all = samples();
  // Late: every 7th sample of the first 90 minutes, as an outbox replays them after the hours were compacted.
  const late = all.filter((_, i) => i % 7 === 3 && i < 2160);
  const onTime = all.filter((s) => !late.includes(s));

  /** Every item of a read, page by page (pages of 500). */
  async function history(deviceId: string, read: Partial<TelemetryHistoryRead> = {}) {
    const items = [];
    let after: TelemetryHistoryRead['after'];
    for (;;) {
      const page = await store.telemetryHistory({
        deviceId,
        startMs: T0,
        endMs: T0 + 3 * 3_600_000,
        limit: 500,
        ...read,
        ...(after ? { after } : {}),
      });
      items.push(...page);
      const last = page.at(-1);
      if (page.length < 500 || !last) return items;
      after = { tsMs: last.ts_ms, connectorId: last.connector_id };
    }
  }
  const energy = (deviceId: string) => store.energyBuckets([deviceId], T0, T0 + 3 * 3_600_000, 900_000);
  /** What the tables hold, read behind the store's back. */
  const counts = async () => {
    const queries = {
      recent: 'SELECT COUNT(*) AS n FROM telemetry',
      blocks: 'SELECT COUNT(*) AS n FROM telemetry_blocks',
      compacted: 'SELECT COALESCE(SUM(samples), 0) AS n FROM telemetry_blocks',
    };
    const out = { recent: 0, blocks: 0, compacted: 0 };
    if (backend === 'sqlite') {
      const db = new Database(join(t.dataDir, DATABASE_FILE), { readonly: true });
      for (const [k, q] of Object.entries(queries)) {
        out[k as keyof typeof out] = (db.prepare(q).get() as { n: number }).n;
      }
      db.close();
      return out;
    }
    const client = new pg.Client({ connectionString: t.databaseUrl });
    await client.connect();
    for (const [k, q] of Object.entries(queries)) {
      out[k as keyof typeof out] = Number((await client.query<{ n: string }>(q)).rows[0]?.n);
    }
    await client.end();
    return out;
  };
  /** Runs `statement` behind the store's back; a query answers its first row's `n`. */
  const exec = async (statement: string): Promise<number | undefined> => {
    if (backend === 'sqlite') {
      const db = new Database(join(t.dataDir, DATABASE_FILE));
      db.pragma('busy_timeout = 5000');
      try {
        if (statement.startsWith('SELECT')) return (db.prepare(statement).get() as { n: number }).n;
        db.prepare(statement).run();
        return undefined;
      } finally {
        db.close();
      }
    }
    const client = new pg.Client({ connectionString: t.databaseUrl });
    await client.connect();
    const { rows } = await client.query<{ n: string }>(statement);
    await client.end();
    return rows[0] ? Number(rows[0].n) : undefined;
  };
  /** SQLite keeps the table's newest row (its row ids never restart); PostgreSQL moves them all. */
  const kept = backend === 'sqlite' ? 1 : 0;

  beforeAll(async () => {
    t = await openTestStore(backend, { now: () => clock });
    store = t.store;
    const op = await store.createOperator('Compaction');
    const site = await store.createSite({ operator_id: op.operator_id, name: 's', timezone: 'UTC' });
    a = await registerDevice(store, site.site_id, 'SN-COMPACT-A');
    b = await registerDevice(store, site.site_id, 'SN-COMPACT-B');
    for (let i = 0; i < onTime.length; i += 500) {
      expect(await store.recordTelemetry(a, onTime.slice(i, i + 500), clock)).toBe(
        Math.min(500, onTime.length - i),
      );
    }
    for (let i = 0; i < all.length; i += 500) await store.recordTelemetry(b, all.slice(i, i + 500), clock);
    // Three hours on: both hours are compactable.
    clock = T0 + 5 * 3_600_000;
    await store.runMaintenance();
  });
  afterAll(async () => {
    await t.close();
  });

  it('moves samples older than an hour into one block per connector and hour', async () => {
    const c = await counts();
    // Two hours × two connectors × two chargers.
    expect(c.blocks).toBe(8);
    expect(c.recent).toBe(kept);
    expect(c.compacted + c.recent).toBe(onTime.length + all.length);
  });

  it('counts a re-sent sample as a duplicate, compacted or not', async () => {
    expect(await store.recordTelemetry(a, onTime.slice(0, 500), clock)).toBe(0);
    expect(await store.recordTelemetry(a, onTime.slice(-3), clock)).toBe(0);
  });

  it('takes late samples for compacted hours, and answers as if they had come in time', async () => {
    expect(await store.recordTelemetry(a, late, clock)).toBe(late.length);
    expect(await store.recordTelemetry(a, late.slice(0, 10), clock)).toBe(0);
    const raw = await history(a);
    expect(raw).toHaveLength(all.length);
    expect(raw).toEqual(await history(b));
    // Exactly as sent.
    expect(raw[6]).toMatchObject({ ts_ms: Date.parse(all[6]!.timestamp), connector_id: 1, ...pick(all[6]!) });
    expect(raw.find((r) => r.phase_details)?.phase_details).toEqual({
      l1: { voltage: 230.4, current: 16.01 },
    });
    for (const bucketMs of [60_000, 900_000]) {
      const averaged = await history(a, { bucketMs });
      expectClose(averaged, buckets(all, bucketMs));
      expectClose(averaged, await history(b, { bucketMs }));
    }
    expect(await history(a, { connectorId: 2, startMs: T0 + 1_000_000 })).toEqual(
      await history(b, { connectorId: 2, startMs: T0 + 1_000_000 }),
    );
    expectClose(await energy(a), await energy(b));
  });

  it('merges the late samples into their blocks at the next pass, and still answers the same', async () => {
    await store.runMaintenance();
    const c = await counts();
    expect(c.blocks).toBe(8);
    expect(c.recent).toBe(kept);
    expect(c.compacted + c.recent).toBe(2 * all.length);
    expect(await store.recordTelemetry(a, late.slice(-5), clock)).toBe(0);
    expect(await history(a)).toEqual(await history(b));
    expectClose(await history(a, { bucketMs: 60_000 }), await history(b, { bucketMs: 60_000 }));
    expectClose(await energy(a), await energy(b));
  });

  it('gives blocks compacted before summaries theirs at the next pass; 15-minute reads answer the same', async () => {
    const quarters = await history(a, { bucketMs: 900_000 });
    expect(quarters).toEqual(await history(b, { bucketMs: 900_000 }));
    // As an earlier release left them: no summary (those blocks are decoded).
    await exec('UPDATE telemetry_blocks SET summary = NULL');
    expect(await history(a, { bucketMs: 900_000 })).toEqual(quarters);
    await store.runMaintenance();
    expect(await exec('SELECT COUNT(*) AS n FROM telemetry_blocks WHERE summary IS NULL')).toBe(0);
    expect(await history(a, { bucketMs: 900_000 })).toEqual(quarters);
  });

  it('frees the space of a day whose rows all went into blocks (PostgreSQL truncates its partition)', async () => {
    // The next day, past the horizon: the day partition holds no row any more.
    clock = Date.UTC(2026, 2, 3, 2);
    await store.runMaintenance();
    expect((await counts()).recent).toBe(kept);
    if (backend === 'postgres') {
      const client = new pg.Client({ connectionString: t.databaseUrl });
      await client.connect();
      const sizes = await client.query<{ bytes: string }>('SELECT pg_relation_size($1::regclass) AS bytes', [
        partitionName(Date.UTC(2026, 2, 2)),
      ]);
      await client.end();
      expect(sizes.rows.map((r) => Number(r.bytes))).toEqual([0]);
    }
    // A late sample of that day still finds its place, and the answers stay the same.
    expect(await store.recordTelemetry(a, late.slice(0, 3), clock)).toBe(0);
    expect(await history(a)).toEqual(await history(b));
  });
});

/** What an averaged read must answer for `records`, computed here: means, the last state, the count. */
function buckets(records: readonly TelemetryRecord[], bucketMs: number) {
  const groups = new Map<string, TelemetryRecord[]>();
  for (const r of records) {
    const ts = Math.floor(Date.parse(r.timestamp) / bucketMs) * bucketMs;
    const key = `${ts}|${r.connector_id}`;
    groups.set(key, [...(groups.get(key) ?? []), r]);
  }
  return [...groups.entries()]
    .map(([key, rs]) => {
      const [ts, connector] = key.split('|').map(Number) as [number, number];
      const last = rs.reduce((x, y) => (Date.parse(y.timestamp) > Date.parse(x.timestamp) ? y : x));
      const row: Record<string, unknown> = {
        ts_ms: ts,
        connector_id: connector,
        state: last.state,
        samples: rs.length,
      };
      for (const m of ['voltage', 'current', 'power', 'energy_delivered', 'soc', 'temperature'] as const) {
        const values = rs.map((r) => r[m]).filter((v): v is number => v !== undefined);
        row[m] = values.length === 0 ? null : values.reduce((x, y) => x + y, 0) / values.length;
      }
      return row;
    })
    .sort(
      (x, y) =>
        (x.ts_ms as number) - (y.ts_ms as number) || (x.connector_id as number) - (y.connector_id as number),
    );
}

function pick(r: TelemetryRecord) {
  const { timestamp: _t, connector_id: _c, phase_details: _p, ...rest } = r;
  return rest;
}

/** Equal but for the last bits of sums taken in another order. */
function expectClose(actual: readonly object[], expected: readonly object[]): void {
  expect(actual).toHaveLength(expected.length);
  actual.forEach((row, i) => {
    for (const [k, v] of Object.entries(expected[i] as Record<string, unknown>)) {
      const got = (row as Record<string, unknown>)[k];
      if (typeof v === 'number' && typeof got === 'number') expect(got, k).toBeCloseTo(v, 9);
      else expect(got, k).toEqual(v);
    }
  });
}
