import fc from 'fast-check';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accumulateEnergy, bucketsInOrder, type PowerSample } from '../../platform/domain/energy.js';
import { ROLLUP_MS, rollupAlignedRange } from '../../platform/domain/energy-rollup.js';
import { createPostgresStore } from '../../platform/storage/backends.js';
import type { Store } from '../../platform/storage/store.js';
import type { TelemetryRecord } from '../../shared/index.js';
import { BACKENDS, type Backend, openTestStore, type TestStore } from '../helpers/backends.js';
import { registerOnStore } from '../helpers/sealed-writes.js';

/**
 * Rollups against the integration of the raw samples, on the real store of each backend: random streams of
 * two connectors with gaps (some over the 5-minute limit), powers of both signs or none, uploaded in batches
 * that come late and out of order, with duplicates, and energy read between them (so that rollups exist before
 * the late data arrives and must be recomputed). On PostgreSQL, also rows committed out of transaction order.
 */
const T0 = Date.UTC(2026, 2, 1, 9, 7, 0);
const iso = (ms: number) => new Date(ms).toISOString();
/** Property runs per backend: PostgreSQL pays round trips per batch (and a throw-away database). */
const RUNS: Record<Backend, number> = { sqlite: 150, postgres: 100 };

let deviceCounter = 0;
/** A registered charger: telemetry's live state is written out to its connectors. */
async function newDevice(store: Store): Promise<string> {
  const sn = `SN-PROP-${++deviceCounter}`;
  const outcome = await registerOnStore(
    store,
    { sn, model: 'M', manufacturer: 'X', firmware_version: '1' },
    { registration: 'open' },
  );
  if (outcome.kind !== 'registered') throw new Error(outcome.kind);
  return outcome.device.device_id;
}

const record = (s: PowerSample): TelemetryRecord => ({
  timestamp: iso(s.ts_ms),
  connector_id: s.connector_id,
  state: s.power === null ? 'idle' : s.power < 0 ? 'discharging' : s.power > 0 ? 'charging' : 'idle',
  ...(s.power === null ? {} : { power: s.power }),
});

/** What the store keeps: the first record of each connector and time (later repeats are ignored). */
function stored(batches: PowerSample[][]): PowerSample[] {
  const seen = new Map<string, PowerSample>();
  for (const batch of batches) {
    for (const s of batch) {
      const key = `${s.connector_id}|${s.ts_ms}`;
      if (!seen.has(key)) seen.set(key, s);
    }
  }
  return [...seen.values()].sort((a, b) => a.ts_ms - b.ts_ms || a.connector_id - b.connector_id);
}

async function check(
  store: Store,
  batches: PowerSample[][],
  readAfter: ReadonlySet<number>,
  intervalMs: number,
) {
  const deviceId = await newDevice(store);
  for (const [i, batch] of batches.entries()) {
    await store.recordTelemetry(deviceId, batch.map(record), T0);
    if (readAfter.has(i)) await store.energyBuckets([deviceId], T0 - ROLLUP_MS, T0 + ROLLUP_MS, ROLLUP_MS);
  }
  await expectIntegrated(store, deviceId, stored(batches), intervalMs);
}

/** The store's energy series of the device equals the integration of `raw` (time order). */
async function expectIntegrated(store: Store, deviceId: string, raw: PowerSample[], intervalMs: number) {
  if (raw.length === 0) return;
  const { startMs, endMs } = rollupAlignedRange(raw[0]!.ts_ms, raw.at(-1)!.ts_ms + 1);
  const range = { startMs, endMs: endMs + intervalMs, intervalMs };
  const want = bucketsInOrder(accumulateEnergy(new Map(), raw, range));
  const got = await store.energyBuckets([deviceId], range.startMs, range.endMs, intervalMs);
  const nonEmpty = (b: (typeof got)[number]) =>
    b.samples > 0 || b.imported_kwh > 1e-12 || b.exported_kwh > 1e-12;
  const a = got.filter(nonEmpty);
  const b = want.filter(nonEmpty);
  expect(a.map((x) => x.start_ms)).toEqual(b.map((x) => x.start_ms));
  a.forEach((x, i) => {
    const y = b[i]!;
    expect(x.samples).toBe(y.samples);
    expect(x.max_power).toBeCloseTo(y.max_power, 9);
    expect(x.power_sum).toBeCloseTo(y.power_sum, 6);
    expect(x.imported_kwh).toBeCloseTo(y.imported_kwh, 9);
    expect(x.exported_kwh).toBeCloseTo(y.exported_kwh, 9);
  });
}

/** A connector's stream: steps of 1 s to 8 min (some over the 5-minute gap rule), powers or none. */
const streamOf = (connector_id: number) =>
  fc
    .array(
      fc.record({
        step: fc.oneof(
          { weight: 3, arbitrary: fc.integer({ min: 1, max: 30 }) },
          { weight: 1, arbitrary: fc.integer({ min: 31, max: 480 }) },
        ),
        power: fc.option(fc.double({ min: -50, max: 50, noNaN: true }), { freq: 8 }),
      }),
      { maxLength: 120 },
    )
    .map((steps) => {
      let ts = T0;
      return steps.map(({ step, power }) => {
        ts += step * 1000;
        return { connector_id, ts_ms: ts, power: power === null ? null : Math.round(power * 1000) / 1000 };
      });
    });

const scenario = fc
  .record({
    one: streamOf(1),
    two: streamOf(2),
    cuts: fc.array(fc.nat(), { maxLength: 8 }),
    order: fc.array(fc.nat(), { maxLength: 12 }),
    duplicates: fc.array(fc.nat(), { maxLength: 4 }),
    reads: fc.array(fc.nat(), { maxLength: 6 }),
    interval: fc.constantFrom(ROLLUP_MS, 4 * ROLLUP_MS),
  })
  .map(({ one, two, cuts, order, duplicates, reads, interval }) => {
    const all = [...one, ...two].sort((a, b) => a.ts_ms - b.ts_ms);
    // Batches in time order, then shuffled by `order` (late and out-of-order uploads), plus repeats.
    const at = [...new Set(cuts.map((c) => (all.length ? c % all.length : 0)))].sort((a, b) => a - b);
    const batches: PowerSample[][] = [];
    let from = 0;
    for (const cut of [...at, all.length]) {
      if (cut > from) batches.push(all.slice(from, cut));
      from = Math.max(from, cut);
    }
    for (let i = 0; i < order.length && batches.length > 1; i++) {
      const j = order[i]! % batches.length;
      const k = (order[i]! >> 3) % batches.length;
      [batches[j], batches[k]] = [batches[k]!, batches[j]!];
    }
    for (const d of duplicates) if (batches.length) batches.push(batches[d % batches.length]!);
    return { batches, readAfter: new Set(reads.map((r) => r % Math.max(1, batches.length))), interval };
  });

describe.each(BACKENDS)('energy rollups equal the integration of the raw samples (%s)', (backend) => {
  let t: TestStore;
  beforeAll(async () => {
    // The platform's clock a day after the samples: well inside raw telemetry's retention window.
    t = await openTestStore(backend, { now: () => T0 + 86_400_000 });
  });
  afterAll(async () => {
    await t.close();
  });

  it('for random streams, gaps, late and out-of-order batches and duplicates', async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async ({ batches, readAfter, interval }) => {
        await check(t.store, batches, readAfter, interval);
      }),
      { numRuns: RUNS[backend] },
    );
  });

  it('across chunks of the rollup pass: a long backlog, then a late hour inside it', async () => {
    // 20,000 samples over ~28 h, rolled up in several chunks; then the same hour again with other powers at
    // other times (new samples interleaved with rolled-up ones).
    const all: PowerSample[] = [];
    for (let i = 0; i < 10_000; i++) {
      const ts = T0 + i * 10_000;
      all.push(
        { connector_id: 1, ts_ms: ts, power: (i % 50) / 2 },
        { connector_id: 2, ts_ms: ts, power: -3 },
      );
    }
    const late = Array.from({ length: 360 }, (_, i) => ({
      connector_id: 1,
      ts_ms: T0 + 36_000_000 + i * 10_000 + 5_000,
      power: 40,
    }));
    const batches: PowerSample[][] = [];
    for (let i = 0; i < all.length; i += 500) batches.push(all.slice(i, i + 500));
    batches.push(late);
    await check(t.store, batches, new Set([batches.length - 2]), ROLLUP_MS);
  });
});

describe('energy rollups follow committed transactions (postgres)', () => {
  /** Stores samples in the open transaction of `client`, as ingest would. */
  const insertIn = (client: pg.Client, deviceId: string, samples: readonly PowerSample[]) =>
    client.query(
      `INSERT INTO telemetry (device_id, connector_id, ts_ms, state, power, received_ms)
       SELECT $1, c, ts, 'charging', p, $5 FROM unnest($2::int[], $3::bigint[], $4::float8[]) AS r(c, ts, p)`,
      [
        deviceId,
        samples.map((s) => s.connector_id),
        samples.map((s) => s.ts_ms),
        samples.map((s) => s.power),
        T0,
      ],
    );
  const minutes = (from: number, n: number, power: number): PowerSample[] =>
    Array.from({ length: n * 6 }, (_, i) => ({ connector_id: 1, ts_ms: from + i * 10_000, power }));

  it('rows of a younger transaction committed first wait for the older one: none skipped or counted twice', async () => {
    const t = await openTestStore('postgres', { now: () => T0 + 86_400_000 });
    const older = new pg.Client({ connectionString: t.databaseUrl });
    const peek = new pg.Client({ connectionString: t.databaseUrl });
    try {
      await older.connect();
      await peek.connect();
      const deviceId = await newDevice(t.store);
      const early = minutes(T0, 10, 10);
      const late = minutes(T0 + 10 * 60_000, 10, 20);
      // First a sample that creates the day's partition (creating one waits for transactions writing telemetry).
      const first = { connector_id: 1, ts_ms: T0 - 3_600_000, power: 5 };
      await t.store.recordTelemetry(deviceId, [record(first)], T0);
      await older.query('BEGIN');
      await insertIn(older, deviceId, early);
      await t.store.recordTelemetry(deviceId, late.map(record), T0);
      const rolling = t.store.runMaintenance();
      await new Promise((resolve) => setTimeout(resolve, 300));
      // The committed rows have a younger transaction id than the running one: not taken yet.
      const rolled = await peek.query(
        'SELECT sum(samples)::int AS n FROM energy_rollups WHERE device_id = $1',
        [deviceId],
      );
      expect(rolled.rows[0].n).toBe(1);
      await older.query('COMMIT');
      await rolling;
      await expectIntegrated(t.store, deviceId, [first, ...early, ...late], ROLLUP_MS);
      expect(t.store.maintenanceStats().rollupLagRows).toBe(0);
      // Another pass finds nothing more to add.
      await t.store.runMaintenance();
      await expectIntegrated(t.store, deviceId, [first, ...early, ...late], ROLLUP_MS);
    } finally {
      await older.end();
      await peek.end();
      await t.close();
    }
  });

  it('takes rows in numeric transaction order across a change in digits (9…9 then 10…0): none skipped', async () => {
    const t = await openTestStore('postgres', { now: () => T0 + 86_400_000 });
    const peek = new pg.Client({ connectionString: t.databaseUrl });
    try {
      await peek.connect();
      const deviceId = await newDevice(t.store);
      // The day's partition, created by another charger's sample: nothing of this charger is stored
      // whose late arrival could make a pass recompute its buckets from the raw rows.
      const day = T0;
      await t.store.recordTelemetry(
        await newDevice(t.store),
        [record({ connector_id: 1, ts_ms: day, power: 1 })],
        T0,
      );
      // Rows of transaction ids on both sides of a power of ten below the current one: as text, '1000…'
      // sorts before '999…', and a pass that ordered them so ends its chunk on the wrong row and takes the
      // rows after it again.
      const current = Number((await peek.query('SELECT pg_current_xact_id()::text AS x')).rows[0].x);
      let ten = 10;
      while (ten * 10 + 10 < current) ten *= 10;
      // One row just below the power of ten, then a chunk's worth (4,000 rows) at it: ordered as text, the
      // chunk would be the 4,000 and the row below would fall behind the watermark, never rolled up.
      const below = { connector_id: 1, ts_ms: day + 10_000, power: 50 };
      const at = Array.from({ length: 4_000 }, (_, i) => ({
        connector_id: 1,
        ts_ms: day + 20_000 + i * 1_000,
        power: 10,
      }));
      const samples = [below, ...at];
      const txids = [ten - 1, ...at.map(() => ten)];
      await peek.query(
        `INSERT INTO telemetry (txid, device_id, connector_id, ts_ms, state, power, received_ms)
         SELECT x::text::xid8, $1, 1, ts, 'charging', p, $5
         FROM unnest($2::bigint[], $3::bigint[], $4::float8[]) AS r(x, ts, p)`,
        [deviceId, txids, samples.map((x) => x.ts_ms), samples.map((x) => x.power), T0],
      );
      // The pass starts just below them.
      await peek.query(
        `INSERT INTO settings (key, value) VALUES ('energy_rollups_up_to', $1)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
        [`${ten - 3}:0`],
      );
      await t.store.runMaintenance();
      await t.store.runMaintenance();
      await expectIntegrated(t.store, deviceId, samples, ROLLUP_MS);
      expect(t.store.maintenanceStats().rollupLagRows).toBe(0);
    } finally {
      await peek.end();
      await t.close();
    }
  });

  it('two instances on one database, storing and reading at once, roll up every row once', async () => {
    const now = () => T0 + 86_400_000;
    const t = await openTestStore('postgres', { now });
    const second = await createPostgresStore(t.databaseUrl!, now);
    try {
      const deviceId = await newDevice(t.store);
      // Two connectors over three hours, with powers of both signs and a few gaps over five minutes.
      const all: PowerSample[] = [];
      for (let i = 0; i < 1_000; i++) {
        const ts = T0 + i * 10_000 + (i > 500 ? 400_000 : 0);
        all.push({ connector_id: 1 + (i % 2), ts_ms: ts, power: ((i * 37) % 41) - 10 });
      }
      // First in order, each instance in turn rolling up what the other stored just before.
      const head = all.slice(0, 200);
      for (let i = 0; i < head.length; i += 10) {
        const store = i % 20 === 0 ? t.store : second;
        await store.recordTelemetry(deviceId, head.slice(i, i + 10).map(record), T0);
        await store.energyBuckets([deviceId], T0, T0 + ROLLUP_MS, ROLLUP_MS);
      }
      // Then at once, late and out of order: every third batch comes last.
      const batches: PowerSample[][] = [];
      for (let i = head.length; i < all.length; i += 50) batches.push(all.slice(i, i + 50));
      const order = [...batches.filter((_, i) => i % 3 !== 0), ...batches.filter((_, i) => i % 3 === 0)];
      await Promise.all(
        order.map(async (batch, i) => {
          const store = i % 2 === 0 ? t.store : second;
          await store.recordTelemetry(deviceId, batch.map(record), T0);
          if (i % 4 === 0) await store.energyBuckets([deviceId], T0, T0 + 4 * ROLLUP_MS, ROLLUP_MS);
          if (i % 5 === 0) await store.runMaintenance();
        }),
      );
      const raw = [...all].sort((a, b) => a.ts_ms - b.ts_ms || a.connector_id - b.connector_id);
      await expectIntegrated(t.store, deviceId, raw, ROLLUP_MS);
      await expectIntegrated(second, deviceId, raw, 4 * ROLLUP_MS);
    } finally {
      await second.close();
      await t.close();
    }
  });
});
