import { beforeAll, describe, expect, it } from 'vitest';
import { expectValidation } from '../helpers/device-calls.js';
import { furtherCalls, isoAt, okData, type Tenant } from '../helpers/further-calls.js';
import { expectError, type RegisteredDevice, registerDevice } from '../helpers/platform.js';
import { platformPerFile } from '../helpers/platform-per-file.js';

/**
 * The further endpoints of DESIGN.md §9 over real HTTPS and SQLite: GET /v1/operator/energy, its buckets and
 * their integration of power, and its refusals. One platform for the file.
 */

const tp = platformPerFile();

const { sn, tenant, batch } = furtherCalls(() => tp);

describe('GET /v1/operator/energy', () => {
  const DAY = '2024-03-04';
  const at = (hms: string) => Date.parse(`${DAY}T${hms}Z`);
  /** Telemetry every `stepS` seconds from `from` to `to` inclusive. */
  function series(connector: number, fromMs: number, toMs: number, power: number, stepS = 5) {
    const out: Array<Record<string, unknown>> = [];
    for (let ms = fromMs; ms <= toMs; ms += stepS * 1000) {
      out.push({
        timestamp: isoAt(ms),
        connector_id: connector,
        state: power < 0 ? 'discharging' : power > 0 ? 'charging' : 'idle',
        power,
      });
    }
    return out;
  }
  async function upload(d: RegisteredDevice, records: Array<Record<string, unknown>>) {
    for (let i = 0; i < records.length; i += 500) {
      const res = await batch(d, records.slice(i, i + 500));
      expect(res.status).toBe(200);
      expect(res.body.data).toEqual({ accepted: Math.min(500, records.length - i), duplicates: 0 });
    }
  }
  let t: Tenant;
  let other: Tenant;
  let dev: RegisteredDevice;
  let second: RegisteredDevice;
  let foreign: RegisteredDevice;

  beforeAll(async () => {
    t = await tenant();
    other = await tenant();
    dev = await registerDevice(tp, sn(), t.siteId);
    second = await registerDevice(tp, sn(), t.siteId);
    foreign = await registerDevice(tp, sn(), other.siteId);
    await upload(dev, [
      // 10:10-10:20: 11 kW every 5 s, aligned on the 15-minute boundary → 1.8333 kWh.
      ...series(1, at('10:10:00'), at('10:20:00'), 11),
      // 12:00-12:06: V2G discharging at 5 kW → 0.5 kWh exported.
      ...series(2, at('12:00:00'), at('12:06:00'), -5),
      // 13:00 one sample at 22 kW, then 10 minutes of silence (not integrated), then 11 kW for 10 minutes.
      ...series(1, at('13:00:00'), at('13:00:00'), 22),
      ...series(1, at('13:10:00'), at('13:20:00'), 11),
      // 15:10:02-15:20:02: 11 kW every 5 s, not aligned on bucket boundaries.
      ...series(1, at('15:10:02'), at('15:20:02'), 11),
      // 16:00 and 16:05: exactly 5 minutes apart (integrated); 16:30 and 16:35:01: 301 s apart (not).
      ...series(1, at('16:00:00'), at('16:05:00'), 11, 300),
      ...series(1, at('16:30:00'), at('16:30:00'), 11),
      ...series(1, at('16:35:01'), at('16:35:01'), 11),
    ]);
    // The second charger of the site: 7 kW from 10:00 to 10:30 → 3.5 kWh.
    await upload(second, series(1, at('10:00:00'), at('10:30:00'), 7));
    await upload(foreign, series(1, at('10:00:00'), at('10:30:00'), 7));
  });
  const energy = (t0: Tenant, query: string) =>
    tp.http.get(`/v1/operator/energy?${query}`, { token: t0.token });
  const q = (from: string, to: string, interval: string, who = `device_id=${dev.deviceId}`) =>
    `${who}&start_time=${DAY}T${from}Z&end_time=${DAY}T${to}Z&interval=${interval}`;
  type Bucket = {
    start_time: string;
    end_time: string;
    energy_imported: number;
    energy_exported: number;
    avg_power: number;
    max_power: number;
    samples: number;
  };
  const empty = (from: string, to: string): Bucket => ({
    start_time: `${DAY}T${from}.000Z`,
    end_time: `${DAY}T${to}.000Z`,
    energy_imported: 0,
    energy_exported: 0,
    avg_power: 0,
    max_power: 0,
    samples: 0,
  });

  it('15m buckets: boundaries from start_time, energy integrated from power (11 kW × 5 min = 0.917 kWh)', async () => {
    const data = await okData(energy(t, q('10:00:00', '11:00:00', '15m')));
    expect(data).toEqual({
      device_id: dev.deviceId,
      interval: '15m',
      start_time: `${DAY}T10:00:00.000Z`,
      end_time: `${DAY}T11:00:00.000Z`,
      items: [
        {
          ...empty('10:00:00', '10:15:00'),
          energy_imported: 0.917,
          avg_power: 11,
          max_power: 11,
          samples: 60,
        },
        {
          ...empty('10:15:00', '10:30:00'),
          energy_imported: 0.917,
          avg_power: 11,
          max_power: 11,
          samples: 61,
        },
        empty('10:30:00', '10:45:00'),
        empty('10:45:00', '11:00:00'),
      ],
    });
  });

  it('1h buckets: exports from negative power, a gap over 5 minutes not integrated, exactly 5 minutes integrated', async () => {
    const data = await okData(energy(t, q('10:00:00', '17:00:00', '1h')));
    expect(data.items.map((b: Bucket) => [b.start_time.slice(11, 16), b.end_time.slice(11, 16)])).toEqual([
      ['10:00', '11:00'],
      ['11:00', '12:00'],
      ['12:00', '13:00'],
      ['13:00', '14:00'],
      ['14:00', '15:00'],
      ['15:00', '16:00'],
      ['16:00', '17:00'],
    ]);
    const [b10, b11, b12, b13, b14, b15, b16] = data.items as Bucket[];
    expect(b10).toMatchObject({ energy_imported: 1.833, energy_exported: 0, samples: 121, avg_power: 11 });
    expect(b11).toEqual(empty('11:00:00', '12:00:00'));
    expect(b12).toMatchObject({ energy_imported: 0, energy_exported: 0.5, samples: 73, avg_power: -5 });
    // 22 kW at 13:00 then 10 minutes without data: only the 10 minutes at 11 kW count.
    expect(b13).toMatchObject({ energy_imported: 1.833, energy_exported: 0, samples: 122, max_power: 22 });
    expect(b13!.avg_power).toBe(Math.round(((22 + 121 * 11) / 122) * 1000) / 1000);
    expect(b14).toEqual(empty('14:00:00', '15:00:00'));
    expect(b15).toMatchObject({ energy_imported: 1.833, samples: 121 });
    expect(b16).toMatchObject({ energy_imported: 0.917, samples: 4 });
  });

  it('splits an interval between two samples across the buckets it spans', async () => {
    // Samples at 15:10:02, 15:10:07, ... 15:20:02: 298 s before 15:15 and 302 s after it.
    const data = await okData(energy(t, q('15:00:00', '16:00:00', '15m')));
    expect(data.items.map((b: Bucket) => b.energy_imported)).toEqual([
      Math.round((11 * 298 * 1000) / 3600) / 1000,
      Math.round((11 * 302 * 1000) / 3600) / 1000,
      0,
      0,
    ]);
    expect(data.items.map((b: Bucket) => b.energy_imported)).toEqual([0.911, 0.923, 0, 0]);
    expect(data.items.map((b: Bucket) => b.samples)).toEqual([60, 61, 0, 0]);
  });

  it('widens a range that starts or ends inside 15 minutes to whole 15-minute buckets, and says so', async () => {
    // Asked 10:12-10:18: answered 10:00-10:30, the whole of 10:10-10:20 at 11 kW.
    const one = await okData(energy(t, q('10:12:00', '10:18:00', '1h')));
    expect(one.start_time).toBe(`${DAY}T10:00:00.000Z`);
    expect(one.end_time).toBe(`${DAY}T10:30:00.000Z`);
    expect(one.items).toEqual([
      {
        ...empty('10:00:00', '10:30:00'),
        energy_imported: 1.833,
        avg_power: 11,
        max_power: 11,
        samples: 121,
      },
    ]);
    // 15m buckets still start at the (widened) start: 10:45 → 10:45-11:00, 11:00-11:15.
    const later = await okData(energy(t, q('10:50:00', '11:05:00', '15m')));
    expect(later.items.map((b: Bucket) => [b.start_time.slice(11, 16), b.end_time.slice(11, 16)])).toEqual([
      ['10:45', '11:00'],
      ['11:00', '11:15'],
    ]);
  });

  it('clips the last bucket at end_time', async () => {
    const data = await okData(energy(t, q('10:00:00', '11:30:00', '1h')));
    expect(data.items.map((b: Bucket) => [b.start_time.slice(11, 19), b.end_time.slice(11, 19)])).toEqual([
      ['10:00:00', '11:00:00'],
      ['11:00:00', '11:30:00'],
    ]);
    expect(data.items.map((b: Bucket) => b.energy_imported)).toEqual([1.833, 0]);
  });

  it('1d buckets: a day’s total, and an empty next day', async () => {
    const data = await okData(
      energy(
        t,
        `device_id=${dev.deviceId}&start_time=2024-03-04T00:00:00Z&end_time=2024-03-06T00:00:00Z&interval=1d`,
      ),
    );
    expect(data.interval).toBe('1d');
    expect(data.items).toHaveLength(2);
    expect(data.items[0]).toMatchObject({
      start_time: '2024-03-04T00:00:00.000Z',
      end_time: '2024-03-05T00:00:00.000Z',
      // 600 s + 600 s + 600 s + 300 s at 11 kW.
      energy_imported: Math.round((11 * 2100 * 1000) / 3600) / 1000,
      energy_exported: 0.5,
      max_power: 22,
    });
    expect(data.items[0].energy_imported).toBe(6.417);
    expect(data.items[1]).toEqual({
      start_time: '2024-03-05T00:00:00.000Z',
      end_time: '2024-03-06T00:00:00.000Z',
      energy_imported: 0,
      energy_exported: 0,
      avg_power: 0,
      max_power: 0,
      samples: 0,
    });
  });

  it('site_id sums the site’s chargers and no one else’s', async () => {
    const data = await okData(energy(t, q('10:00:00', '11:00:00', '1h', `site_id=${t.siteId}`)));
    expect(data.site_id).toBe(t.siteId);
    expect(data.device_id).toBeUndefined();
    expect(data.items).toHaveLength(1);
    // 1.8333 + 3.5 kWh.
    expect(data.items[0]).toMatchObject({ energy_imported: 5.333, samples: 121 + 361, max_power: 11 });
  });

  it('refuses missing or both selectors, end before start and too many buckets: 400/1001', async () => {
    const range = `start_time=${DAY}T10:00:00Z&end_time=${DAY}T11:00:00Z`;
    expectValidation(await energy(t, range), 'device_id', null);
    expectValidation(
      await energy(t, `device_id=${dev.deviceId}&site_id=${t.siteId}&${range}`),
      'device_id',
      dev.deviceId,
    );
    expectValidation(
      await energy(t, `device_id=${dev.deviceId}&start_time=${DAY}T11:00:00Z&end_time=${DAY}T10:00:00Z`),
      'end_time',
      `${DAY}T10:00:00Z`,
    );
    expectValidation(
      await energy(t, `device_id=${dev.deviceId}&start_time=${DAY}T10:00:00Z&end_time=${DAY}T10:00:00Z`),
      'end_time',
      `${DAY}T10:00:00Z`,
    );
    // 32 days of 15-minute buckets: 3072 > 3000.
    expectValidation(
      await energy(
        t,
        `device_id=${dev.deviceId}&start_time=2024-01-01T00:00:00Z&end_time=2024-02-02T00:00:00Z&interval=15m`,
      ),
      'interval',
      '15m',
    );
    expectValidation(await energy(t, `device_id=${dev.deviceId}&${range}&interval=5m`), 'interval', '5m');
    expectValidation(
      await energy(t, `device_id=${dev.deviceId}&end_time=${DAY}T10:00:00Z`),
      'start_time',
      null,
    );
    expectValidation(
      await energy(t, `device_id=${dev.deviceId}&${range}&start_time=x`),
      'start_time',
      '[array of 2]',
    );
  });

  it('answers 404/3001 for another tenant’s device or site and for unknown ones', async () => {
    const range = `start_time=${DAY}T10:00:00Z&end_time=${DAY}T11:00:00Z`;
    expectError(await energy(t, `device_id=${foreign.deviceId}&${range}`), 404, 3001);
    expectError(await energy(t, `site_id=${other.siteId}&${range}`), 404, 3001);
    expectError(await energy(t, `device_id=dev_00000000000000000000&${range}`), 404, 3001);
    // The owner sees it.
    const own = await okData(energy(other, `device_id=${foreign.deviceId}&${range}`));
    expect(own.items[0].energy_imported).toBe(3.5);
  });
});
