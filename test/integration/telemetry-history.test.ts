import { beforeAll, describe, expect, it } from 'vitest';
import { expectValidation } from '../helpers/device-calls.js';
import { furtherCalls, isoAt, okData, type Tenant } from '../helpers/further-calls.js';
import { expectError, type RegisteredDevice, registerDevice } from '../helpers/platform.js';
import { platformPerFile } from '../helpers/platform-per-file.js';

/**
 * GET /v1/operator/devices/{device_id}/telemetry (DESIGN.md §21) over real HTTPS, on SQLite (`npm test`) and
 * PostgreSQL (`npm run test:postgres`): raw samples exactly as sent, averages per minute and per 15 minutes
 * checked against the same means computed here, cursor pages that neither lose nor repeat an item, and the
 * refusals. One platform for the file; its clock is the test's.
 */

const tp = platformPerFile();
const { sn, tenant, batch, platformNow } = furtherCalls(() => tp);

type Sample = {
  timestamp: string;
  connector_id: number;
  state: 'idle' | 'charging' | 'discharging' | 'fault';
  power?: number;
  voltage?: number;
  current?: number;
  energy_delivered?: number;
  soc?: number;
  temperature?: number;
  phase_details?: Record<string, Record<string, number>>;
};
// biome-ignore lint/suspicious/noExplicitAny: response bodies are inspected field by field
type Item = Record<string, any>;
const MEASUREMENTS = ['voltage', 'current', 'power', 'energy_delivered', 'soc', 'temperature'] as const;

/** A charging session's samples every `stepS` seconds: values that do not round-trip through a lossy format. */
function session(connector: number, fromMs: number, count: number, stepS = 5): Sample[] {
  return Array.from({ length: count }, (_, i) => {
    const charging = i % 17 !== 16;
    const s: Sample = {
      timestamp: isoAt(fromMs + i * stepS * 1000),
      connector_id: connector,
      state: charging ? 'charging' : 'idle',
      power: charging ? Math.round((7.2 + Math.sin(i / 7) * 3.1) * 1000) / 1000 : 0,
      voltage: 229.87 + (i % 5) / 10,
      current: charging ? 31.3 + (i % 3) * 0.01 : 0,
      energy_delivered: Math.round(i * 0.0123 * 1e4) / 1e4,
      soc: 20 + Math.floor(i / 40),
      temperature: 31.5 - (i % 4) * 0.25,
    };
    if (i % 50 === 0) s.phase_details = { l1: { voltage: 230.1, current: 10.5 } };
    if (i % 23 === 0) delete s.temperature;
    return s;
  });
}

async function upload(d: RegisteredDevice, records: Sample[]) {
  for (let i = 0; i < records.length; i += 500) {
    const res = await batch(d, records.slice(i, i + 500));
    expect(res.status).toBe(200);
  }
}

/** What the API must answer for `samples` at a resolution of `bucketMs`: means, last state, counts. */
function expectedBuckets(samples: readonly Sample[], bucketMs: number): Item[] {
  const groups = new Map<string, Sample[]>();
  for (const s of samples) {
    const b = Math.floor(Date.parse(s.timestamp) / bucketMs) * bucketMs;
    const key = `${b}|${s.connector_id}`;
    groups.set(key, [...(groups.get(key) ?? []), s]);
  }
  return [...groups.entries()]
    .map(([key, group]) => {
      const [b, c] = key.split('|').map(Number) as [number, number];
      const last = group.reduce((x, y) => (Date.parse(y.timestamp) >= Date.parse(x.timestamp) ? y : x));
      const item: Item = { timestamp: isoAt(b), connector_id: c, state: last.state, samples: group.length };
      for (const m of MEASUREMENTS) {
        const values = group.map((s) => s[m]).filter((v): v is number => v !== undefined);
        if (values.length > 0) item[m] = values.reduce((x, y) => x + y, 0) / values.length;
      }
      return item;
    })
    .sort((x, y) => x.timestamp.localeCompare(y.timestamp) || x.connector_id - y.connector_id);
}

const byTime = (a: Sample, b: Sample) =>
  a.timestamp.localeCompare(b.timestamp) || a.connector_id - b.connector_id;

describe('GET /v1/operator/devices/{device_id}/telemetry', () => {
  let t: Tenant;
  let other: Tenant;
  let dev: RegisteredDevice;
  let foreign: RegisteredDevice;
  let t0: number;
  let all: Sample[];

  const read = (query: string, who: Tenant = t, d: RegisteredDevice = dev) =>
    tp.http.get(`/v1/operator/devices/${d.deviceId}/telemetry?${query}`, { token: who.token });
  /** Every item of `query`, page by page; also how many pages it took. */
  async function readAll(query: string): Promise<{ items: Item[]; pages: number }> {
    const items: Item[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page = await okData(read(cursor ? `${query}&cursor=${cursor}` : query));
      items.push(...page.items);
      cursor = page.next_cursor;
      pages += 1;
      if (pages > 500) throw new Error('no end to the pages');
    } while (cursor);
    return { items, pages };
  }
  const range = (fromMs: number, toMs: number) => `start_time=${isoAt(fromMs)}&end_time=${isoAt(toMs)}`;

  beforeAll(async () => {
    t = await tenant();
    other = await tenant();
    dev = await registerDevice(tp, sn(), t.siteId);
    foreign = await registerDevice(tp, sn(), other.siteId);
    // Two hours ago, on a whole hour: two connectors, 30 minutes of samples each, connector 2 starting later;
    // then, after a quiet day, one more session of connector 1 ending a minute ago.
    t0 = Math.floor((platformNow() - 26 * 3_600_000) / 3_600_000) * 3_600_000;
    const c1 = session(1, t0, 360);
    const c2 = session(2, t0 + 600_000, 240);
    const recent = session(1, platformNow() - 10 * 60_000, 108);
    // Uploaded out of order (an outbox after an outage): newest first, the connectors interleaved.
    await upload(dev, [...recent].reverse());
    await upload(dev, [...c2].reverse());
    await upload(dev, c1);
    await upload(foreign, session(1, t0, 10));
    all = [...c1, ...c2, ...recent].sort(byTime);
  });

  it('answers raw samples exactly as the charger sent them, oldest first, connectors interleaved', async () => {
    const page = await okData(read(range(t0, t0 + 3_600_000)));
    expect(page).toMatchObject({
      device_id: dev.deviceId,
      resolution: 'raw',
      start_time: isoAt(t0),
      end_time: isoAt(t0 + 3_600_000),
      next_cursor: null,
    });
    const expected = all.filter((s) => Date.parse(s.timestamp) < t0 + 3_600_000);
    expect(page.items).toHaveLength(600);
    expect(page.items).toEqual(expected);
  });

  it('reads the hour before now by default, and one connector when asked', async () => {
    const before = platformNow();
    const page = await okData(read(''));
    const endMs = Date.parse(page.end_time);
    expect(endMs).toBeGreaterThanOrEqual(before);
    expect(endMs).toBeLessThanOrEqual(platformNow());
    expect(page.start_time).toBe(isoAt(endMs - 3_600_000));
    expect(page.items).toHaveLength(108);
    expect(page.items.every((i: Item) => i.connector_id === 1)).toBe(true);
    const second = await okData(read(`${range(t0, t0 + 86_400_000)}&connector_id=2`));
    expect(second.items).toEqual(all.filter((s) => s.connector_id === 2));
  });

  it('pages raw samples by cursor without losing or repeating one', async () => {
    const whole = `${range(t0 - 60_000, platformNow())}&limit=97`;
    const { items, pages } = await readAll(whole);
    expect(pages).toBe(Math.ceil(all.length / 97));
    expect(items).toEqual(all);
    // A page ending between the two connectors' samples of one instant resumes with the second.
    const first = await okData(read(`${range(t0 + 600_000, t0 + 700_000)}&limit=1`));
    expect(first.items.map((i: Item) => i.connector_id)).toEqual([1]);
    const next = await okData(
      read(`${range(t0 + 600_000, t0 + 700_000)}&limit=1&cursor=${first.next_cursor}`),
    );
    expect(next.items[0]).toMatchObject({ timestamp: isoAt(t0 + 600_000), connector_id: 2 });
  });

  it('averages per minute and per 15 minutes: the mean of each measurement, the last state, the count', async () => {
    for (const [resolution, bucketMs] of [
      ['1m', 60_000],
      ['15m', 900_000],
    ] as const) {
      const page = await okData(read(`${range(t0 + 30_000, t0 + 3_590_000)}&resolution=${resolution}`));
      // Widened to whole buckets.
      expect(page.start_time).toBe(isoAt(t0));
      expect(page.end_time).toBe(isoAt(t0 + 3_600_000));
      const expected = expectedBuckets(
        all.filter((s) => Date.parse(s.timestamp) < t0 + 3_600_000),
        bucketMs,
      );
      expect(page.items).toHaveLength(expected.length);
      page.items.forEach((item: Item, i: number) => {
        const want = expected[i]!;
        expect(Object.keys(item).sort()).toEqual(Object.keys(want).sort());
        for (const [k, v] of Object.entries(want)) {
          if (typeof v === 'number') expect(item[k]).toBeCloseTo(v, 9);
          else expect(item[k]).toBe(v);
        }
      });
    }
  });

  it('pages averages over a long quiet stretch without empty pages, and the pages add up to one read', async () => {
    const whole = range(t0, platformNow());
    const { items, pages } = await readAll(`${whole}&resolution=1m&limit=25`);
    const expected = expectedBuckets(all, 60_000);
    expect(items.map((i) => [i.timestamp, i.connector_id, i.samples])).toEqual(
      expected.map((i) => [i.timestamp, i.connector_id, i.samples]),
    );
    // Windows of at most 25 minutes from the first sample on: 60 + 10 buckets of the old sessions over about
    // two windows each, the recent one in one; never a page for the quiet day between.
    expect(pages).toBeLessThanOrEqual(Math.ceil(expected.length / 25) + 3);
  });

  it('refuses what it cannot answer: a bad cursor, a cursor of another resolution, a bad range or limit', async () => {
    expectValidation(await read('cursor=bm90LWEtY3Vyc29y'), 'cursor', 'bm90LWEtY3Vyc29y');
    const raw = await okData(read(`${range(t0, t0 + 3_600_000)}&limit=1`));
    const wrong = await read(`${range(t0, t0 + 3_600_000)}&resolution=15m&cursor=${raw.next_cursor}`);
    expect(expectError(wrong, 400, 1001).details).toMatchObject({ field: 'cursor' });
    expectValidation(await read(range(t0, t0)), 'end_time', isoAt(t0));
    expectValidation(await read('limit=2001'), 'limit', '2001');
    expectValidation(await read('limit=0'), 'limit', '0');
    expectValidation(await read('resolution=5m'), 'resolution', '5m');
    expectValidation(await read('connector_id=0'), 'connector_id', '0');
    expect(expectError(await read('sample=1'), 400, 1001).details).toMatchObject({ field: 'sample' });
  });

  it('answers 404 for a charger of another tenant and one that does not exist', async () => {
    expectError(await read('', t, foreign), 404, 3001);
    expectError(await read('', other, dev), 404, 3001);
    const missing = await tp.http.get('/v1/operator/devices/no-such-device/telemetry', { token: t.token });
    expectError(missing, 404, 3001);
    // The foreign charger's own tenant reads it.
    const own = await okData(read(range(t0, t0 + 60_000), other, foreign));
    expect(own.items).toHaveLength(10);
  });
});
