import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { loadOrCreatePlatformKeys } from '../../platform/platform-keys.js';
import { createSqliteStore } from '../../platform/storage/sqlite/store.js';
import type { ChargingRecord, ChargingRecordsQuery } from '../../shared/index.js';

/**
 * Charging-record listings (counted by day, paged from the counts) against the plain rule: records of the
 * client's operators whose session overlaps [start_time, end_time), newest start first, then record id; the
 * exact total. Random histories with sessions of zero length to several days, edges on day boundaries, and
 * chargers moving between operators; on the real SQLite store.
 */
const _DAY = 86_400_000;
const T0 = Date.UTC(2026, 0, 10);
const iso = (ms: number) => new Date(ms).toISOString();

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

async function world(devices: number) {
  const dir = await mkdtemp(join(tmpdir(), 'cp-records-'));
  dirs.push(dir);
  const store = createSqliteStore(dir, loadOrCreatePlatformKeys(dir));
  const ops = [await store.createOperator('A'), await store.createOperator('B')];
  const sites = [
    await store.createSite({ operator_id: ops[0]!.operator_id, name: 'a', timezone: 'UTC' }),
    await store.createSite({ operator_id: ops[1]!.operator_id, name: 'b', timezone: 'UTC' }),
  ];
  const ids: string[] = [];
  for (let i = 0; i < devices; i++) {
    const out = await store.registerDevice(
      { sn: `SN-REC-${i}`, model: 'M', manufacturer: 'X', firmware_version: '1' },
      { registration: 'open', defaultSiteId: sites[i % 2]!.site_id },
    );
    if (out.kind !== 'registered') throw new Error(out.kind);
    ids.push(out.device.device_id);
  }
  return { store, ops: ops.map((o) => o.operator_id), sites: sites.map((s) => s.site_id), ids };
}

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
    ids: match.slice((q.page - 1) * q.size, q.page * q.size).map((r) => `${r.device_id}/${r.record_id}`),
  };
}

// Times on whole hours, so that day edges and zero-length sessions on them come up often.
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
  device: fc.option(fc.nat({ max: 5 }), { freq: 4 }),
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
  page: fc.integer({ min: 1, max: 8 }),
  size: fc.integer({ min: 1, max: 7 }),
});

describe('charging records from day counts', () => {
  it('list the same records, in the same order, with the same total as the plain rule', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(recordArb, { maxLength: 120 }),
        fc.array(fc.record({ after: fc.nat(), device: fc.nat({ max: 5 }) }), { maxLength: 3 }),
        fc.array(queryArb, { minLength: 1, maxLength: 6 }),
        async (raw, moves, queries) => {
          const w = await world(6);
          try {
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
              if (!kept.has(`${r.device_id}/${r.record_id}`)) kept.set(`${r.device_id}/${r.record_id}`, r);
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
              const want = expected([...kept.values()], owner, qa.ops, q);
              expect({
                total: got.total,
                ids: got.items.map((r) => `${r.device_id}/${r.record_id}`),
              }).toEqual(want);
            }
          } finally {
            await w.store.close();
          }
        },
      ),
      { numRuns: 60 },
    );
  }, 120_000);

  it('pages deep into a long history reading about a day of records, not everything above the page', async () => {
    const w = await world(2);
    try {
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
      for (let i = 0; i < rows.length; i += 1000)
        await w.store.insertChargingRecords(rows.slice(i, i + 1000));
      const page = await w.store.listChargingRecords([w.ops[0]!], { page: 1400, size: 20 });
      expect(page.total).toBe(30_000);
      expect(page.items.map((r) => r.record_id)).toEqual(
        Array.from({ length: 20 }, (_, k) => `deep-${1399 * 20 + k}`),
      );
      const last = await w.store.listChargingRecords([w.ops[0]!], { page: 1500, size: 20 });
      expect(last.items.map((r) => r.record_id).at(-1)).toBe('deep-29999');
      expect((await w.store.listChargingRecords([w.ops[0]!], { page: 1501, size: 20 })).items).toEqual([]);
    } finally {
      await w.store.close();
    }
  });
});
