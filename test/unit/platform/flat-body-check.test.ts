import { describe, expect, it } from 'vitest';
import * as z from 'zod/mini';
import { compileFlatCheck } from '../../../platform/http/flat-body-check.js';
import { quickTelemetryBatch, quickTelemetryRecord } from '../../../platform/http/routes/telemetry-bodies.js';
import { TelemetryBatchRequest, TelemetryRecord } from '../../../shared/index.js';

const valid = {
  timestamp: '2026-11-26T10:00:05.000Z',
  connector_id: 1,
  state: 'charging',
  voltage: 231.2,
  current: 31.9,
  power: 22.1,
  energy_delivered: 12.345,
  soc: 57,
  temperature: 31.5,
};

/** The rule every quick check keeps: it accepts only what the schema accepts, and answers what zod answers. */
function expectNoMoreThanZod(input: unknown) {
  const quick = quickTelemetryRecord(input);
  const parsed = z.safeParse(TelemetryRecord, input);
  if (quick !== undefined) {
    expect(parsed.success, JSON.stringify(input)).toBe(true);
    expect(quick).toStrictEqual(parsed.data);
  }
  return { quick: quick !== undefined, zod: parsed.success };
}

describe('quick telemetry record check', () => {
  it.each([
    ['a full record', valid],
    ['only the required fields', { timestamp: valid.timestamp, connector_id: 2, state: 'idle' }],
    ['an offset timestamp', { ...valid, timestamp: '2026-11-26T11:00:05+01:00' }],
    ['no fraction of a second', { ...valid, timestamp: '2026-11-26T10:00:05Z' }],
    ['a leap day', { ...valid, timestamp: '2028-02-29T00:00:00Z' }],
    ['bounds included', { ...valid, voltage: 0, soc: 100, connector_id: 16, temperature: -100 }],
    ['-0', { ...valid, power: -0 }],
    ['discharging with negative power', { ...valid, state: 'discharging', power: -7.4 }],
  ])('accepts %s as zod does', (_name, input) => {
    expect(expectNoMoreThanZod(input)).toEqual({ quick: true, zod: true });
  });

  it.each([
    ['a missing timestamp', { connector_id: 1, state: 'idle' }],
    ['an impossible date', { ...valid, timestamp: '2026-02-30T10:00:00Z' }],
    ['a timestamp without zone', { ...valid, timestamp: '2026-11-26T10:00:05' }],
    ['a date as a number', { ...valid, timestamp: 1764151205000 }],
    ['a fractional connector', { ...valid, connector_id: 1.5 }],
    ['connector 0', { ...valid, connector_id: 0 }],
    ['connector 17', { ...valid, connector_id: 17 }],
    ['an unknown state', { ...valid, state: 'sleeping' }],
    ['a voltage over 2000', { ...valid, voltage: 2000.1 }],
    ['soc 57.5', { ...valid, soc: 57.5 }],
    ['a null measurement', { ...valid, power: null }],
    ['a number as text', { ...valid, power: '22.1' }],
    ['discharging with positive power', { ...valid, state: 'discharging', power: 7.4 }],
    ['discharging without power', { timestamp: valid.timestamp, connector_id: 1, state: 'discharging' }],
    ['an array', [valid]],
    ['null', null],
  ])('leaves %s to zod, which refuses it', (_name, input) => {
    expect(expectNoMoreThanZod(input)).toEqual({ quick: false, zod: false });
  });

  it.each([
    ['an unknown key (zod strips it)', { ...valid, firmware: '1.2' }],
    ['phase details (not checked here)', { ...valid, phase_details: { l1: { voltage: 230 } } }],
  ])('leaves %s to zod, which accepts it', (_name, input) => {
    expect(expectNoMoreThanZod(input)).toEqual({ quick: false, zod: true });
  });

  it('accepts nothing zod refuses, over many records with a field changed at random', () => {
    // A seeded generator: the same records on every run.
    let seed = 42;
    const random = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const values = [
      0,
      -0,
      1,
      -1,
      0.5,
      16,
      17,
      100,
      101,
      1999.9,
      2000,
      2000.5,
      -2000,
      -2001,
      1_000_000,
      1_000_001,
      2 ** 53,
      'charging',
      'discharging',
      'idle',
      'fault',
      'unavailable',
      '',
      null,
      true,
      [],
      {},
      '2026-11-26T10:00:05.123456Z',
      '2026-13-01T00:00:00Z',
      '2026-11-26T24:00:00Z',
      '2026-11-26T10:00:05+0100',
    ];
    const keys = [...Object.keys(valid), 'phase_details', 'extra'];
    let quickCount = 0;
    for (let i = 0; i < 20_000; i++) {
      const input: Record<string, unknown> = { ...valid };
      for (let changes = 1 + Math.floor(random() * 3); changes > 0; changes--) {
        const key = keys[Math.floor(random() * keys.length)]!;
        if (random() < 0.15) delete input[key];
        else input[key] = values[Math.floor(random() * values.length)];
      }
      if (expectNoMoreThanZod(input).quick) quickCount++;
    }
    // The check must still take the common case, or it saves nothing.
    expect(quickCount).toBeGreaterThan(1000);
  });

  it('refuses to compile a schema whose refinements it does not state', () => {
    expect(() => compileFlatCheck(TelemetryRecord)).toThrow(/1 refinement/);
    const plain = z.object({ n: z.number().check(z.minimum(1)) });
    expect(compileFlatCheck(plain)({ n: 1 })).toEqual({ n: 1 });
    expect(compileFlatCheck(plain)({ n: 0 })).toBeUndefined();
  });
});

describe('quick telemetry batch check', () => {
  const batch = (n: number) => ({ records: Array.from({ length: n }, () => valid) });
  it.each([
    ['one record', batch(1), true],
    ['500 records', batch(500), true],
    ['no record', batch(0), false],
    ['501 records', batch(501), false],
    ['a bad record among good ones', { records: [valid, { ...valid, soc: 101 }] }, false],
    ['a key beside records', { ...batch(1), device_id: 'x' }, false],
    ['records not an array', { records: valid }, false],
  ])('%s', (_name, input, quick) => {
    const answer = quickTelemetryBatch(input);
    expect(answer !== undefined).toBe(quick);
    if (answer !== undefined) expect(answer).toStrictEqual(z.parse(TelemetryBatchRequest, input));
  });
});
