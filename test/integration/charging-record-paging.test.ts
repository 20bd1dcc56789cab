import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Store } from '../../platform/storage/store.js';
import type { ChargingRecord, ChargingRecordsQuery } from '../../shared/index.js';
import { BACKENDS, type Backend, openTestStore, type TestStore } from '../helpers/backends.js';
import { registerOnStore } from '../helpers/sealed-writes.js';

/**
 * Charging-record listings (counted by day, paged from the counts) against the plain rule: records of the
 * client's operators whose session overlaps [start_time, end_time), newest start first, then record id; the
 * exact total. Random histories with sessions of zero length to several days, edges on day boundaries, and
 * chargers moving between operators; on the real store of each backend.
 *
 * One store per backend: each run builds a world of its own (new operators, sites and chargers), which the
 * others' records never reach, so a run costs no new database; the longest session stored grows over the
 * runs, as it would over a real history.
 */
const DAY = 86_400_000;
const T0 = Date.UTC(2026, 0, 10);
const iso = (ms: number) => new Date(ms).toISOString();
/** A PostgreSQL run is about a hundred transactions: fewer of them, on a machine shared with other suites. */
const RUNS: Record<Backend, number> = { sqlite: 60, postgres: 30 };

let worlds = 0;
async function world(store: Store, devices: number) {
  const n = ++worlds;
  const ops = [await store.createOperator(`A${n}`), await store.createOperator(`B${n}`)];
  const sites = [
    await store.createSite({ operator_id: ops[0]!.operator_id, name: 'a', timezone: 'UTC' }),
    await store.createSite({ operator_id: ops[1]!.operator_id, name: 'b', timezone: 'UTC' }),
  ];
  const ids: string[] = [];
  for (let i = 0; i < devices; i++) {
    const out = await registerOnStore(
      store,
      { sn: `SN-REC-${n}-${i}`, model: 'M', manufacturer: 'X', firmware_version: '1' },
      { registration: 'open', defaultSiteId: sites[i % 2]!.site_id },
    );
    if (out.kind !== 'registered') throw new Error(out.kind);
    ids.push(out.device.device_id);
  }
  return { store, ops: ops.map((o) => o.operator_id), sites: sites.map((s) => s.site_id), ids };
}

/** Records of other chargers may share a start and a record id; the order among those is not specified. */
const keyOf = (r: ChargingRecord) => `${r.start_time}|${r.record_id}`;
const idOf = (r: ChargingRecord) => `${r.device_id}/${r.record_id}`;

function expected(
  all: readonly ChargingRecord[],
  owner: ReadonlyMap<string, number>,
  visible: readonly number[],
  q: ChargingRecordsQuery,
) {
  const start = q.start_time ? Date.parse(q.start_time) : Number.NEGATIVE_INFINITY;
  const end = q.end_time ? Date.parse(q.end_time) : Number.POSITIVE_INFINITY;
  const match = all
    .filter((r) => visible.includes(owner.get(r.device_id)!))
    .filter((r) => q.device_id === undefined || r.device_id === q.device_id)
    .filter((r) => q.connector_id === undefined || r.connector_id === q.connector_id)
    .filter((r) => Date.parse(r.end_time) > start && Date.parse(r.start_time) < end)
    .sort(
      (a, b) =>
        Date.parse(b.start_time) - Date.parse(a.start_time) ||
        (a.record_id < b.record_id ? 1 : a.record_id > b.record_id ? -1 : 0),
    );
  return {
    total: match.length,
    keys: match.slice((q.page - 1) * q.size, q.page * q.size).map(keyOf),
    ids: new Set(match.map(idOf)),
  };
}

/** The page has the expected total and keys in order, each item one of the matching records, none twice. */
function expectPage(got: { total: number; items: ChargingRecord[] }, want: ReturnType<typeof expected>) {
  expect({ total: got.total, keys: got.items.map(keyOf) }).toEqual({ total: want.total, keys: want.keys });
  const ids = got.items.map(idOf);
  expect(ids.filter((id) => !want.ids.has(id))).toEqual([]);
  expect(new Set(ids).size).toBe(ids.length);
}

// Times on whole hours, so that day edges and zero-length sessions on them come up often. Histories of any
// length up to the maximum, first pages often and operator-wide queries half the time, so that most queries
// have records on their page, and the sessions running past start_time (listed last) are reached.
const hour = fc.integer({ min: 0, max: 20 * 24 }).map((h) => T0 + h * 3_600_000);
const recordArb = fc.record({
  device: fc.nat({ max: 5 }),
  connector: fc.integer({ min: 1, max: 2 }),
  start: hour,
  hours: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 8 }), fc.integer({ min: 20, max: 80 })),
  id: fc.integer({ min: 0, max: 40 }),
});
const queryArb = fc.record({
  ops: fc.constantFrom([0], [1], [0, 1]),
  device: fc.option(fc.nat({ max: 5 }), { freq: 2 }),
  connector: fc.option(fc.integer({ min: 1, max: 2 }), { freq: 3 }),
  start: fc.option(
    fc.oneof(
      hour,
      hour.map((h) => h + 1),
    ),
    { freq: 2 },
  ),
  span: fc.integer({ min: 1, max: 15 * 24 }),
  hasEnd: fc.boolean(),
  page: fc.oneof(fc.constant(1), fc.integer({ min: 1, max: 8 })),
  size: fc.integer({ min: 1, max: 7 }),
});

describe.each(BACKENDS)('charging records from day counts (%s)', (backend) => {
  let t: TestStore;
  beforeAll(async () => {
    t = await openTestStore(backend);
  }, 60_000);
  afterAll(async () => {
    await t?.close();
  });

  it('list the same records, in the same order, with the same total as the plain rule', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(recordArb, { maxLength: 120, size: 'max' }),
        fc.array(fc.record({ after: fc.nat(), device: fc.nat({ max: 5 }) }), { maxLength: 3 }),
        fc.array(queryArb, { minLength: 1, maxLength: 6 }),
        async (raw, moves, queries) => {
          const w = await world(t.store, 6);
          const owner = new Map(w.ids.map((id, i) => [id, i % 2]));
          const records: ChargingRecord[] = raw.map((r) => ({
            record_id: `r${r.id}`,
            device_id: w.ids[r.device]!,
            connector_id: r.connector,
            start_time: iso(r.start),
            end_time: iso(r.start + r.hours * 3_600_000),
            energy: 1,
          }));
          // First stored wins on a repeated id, as the store does.
          const kept = new Map<string, ChargingRecord>();
          for (const [i, r] of records.entries()) {
            await w.store.insertChargingRecords([r]);
            if (!kept.has(idOf(r))) kept.set(idOf(r), r);
            for (const m of moves) {
              if (m.after % Math.max(1, records.length) !== i) continue;
              const id = w.ids[m.device]!;
              const to = 1 - owner.get(id)!;
              await w.store.assignDevice(id, w.sites[to]!);
              owner.set(id, to);
            }
          }
          for (const qa of queries) {
            const q: ChargingRecordsQuery = { page: qa.page, size: qa.size };
            if (qa.device !== null) q.device_id = w.ids[qa.device]!;
            if (qa.connector !== null) q.connector_id = qa.connector;
            if (qa.start !== null) q.start_time = iso(qa.start);
            if (qa.hasEnd) q.end_time = iso((qa.start ?? T0) + qa.span * 3_600_000);
            const visible = qa.ops.map((i) => w.ops[i]!);
            const got = await w.store.listChargingRecords(visible, q);
            expectPage(got, expected([...kept.values()], owner, qa.ops, q));
          }
        },
      ),
      { numRuns: RUNS[backend] },
    );
  }, 300_000);

  it('lists the sessions that began before start_time and run past it last', async () => {
    const w = await world(t.store, 2);
    const at = (record_id: string, startMs: number, hours: number): ChargingRecord => ({
      record_id,
      device_id: w.ids[0]!,
      connector_id: 1,
      start_time: iso(startMs),
      end_time: iso(startMs + hours * 3_600_000),
      energy: 1,
    });
    await w.store.insertChargingRecords([
      at('spans', T0, 20),
      at('within', T0 + 2 * 3_600_000, 1),
      at('before', T0 - DAY, 2),
    ]);
    const q = { start_time: iso(T0 + 3_600_000) };
    const all = await w.store.listChargingRecords([w.ops[0]!], { ...q, page: 1, size: 5 });
    expect({ total: all.total, ids: all.items.map((r) => r.record_id) }).toEqual({
      total: 2,
      ids: ['within', 'spans'],
    });
    const second = await w.store.listChargingRecords([w.ops[0]!], { ...q, page: 2, size: 1 });
    expect(second.items.map((r) => r.record_id)).toEqual(['spans']);
  });

  it('pages deep into a long history reading about a day of records, not everything above the page', async () => {
    const w = await world(t.store, 2);
    const rows: ChargingRecord[] = [];
    for (let i = 0; i < 30_000; i++) {
      const start = T0 - i * 600_000;
      rows.push({
        record_id: `deep-${i}`,
        device_id: w.ids[0]!,
        connector_id: 1,
        start_time: iso(start),
        end_time: iso(start + 1_800_000),
        energy: 1,
      });
    }
    for (let i = 0; i < rows.length; i += 1000) await w.store.insertChargingRecords(rows.slice(i, i + 1000));
    const page = await w.store.listChargingRecords([w.ops[0]!], { page: 1400, size: 20 });
    expect(page.total).toBe(30_000);
    expect(page.items.map((r) => r.record_id)).toEqual(
      Array.from({ length: 20 }, (_, k) => `deep-${1399 * 20 + k}`),
    );
    const last = await w.store.listChargingRecords([w.ops[0]!], { page: 1500, size: 20 });
    expect(last.items.map((r) => r.record_id).at(-1)).toBe('deep-29999');
    expect((await w.store.listChargingRecords([w.ops[0]!], { page: 1501, size: 20 })).items).toEqual([]);
  }, 60_000);
});
